"""The log-template catalogue: data files plus a small loader.

Each ``*.toml`` file in this folder (except ``layouts.toml``, which describes log line layouts)
holds ``[[template]]`` entries, one per log message template::

    [[template]]
    id = "ks.checkpoint.read"                # stable id: <family>.<area>.<what>[_v<first version>]
    product = "kafka-streams"                # kafka-streams | kafka-client | nifi
    logger = "ProcessorStateManager"         # class simple name the line is printed under: the classifier's gate
                                             # (catalogue.gate.worth_trying) sets aside a line below WARN whose
                                             # logger, printed whole and outside Kafka Streams' package, is none of
                                             # these classes nor a loggers.toml alias of one
    level = "INFO"                           # level in the newest version ("-" for exception texts)
    literal = "initialized from checkpoint with offset"   # substring every matching message contains
    pattern = '''^State store (?P<store>\\S+) initialized ...'''  # Python regex, applied to the body
    event = "CHECKPOINT_READ"                # canonical name, see VOCABULARY.md
    versions = "2.6-4.3"
    samples = ["stream-thread [...] stream-task [0_1] State store counts initialized ..."]
    expect = { store = "counts", offset = 10452 }   # fields the first sample must yield
    reference = "streams/src/main/java/.../ProcessorStateManager.java"

Optional keys: ``prefix`` (list of prefix kinds the message must carry, see
:data:`PREFIX_KINDS`), ``also`` (secondary events the same line implies), ``item`` (regex for one
element of the ``partitions`` group, when the default ``topic-partition`` item does not fit),
``priority`` (higher is tried first; negative for catch-all exception texts), ``note``.

The ``pattern`` is matched against the message *body*: the message with its leading Kafka/NiFi
prefix (``stream-thread [..] task [..] ``, ``[Consumer clientId=.., groupId=..] ``,
``ConsumeKinesis[id=..] ``) removed, so a template never repeats the prefix. Named groups must be
fields of :data:`FIELD_TYPES` or the list groups ``partitions`` / ``tasks``.

Adding a template needs no code: add an entry with a real sample and run the catalogue test. A site adds its own
templates and layouts without forking, in a user catalogue folder (:mod:`toolkit.catalogue.user`, ``--catalogue``).
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Iterable, Mapping

from toolkit.regex import to_java_regex

#: Typed fields a template may capture (named groups), with their Spark SQL type.
FIELD_TYPES: dict[str, str] = {
    "app_id": "string",
    "client_id": "string",
    "process_id": "string",
    "stream_thread": "string",
    "task_id": "string",
    "task_role": "string",
    "store": "string",
    "topic": "string",
    "partition": "int",
    "offset": "bigint",
    "end_offset": "bigint",
    "generation": "int",
    "member_id": "string",
    "from_state": "string",
    "to_state": "string",
    "records": "bigint",
    "count": "bigint",
    "duration_ms": "bigint",
    "duration_ns": "bigint",
    "limit_ms": "bigint",
    "component_type": "string",
    "component_id": "string",
    "table": "string",
    "source_table": "string",
    "stream": "string",
    "shard_id": "string",
    "sequence_number": "string",
    "position_type": "string",
    "error_class": "string",
    "config_class": "string",
    "version": "string",
    "pid": "bigint",
    "node": "string",
    "path": "string",
    "detail": "string",
}

#: Groups whose text is parsed into list columns rather than copied.
LIST_GROUPS: frozenset[str] = frozenset({"partitions", "tasks"})

#: Fields an ``item`` regex may capture (one element of the ``partitions`` list).
ITEM_FIELDS: tuple[str, ...] = ("topic", "partition", "offset", "end_offset", "records")

#: Default ``item``: a TopicPartition rendered as ``<topic>-<partition>``.
DEFAULT_ITEM = r"(?<![^\s,\[\]{}=:])(?P<topic>[^\s,\[\]{}=:]+)-(?P<partition>\d+)"

#: Values of the ``prefix`` key (what the message starts with).
PREFIX_KINDS: frozenset[str] = frozenset(
    {
        "task",  # task [..] / stream-task [..] / standby-task [..], with or without stream-thread before it
        "stream-client",
        "stream-thread",
        "global-stream-thread",
        "state-updater",
        "consumer",
        "producer",
        "admin",
        "component",  # NiFi <Type>[id=<uuid>]
        "none",
    }
)

PRODUCTS: frozenset[str] = frozenset({"kafka-streams", "kafka-client", "nifi"})

_NON_TEMPLATE_FILES = frozenset({"layouts.toml", "loggers.toml", "runs.toml"})
_EVENT_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


class CatalogueError(ValueError):
    """A catalogue entry is malformed; the message names the entry and the problem."""


@functools.cache
def _group_index(pattern: str) -> Mapping[str, int]:
    """A pattern's named groups, compiled once: the catalogue has more patterns than ``re`` caches, so
    every analysis would otherwise compile them all again."""
    return re.compile(pattern).groupindex


@dataclass(frozen=True)
class Template:
    """One log message template and what it means."""

    id: str
    product: str
    logger: str
    level: str
    literal: str
    pattern: str
    event: str
    versions: str
    samples: tuple[str, ...]
    reference: str
    expect: Mapping[str, object] = field(default_factory=dict)
    prefix: tuple[str, ...] = ()
    also: tuple[str, ...] = ()
    item: str | None = None
    priority: int = 0
    note: str | None = None
    source_file: str = ""

    @property
    def groups(self) -> dict[str, int]:
        """Named group -> group number (the same numbering in Python and Java regexes)."""
        return dict(_group_index(self.pattern))

    @property
    def item_groups(self) -> dict[str, int]:
        """Named group -> group number of the ``partitions`` item regex."""
        return dict(_group_index(self.item or DEFAULT_ITEM))

    @property
    def key(self) -> str:
        """The dispatch word: the longest word of the literal (first one on ties).

        Every message this template matches contains the literal, hence this whole word.
        """
        return max(literal_tokens(self.literal), key=len)

    @property
    def multiline(self) -> bool:
        """True when the pattern reads past the first line of the message (``\\n`` or ``(?s)``).

        Every other pattern is matched against the first line only, so continuation lines folded
        into a record (a stack trace, a pasted line) never hide its event.
        """
        return "\\n" in self.pattern or "(?s)" in self.pattern

    @property
    def java_pattern(self) -> str:
        """The pattern in Java syntax, for Spark's ``rlike`` / ``regexp_extract``."""
        return to_java_regex(self.pattern)

    @property
    def java_item(self) -> str:
        """The ``partitions`` item regex in Java syntax."""
        return to_java_regex(self.item or DEFAULT_ITEM)


