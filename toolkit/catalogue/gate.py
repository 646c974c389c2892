"""Which records a catalogue template may match: the classifier's gate, decided while the logs are read.

Most lines of a real log cannot match any template: the application's own lines, client chatter at DEBUG.
:func:`worth_trying` tells them apart with a few cheap tests on a record's logger, level and message; the
parse marks every record with it (``records.parquet`` is partitioned by ``candidate``), so classification,
configuration dumps and run markers read only the candidates, never every record.

A record is a candidate when a template may match it (:func:`worth_trying`), when its message opens with a
process-start marker (:data:`RUN_MARKER_HEADS`), or when it is a multi-line ``<Class>Config values:`` dump.
"""

from __future__ import annotations

import re
from typing import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from toolkit.catalogue import Template, load_templates, logger_aliases, logger_wrappers
from toolkit.catalogue.markers import run_markers

#: Levels at which every record is tried against the templates, whatever its logger.
ALWAYS_TRY_LEVELS = ("WARN", "ERROR")
#: Logger class endings always tried: consumer/config classes were split and renamed across client versions.
ALWAYS_TRY_CLASS_SUFFIXES = ("Config", "Consumer", "Coordinator")
#: Kafka Streams' package however a layout abbreviates it (``org.apache.kafka.streams.``, ``o.a.k.s.``,
#: Quarkus' ``org.apa.kaf.str.``, logback's ``o.a.kafka.streams.``): always tried, its internals change
#: class names across versions. Other packages are judged by their class name, which abbreviation keeps.
STREAMS_PACKAGE = r"^o[a-z]*\.a[a-z]*\.k[a-z]*\.s[a-z]*\."
#: A logger printed whole: a dotted name, or a capitalised class name alone (``%c{1}``, ``%logger{0}``).
CLEAN_LOGGER = r"^(?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*$"
#: Literal heads of every process-start marker (see :mod:`toolkit.events.runs`): a record whose message
#: starts with none of them cannot be a marker.
RUN_MARKER_HEADS = run_markers().heads
#: The first line of a configuration dump (``toolkit.events.config``).
CONFIG_HEADER = r"^(\w+Config) values: ?(?:\n|$)"


def logger_class(logger: Column) -> Column:
    """``org.apache.kafka.streams.processor.internals.StreamThread$1`` / ``o.a.k.s.p.i.StreamThread`` -> ``StreamThread``."""
    return F.substring_index(F.substring_index(logger, ".", -1), "$", 1)


def simple_class(logger: str) -> str:
    return logger.rsplit(".", 1)[-1].split("$", 1)[0]


def unbound(templates: Sequence[Template]) -> list[Template]:
    """Templates printed under no logger of their own (exception texts are logged by whoever caught them)."""
    return [t for t in templates if not t.logger or t.logger == "-" or t.logger.endswith(("Exception", "Error"))]


def worth_trying(templates: Sequence[Template] | None = None, *, logger: Column | None = None,
                 level: Column | None = None, message: Column | None = None) -> Column:
    """Cheap test whether a record can match any template at all (most lines of a real log cannot).

    A record is skipped only when the gate can tell cheaply that no template is printed under its
    logger: the logger is printed whole (a dotted name or a capitalised class name), outside
    Kafka Streams' package however abbreviated, and its class is neither a template's class nor a name
    that class is printed under (``loggers.toml``); and the record is below WARN and carries none
    of the literals of templates not tied to a logger (exception texts are logged by whoever caught
    them). A missing logger, or one cut by a width pattern (``reamThread``, ``...Thread``), goes
    through to the literal prefilter. The test is a few substring checks and a hash-set lookup.

    ``logger``, ``level`` and ``message`` default to the record columns of those names; a literal may be looked
    for in a longer text that holds the message (the whole line: a few more candidates, none lost).
    """
    templates = list(load_templates() if templates is None else templates)
    logger = F.col("logger") if logger is None else logger
    level = F.col("level") if level is None else level
    message = F.col("message") if message is None else message
    free = unbound(templates)
    classes = {simple_class(t.logger) for t in templates if t not in free}
    aliases = logger_aliases()
    classes |= {name for base in classes for name in aliases.get(base, ())}
    cls = logger_class(logger)
    gate = (logger.isNull() | (logger == "") | level.isNull() | level.isin(*ALWAYS_TRY_LEVELS)
            | cls.isin(*sorted(classes)))
    gate = gate | (logger.startswith("o") & logger.rlike(STREAMS_PACKAGE))
    for suffix in ALWAYS_TRY_CLASS_SUFFIXES:
        gate = gate | cls.endswith(suffix)
    gate = gate | ~logger.rlike(CLEAN_LOGGER) | cls.isin(*logger_wrappers())
    literals = sorted({t.literal for t in free}, key=lambda lit: (len(lit), lit))
    # A literal that holds a shorter one adds nothing to the OR, only one more pass over every message. A long
    # literal is searched as a regular expression: Java skips through the text by the literal's length.
    for i, literal in enumerate(literals):
        if not any(shorter in literal for shorter in literals[:i]):
            gate = gate | message.rlike(re.escape(literal))
    return gate


def is_candidate(templates: Sequence[Template] | None = None, *, logger: Column | None = None,
                 level: Column | None = None, text: Column | None = None, message_head: Column | None = None,
                 continued: Column | None = None) -> Column:
    """A record classification, configuration dumps or run markers may need (see the module's docstring).

    Reads the record columns ``logger``, ``level``, ``message`` and ``line_count`` unless given: ``text`` (where
    the literals of :func:`worth_trying` are looked for: the message or a text holding it), ``message_head`` (the
    message's first characters, enough for a marker or a dump's header line) and ``continued`` (the record has
    continuation lines)."""
    message = F.col("message")
    head = message if message_head is None else message_head
    marker = None
    for start in RUN_MARKER_HEADS:
        test = head.startswith(start)
        marker = test if marker is None else marker | test
    # A dump's values are its continuation lines: a one-line record is no dump worth reading.
    continued = (F.col("line_count") > 1) if continued is None else continued
    dump = continued & head.rlike(CONFIG_HEADER)
    gate = worth_trying(templates, logger=logger, level=level, message=message if text is None else text)
    return F.coalesce(gate | marker | dump, F.lit(True))