def _unescaped_brace(pattern: str) -> bool:
    """True when ``pattern`` has a ``{`` or ``}`` that Java would reject (not a quantifier)."""
    without_escapes = re.sub(r"\\.", "", pattern)
    without_quantifiers = re.sub(r"\{\d+(?:,\d*)?\}", "", without_escapes)
    # braces inside character classes are literal in both engines
    without_classes = re.sub(r"\[[^\]]*\]", "", without_quantifiers)
    return "{" in without_classes or "}" in without_classes


_TOKEN_SPLIT = re.compile(r"[^A-Za-z0-9]+")


def literal_tokens(text: str) -> list[str]:
    """Words of letters/digits, split exactly as the classifier splits messages."""
    return [w for w in _TOKEN_SPLIT.split(text) if w]


def _at_word_boundaries(literal: str, sample: str) -> bool:
    """True when some occurrence of ``literal`` in ``sample`` neither starts nor ends inside a word.

    The classifier finds candidate templates by whole words of the message, so a literal that
    cut a word in half ("Terminat") would never be found.
    """
    start = sample.find(literal)
    while start >= 0:
        end = start + len(literal)
        before_ok = start == 0 or not (sample[start - 1].isalnum() and literal[0].isalnum())
        after_ok = end == len(sample) or not (sample[end].isalnum() and literal[-1].isalnum())
        if before_ok and after_ok:
            return True
        start = sample.find(literal, start + 1)
    return False


def _validate(t: Template) -> None:
    def fail(problem: str) -> None:
        raise CatalogueError(f"{t.source_file}: template {t.id!r}: {problem}")

    if t.product not in PRODUCTS:
        fail(f"unknown product {t.product!r}")
    if not _EVENT_NAME.match(t.event) or not all(_EVENT_NAME.match(a) for a in t.also):
        fail("event names must be UPPER_SNAKE_CASE")
    if not t.literal:
        fail("empty literal")
    if not t.samples:
        fail("needs at least one sample")
    if "(?P=" in t.pattern:
        fail("back-references are not supported")
    for regex in (t.pattern, t.item or DEFAULT_ITEM):
        try:
            re.compile(regex)
        except re.error as exc:
            fail(f"bad regex {regex!r}: {exc}")
        if _unescaped_brace(regex):
            fail(f"escape literal braces as \\{{ \\}} (Java rejects them): {regex!r}")
    unknown = set(t.groups) - set(FIELD_TYPES) - LIST_GROUPS
    if unknown:
        fail(f"unknown group names {sorted(unknown)}")
    if t.item and "partitions" not in t.groups:
        fail("'item' needs a 'partitions' group")
    if set(t.item_groups) - set(ITEM_FIELDS) or "topic" not in t.item_groups:
        fail(f"item groups must include 'topic' and be among {ITEM_FIELDS}")
    if set(t.prefix) - PREFIX_KINDS:
        fail(f"unknown prefix kinds {sorted(set(t.prefix) - PREFIX_KINDS)}")
    unknown_expect = set(t.expect) - set(FIELD_TYPES) - {"task_ids", "partitions"}
    if unknown_expect:
        fail(f"expect names unknown fields {sorted(unknown_expect)}")
    if not literal_tokens(t.literal):
        fail("the literal needs at least one word of letters/digits")
    for sample in t.samples:
        if t.literal not in sample:
            fail(f"literal {t.literal!r} not in sample {sample[:80]!r}")
        if not _at_word_boundaries(t.literal, sample):
            fail(f"literal {t.literal!r} must start and end at word boundaries in {sample[:80]!r}")


def _template_from_entry(entry: Mapping[str, object], source_file: str) -> Template:
    required = ("id", "product", "logger", "level", "literal", "pattern", "event", "versions", "samples", "reference")
    missing = [k for k in required if k not in entry]
    if missing:
        raise CatalogueError(f"{source_file}: entry {entry.get('id', '?')!r} lacks {missing}")
    known = set(required) | {"expect", "prefix", "also", "item", "priority", "note"}
    extra = set(entry) - known
    if extra:
        raise CatalogueError(f"{source_file}: entry {entry['id']!r} has unknown keys {sorted(extra)}")
    return Template(
        id=str(entry["id"]),
        product=str(entry["product"]),
        logger=str(entry["logger"]),
        level=str(entry["level"]),
        literal=str(entry["literal"]),
        pattern=str(entry["pattern"]),
        event=str(entry["event"]),
        versions=str(entry["versions"]),
        samples=tuple(str(s) for s in entry["samples"]),  # type: ignore[union-attr]
        reference=str(entry["reference"]),
        expect=dict(entry.get("expect", {})),  # type: ignore[arg-type]
        prefix=tuple(entry.get("prefix", ())),  # type: ignore[arg-type]
        also=tuple(entry.get("also", ())),  # type: ignore[arg-type]
        item=entry.get("item"),  # type: ignore[arg-type]
        priority=int(entry.get("priority", 0)),  # type: ignore[arg-type]
        note=entry.get("note"),  # type: ignore[arg-type]
        source_file=source_file,
    )


def templates_from_toml(text: str, source_file: str = "<string>") -> list[Template]:
    """Parse and validate the ``[[template]]`` entries of one TOML document."""
    data = tomllib.loads(text)
    templates = [_template_from_entry(e, source_file) for e in data.get("template", [])]
    for t in templates:
        _validate(t)
    return templates


def catalogue_files() -> list[str]:
    """Names of the template files shipped in this package."""
    root = resources.files(__name__)
    return sorted(
        p.name for p in root.iterdir() if p.name.endswith(".toml") and p.name not in _NON_TEMPLATE_FILES
    )


@functools.cache
def _shipped_templates() -> tuple[Template, ...]:
    """The shipped template files, parsed and validated once per process (package data never changes while
    it runs; parsing and validating every template takes a noticeable fraction of a second)."""
    root = resources.files(__name__)
    templates: list[Template] = []
    for name in catalogue_files():
        templates.extend(templates_from_toml(root.joinpath(name).read_text(encoding="utf-8"), name))
    return tuple(templates)


#: Templates of the user catalogue in use (``--catalogue DIR``, :mod:`toolkit.catalogue.user`), after the shipped ones.
_user_templates: tuple[Template, ...] = ()


def set_user_templates(templates: Iterable[Template]) -> None:
    """Make ``templates`` (a site's own, already validated) part of every :func:`load_templates` answer from now on;
    an empty sequence returns to the shipped catalogue alone. :func:`toolkit.catalogue.user.activate` calls it."""
    global _user_templates
    _user_templates = tuple(templates)


def user_templates() -> tuple[Template, ...]:
    """The templates :func:`set_user_templates` added (none by default)."""
    return _user_templates


def load_templates(extra: Iterable[Template] = (), *, user: bool = True) -> list[Template]:
    """All catalogue templates, validated, in matching order (priority first, then file order).

    ``extra`` templates (e.g. site-specific ones) are appended before ordering, after the user catalogue's
    (:func:`set_user_templates`; left out with ``user=False``). The shipped files are read once per process; every
    call returns a new list (templates are frozen, the list is the caller's).
    """
    templates = [*_shipped_templates(), *(_user_templates if user else ()), *extra]
    seen: set[str] = set()
    for t in templates:
        if t.id in seen:
            raise CatalogueError(f"duplicate template id {t.id!r}")
        seen.add(t.id)
    # sorted() is stable, so equal priorities keep file order
    return sorted(templates, key=lambda t: -t.priority)


def logger_aliases() -> dict[str, tuple[str, ...]]:
    """Class name -> other logger class names its messages are printed under (``loggers.toml``)."""
    text = resources.files(__name__).joinpath("loggers.toml").read_text(encoding="utf-8")
    out: dict[str, tuple[str, ...]] = {}
    for entry in tomllib.loads(text).get("alias", []):
        out[str(entry["class"])] = out.get(str(entry["class"]), ()) + tuple(str(n) for n in entry["printed_as"])
    return out


def logger_wrappers() -> tuple[str, ...]:
    """Logger classes that print other classes' messages (``loggers.toml`` ``wrappers``): always tried."""
    text = resources.files(__name__).joinpath("loggers.toml").read_text(encoding="utf-8")
    return tuple(str(n) for n in tomllib.loads(text).get("wrappers", []))


def vocabulary_path() -> str:
    """Path of VOCABULARY.md (the documented list of canonical event names)."""
    return str(resources.files(__name__).joinpath("VOCABULARY.md"))


def documented_events() -> set[str]:
    """Event names listed in the first column of VOCABULARY.md's tables."""
    text = resources.files(__name__).joinpath("VOCABULARY.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|", text, flags=re.MULTILINE))


__all__ = [
    "CatalogueError",
    "DEFAULT_ITEM",
    "FIELD_TYPES",
    "ITEM_FIELDS",
    "LIST_GROUPS",
    "PREFIX_KINDS",
    "PRODUCTS",
    "Template",
    "catalogue_files",
    "documented_events",
    "literal_tokens",
    "load_templates",
    "logger_aliases",
    "logger_wrappers",
    "set_user_templates",
    "templates_from_toml",
    "user_templates",
    "vocabulary_path",
]
