"""One physical line -> its fields, as Spark column expressions, for the files of one :class:`ReadPlan`.

Files that share a layout, a wrapper chain and a clean-up are read with one plan: every expression below
is written for that layout alone, so a line pays for its own layout's regular expression and no other
(a plan that chose among layouts per line paid for a CASE over all of them). The work per line is kept to
what a record start needs:

* the layout's *head* (stamp, level, thread, logger) is matched once with an anchored regular expression
  that stops where the message begins, and rewritten into its fields; the message is the rest of the line
  (:attr:`toolkit.layouts.catalogue.Layout.head`);
* Kafka's `` (logger)`` trailer is cut off the line's end with string functions, not a regex over the line;
* a line the layout does not fit is tried with the generic layout only when it is not a record start;
* stamps of ISO shape are read by Spark's cast (:mod:`toolkit.layouts.timestamps`);
* colour codes and paste markup are looked for only in files whose first lines carry them
  (:attr:`toolkit.layouts.detection.Detection.cleaning`).

:func:`line_fields` adds the columns; later steps select what they need and Spark computes nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from toolkit.layouts.catalogue import (
    ANSI_ESCAPE, CANONICAL_LEVELS, DATED_STAMP, DOTTED_NAME, FIELD_SEP, FIELDS, LEVEL_HEAD, PASTE_MARKUP, PASTE_TAGS,
    STACK_LINE, TRAILER_NAME, UNCAUGHT_HEAD, WRAPPER_TS_FORMATS, Catalogue, Layout, split_head,
)
from toolkit.layouts.detection import ANSI, PASTE, SEP
from toolkit.layouts.timestamps import generic_timestamp, layout_timestamp, parse_stamps
from toolkit.regex import to_java_regex
from toolkit.spark import where_computed

#: The generic layout's head groups, in the order its rewrite writes them.
GENERIC_GROUPS = ("ts", "level", "thread_a", "thread", "thread_c", "logger")
#: Names of the head fields a named layout's rewrite writes (the message is the rest of the line).
HEAD_GROUPS = ("ts", "level", "thread", "logger")


@dataclass(frozen=True)
class ReadPlan:
    """The files read with one Spark plan: one layout (None: no named layout fits), one wrapper chain and one
    set of clean-up steps."""

    layout: str | None
    wrappers: tuple[str, ...] = ()
    cleaning: frozenset[str] = frozenset()

    @property
    def id(self) -> str:
        return "|".join([self.layout or "-", "+".join(self.wrappers), ",".join(sorted(self.cleaning))])


def _blank() -> Column:
    return F.lit(None).cast("string")


def _without_colour_codes(lines: DataFrame) -> DataFrame:
    """``text`` without ANSI colour codes (the regex runs only on lines holding an escape character)."""
    text = F.col("text")
    return lines.withColumn("text", F.when(text.contains("\u001b"), F.regexp_replace(text, ANSI_ESCAPE, ""))
                            .otherwise(text))


def with_clean_text(lines: DataFrame, cleaning: frozenset[str]) -> DataFrame:
    """Add ``text``: the raw line (``value``) without the colour codes and paste markup its file carries (see
    :class:`ReadPlan`). Each step is a column of its own, so a step reads the one before once."""
    lines = lines.withColumn("text", F.col("value"))
    text = F.col("text")
    if ANSI in cleaning:
        lines = _without_colour_codes(lines)
    if PASTE in cleaning:
        # Paste markup sits only at a line's start or end (see PASTE_MARKUP): test those characters, not the line.
        pasted = text.startswith("`") | text.endswith("`")
        for tag in PASTE_TAGS:
            pasted = pasted | text.startswith("{" + tag) | text.endswith("{" + tag + "}")
        lines = lines.withColumn("text", F.when(pasted, F.regexp_replace(text, PASTE_MARKUP, "")).otherwise(text))
        # JIRA escapes markup characters of pasted text: PARTITIONS\_ASSIGNED, \*bold\*.
        lines = lines.withColumn("text", F.when(text.contains("\\") & (text.contains("\\_") | text.contains("\\*")),
                                                F.regexp_replace(F.regexp_replace(text, r"\\\*", ""), r"\\_", "_"))
                                 .otherwise(text))
    if SEP in cleaning:
        lines = lines.withColumn("text", F.translate(text, FIELD_SEP, " "))
    return lines


def with_unwrapped(lines: DataFrame, chain: tuple[str, ...], cat: Catalogue) -> DataFrame:
    """``text`` without one chain of wrapper prefixes; adds ``wrap_host`` and ``_wrap_ts`` (the wrapper's stamp
    text). Each wrapper's prefix is matched once and is a column of its own."""
    lines = lines.withColumns({"wrap_host": _blank(), "_wrap_ts": _blank()})
    text = F.col("text")
    for wid in chain:
        w = cat.wrappers[wid]
        if w.json_key:  # one JSON object per line: the printed line is a field (escapes decoded)
            keys = [w.json_key] + ([w.json_ts_key] if w.json_ts_key else [])
            lines = lines.withColumn("_wj", F.when(text.startswith("{"), F.from_json(
                text, StructType([StructField(k, StringType()) for k in keys]), {"mode": "PERMISSIVE"})))
            inner = F.col("_wj").getField(w.json_key)
            if w.json_ts_key:
                lines = lines.withColumn("_wrap_ts", F.when(inner.isNotNull(), F.col("_wj").getField(w.json_ts_key)))
            lines = lines.withColumn("text", F.when(inner.isNotNull(), F.regexp_replace(inner, r"\r?\n$", ""))
                                     .otherwise(text)).drop("_wj")
            continue
        java = to_java_regex(w.pattern)
        groups = w.regex.groupindex
        lines = lines.withColumn("_wp", F.regexp_extract(text, java, 0))
        prefix = F.col("_wp")
        found = {}
        if "wrap_host" in groups:
            found["wrap_host"] = _some(F.regexp_extract(prefix, java, groups["wrap_host"]))
        if "wrap_ts" in groups:
            found["_wrap_ts"] = _some(F.regexp_extract(prefix, java, groups["wrap_ts"]))
        found["text"] = F.when(prefix != "", _rest(text, prefix)).otherwise(text)
        lines = lines.withColumns(found).drop("_wp")
    return lines


def _rest(text: Column, head: Column) -> Column:
    """``text`` after its first ``length(head)`` characters (``head`` is a prefix of it)."""
    return F.substring(text, F.length(head) + 1, F.lit(2**31 - 1))


def _some(col: Column) -> Column:
    """``col``, null when empty (``nullif`` would make Spark copy the whole expression into every use)."""
    return F.when(col != "", col)


def _bytes_from(text: Column, start: Column, length: Column | None = None) -> Column:
    """``text`` from byte ``start`` (1-based), ``length`` bytes or to its end: a cut by byte offsets, which are
    known without counting the characters before them."""
    return F.substring(text.cast("binary"), start, length if length is not None else F.lit(2**31 - 1)).cast("string")


def with_head_fields(lines: DataFrame, name: str, text: Column, head: str, names: tuple[str, ...],
                     when: Column | None = None) -> DataFrame:
    r"""Add ``name`` (the text a record's head matched, "" where it does not fit; only where ``when`` holds) and
    ``name``\ ``_f``: the head's fields in the order of ``names`` (item ``i + 1``, null where the head does not fit).

    One anchored regex over the line finds the head; the fields are read off that short text by the same regex.
    The rest of the line (the message) is not copied: it is cut only for the records that need it.
    """
    java = to_java_regex(head)
    groups = re.compile(head).groupindex
    replacement = FIELD_SEP + "".join((f"${groups[n]}" if n in groups else "") + FIELD_SEP for n in names)
    found = F.regexp_extract(text, java, 0)
    lines = lines.withColumn(name, found if when is None else F.when(when, found).otherwise(F.lit("")))
    matched = F.col(name)
    lines = lines.withColumn(f"{name}_rw", F.when(matched != "", F.split(
        F.regexp_replace(matched, java, replacement), FIELD_SEP, len(names) + 2)))
    short = F.col(f"{name}_rw")
    # The regex matched the head in the line; on the head alone it must match all of it again (a lookahead past
    # the head could decide otherwise: then the line itself is rewritten, as rarely as that happens).
    whole = F.split(F.regexp_replace(text, java, replacement), FIELD_SEP, len(names) + 2)
    return lines.withColumn(f"{name}_f", F.when(matched != "", F.when(
        F.get(short, len(names) + 1) == "", short).otherwise(whole))).drop(f"{name}_rw")


def with_trailer(lines: DataFrame, text: str, head: str, name: str) -> DataFrame:
    r"""Add ``name`` (the logger), ``name``\ ``_at`` (the text after the line's last `` (``) and ``name``\ ``_has``
    for a line whose message (``text`` after ``head``) may end with `` (logger)`` or `` (logger:line)``: the text
    after the line's last `` (`` is the trailer when it is a dotted name, an optional line number and ``)`` and it
    begins after the head (a logger holds no space or parenthesis, so only the last `` (`` can start one). Found
    from the line's end without copying the message."""
    line, matched = F.col(text), F.col(head)
    lines = lines.withColumn(f"{name}_at", F.when(line.endswith(")"), F.substring_index(line, " (", -1)))
    after = F.col(f"{name}_at")
    trailer_at = F.octet_length(line) - F.octet_length(after) - 2
    lines = lines.withColumn(f"{name}_name", F.when(
        (after != line) & (trailer_at >= F.octet_length(matched)), F.regexp_extract(after, TRAILER_NAME, 1)))
    found = F.col(f"{name}_name")
    return lines.withColumns({f"{name}_has": F.coalesce(found != "", F.lit(False)),
                              name: F.when(found != "", found)}).drop(f"{name}_name")


def _message_after(text: str, head: str, trailer: str | None) -> Column:
    """The message of a line: ``text`` after ``head``, without the logger trailer :func:`with_trailer` found
    (``trailer``: its column name), if any."""
    line, matched = F.col(text), F.col(head)
    start = F.octet_length(matched) + 1
    if trailer is None:
        return _some(_bytes_from(line, start))
    kept = F.octet_length(line) - F.octet_length(F.col(f"{trailer}_at")) - 2 - F.octet_length(matched)
    return _some(F.when(F.col(f"{trailer}_has"), _bytes_from(line, start, kept)).otherwise(_bytes_from(line, start)))


def _with_json_fields(lines: DataFrame, layout: Layout) -> tuple[DataFrame, Column]:
    """``_named`` and ``_n_*`` of a JSON-lines layout: one parse per line of only the keys the layout reads."""
    keys = list(dict.fromkeys(k for kind in (*FIELDS, "stack") for k in layout.json_keys.get(kind, ())))
    text = F.col("text")
    lines = lines.withColumn("_json", F.when(text.startswith("{"), F.from_json(
        text, StructType([StructField(k, StringType()) for k in keys]), {"mode": "PERMISSIVE"})))
    obj = F.col("_json")

    def field(kind: str) -> Column:
        names = layout.json_keys.get(kind, ())
        return F.coalesce(*[obj.getField(k) for k in names]) if names else _blank()

    lines = lines.withColumns({f"_n_{kind}": field(kind) for kind in (*FIELDS, "stack")})
    return lines.withColumn("_named", F.col("_n_message").isNotNull()).drop("_json"), F.col("_n_message")


def _generic_heads(generic: Layout) -> tuple[str, str]:
    """The generic layout's head (stamp through logger) and its head for a line opening with its level."""
    stamped, bare = split_head(generic.pattern), split_head(generic.bare_pattern)
    if stamped is None or bare is None or stamped.tail != "rest" or bare.tail != "rest":
        raise ValueError("the generic layout's pattern must end with (?P<message>.*)$")
    return stamped.head, bare.head


def _with_named_fields(lines: DataFrame, layout: Layout) -> tuple[DataFrame, Column]:
    """``_named`` (the line fits the file's layout) and ``_n_ts`` .. ``_n_logger`` (``_n_stack`` for JSON), and the
    expression of a named line's message."""
    if layout.json:
        return _with_json_fields(lines, layout)
    text, head = F.col("text"), F.col("_head")
    if layout.message_only:  # %m%n: every line is a message, except stack traces and indented continuation lines
        start = ~(text.rlike(STACK_LINE) | text.rlike(r"^\s")) & (text != "")
        return (lines.withColumn("_named", start).withColumns({f"_n_{name}": _blank() for name in FIELDS if name != "message"}),
                _some(text))
    split = layout.head
    if split is None:  # a pattern with more after its message: the whole line is rewritten
        lines = with_head_fields(lines, "_nh", head, layout.pattern, FIELDS)
        parts = F.col("_nh_f")
        lines = lines.withColumns({"_named": F.col("_nh") != "",
                                   **{f"_n_{name}": _some(F.get(parts, i + 1)) for i, name in enumerate(FIELDS)
                                      if name != "message"}})
        return lines, _some(F.get(parts, FIELDS.index("message") + 1))
    lines = with_head_fields(lines, "_nh", head, split.head, HEAD_GROUPS)
    parts = F.col("_nh_f")
    lines = lines.withColumns({"_named": F.col("_nh") != "",
                               **{f"_n_{name}": _some(F.get(parts, i + 1)) for i, name in enumerate(HEAD_GROUPS)}}
                              ).drop("_nh_f")
    if split.tail == "trailer":
        lines = with_trailer(lines, "_head", "_nh", "_n_trailer")
        lines = lines.withColumn("_n_logger", F.coalesce(F.col("_n_logger"), F.col("_n_trailer")))
        return lines, _message_after("_head", "_nh", "_n_trailer")
    return lines, _message_after("_head", "_nh", None)


#: Per-line settings of hosts named by a line prefix: they replace the file's settings of the same name.
LINE_HOST_SETTINGS = {"tz": "_line_tz", "clock_offset_ms": "_line_clock_offset_ms", "file_date": "_line_date",
                      "date_from": "_line_date_from"}
#: Characters of a message every record's flags may read (the process-start markers, a config dump's header).
MESSAGE_HEAD_CHARS = 64


@dataclass
class LineFields:
    """Lines with their fields (:func:`named_fields`, :func:`generic_fields_of`)."""

    lines: DataFrame
    #: a record start's message (null elsewhere), as an expression: it copies the line's text, so a step
    #: computes it only for the records it keeps text for
    message: Column
    #: the first characters of a record start's message, a short copy every record can afford
    message_head: Column


def prepared_lines(lines: DataFrame, plan: ReadPlan, cat: Catalogue, line_hosts: DataFrame | None = None) -> DataFrame:
    """Add ``text`` (the raw line, ``value``, without its file's clean-up and wrappers), ``wrap_host``, ``_wrap_ts``
    (a wrapper's stamp text) and ``_head`` (the text after leading whitespace, which layouts are matched on).

    ``line_hosts``: the settings of hosts that line prefixes name (``file_key``, ``wrap_host`` and
    :data:`LINE_HOST_SETTINGS`): a line whose prefix names a host with its own section is read with that host's
    settings; a line with no prefix, or naming a host without a section, keeps its file's."""
    lines = with_unwrapped(with_clean_text(lines, plan.cleaning), plan.wrappers, cat)
    if ANSI in plan.cleaning and any(cat.wrappers[w].json_key for w in plan.wrappers):
        # A JSON wrapper escapes the colour codes of the line it holds ("\u001b[32m"): gone only once decoded.
        lines = _without_colour_codes(lines)
    if line_hosts is not None:
        lines = lines.join(F.broadcast(line_hosts), ["file_key", "wrap_host"], "left")
        lines = lines.withColumns({name: F.coalesce(F.col(own), F.col(name)) for name, own in LINE_HOST_SETTINGS.items()}
                                  ).drop(*LINE_HOST_SETTINGS.values())
    return with_head(lines)


def with_head(lines: DataFrame) -> DataFrame:
    """Add ``_head``: ``text`` after leading whitespace (pasted and indented lines), which layouts are matched on."""
    text = F.col("text")
    indented = text.startswith(" ") | text.startswith("\t")
    return lines.withColumn("_head", F.when(indented, F.regexp_replace(text, r"^\s+", "")).otherwise(text))


def named_fields(lines: DataFrame, layout: Layout | None, cat: Catalogue, *, only_named: bool = False) -> LineFields:
    """The fields of prepared lines (:func:`prepared_lines`) under their file's named layout: ``_named`` (the line is
    a record start the layout fits), ``f_ts``, ``f_level``, ``f_thread``, ``f_logger``, ``f_stack`` (a JSON record's
    own stack), ``line_layout``, and for those starts ``ts``, ``ts_quality``, ``level``, ``date_base``,
    ``borrows_date`` (see :func:`_with_time_and_level`); the message as an expression.

    ``only_named``: keep only the lines the layout fits (their fields are computed for those lines only). Lines
    it does not fit are read by :func:`generic_fields_of` from the first pass's table."""
    if layout is None or layout.generic:
        lines = lines.withColumns({"_named": F.lit(False), **{f"_n_{k}": _blank() for k in FIELDS if k != "message"}})
        message = _blank()
    else:
        lines, message = _with_named_fields(lines, layout)
    if only_named:
        lines = where_computed(lines, F.col("_named"))
    named = F.col("_named")
    lines = lines.withColumns({
        **{f"f_{name}": F.when(named, F.col(f"_n_{name}")) for name in FIELDS if name != "message"},
        "f_stack": F.when(named, F.col("_n_stack")) if layout is not None and layout.json else _blank(),
        "is_start": named,
        "line_layout": F.when(named, F.lit(layout.id if layout else None)),
    })
    if layout is None or layout.generic:
        head = _blank()
    elif layout.json or layout.message_only or layout.head is None:
        head = F.substring(message, 1, MESSAGE_HEAD_CHARS)
    else:  # cut from the line by its offsets: no copy of the whole message
        head = F.substring(F.col("_head"), F.length(F.col("_nh")) + 1, F.lit(MESSAGE_HEAD_CHARS))
    times = layout_timestamp(layout.ts_formats, layout.json, F.col("f_ts"), F.col("tz"), F.col("file_date")) \
        if layout is not None and not layout.generic else F.lit(None).cast("timestamp")
    always_dated = layout is not None and layout.always_dated
    return LineFields(_with_time_and_level(lines, times, always_dated=always_dated), F.when(named, message),
                      F.when(named, head))


def generic_fields_of(lines: DataFrame, cat: Catalogue, json_file: Column) -> LineFields:
    """The fields of lines their file's named layout does not fit (``text``, ``_head`` and the file's settings):
    a record start read by the generic layout (a stamp at its head, or a level), the JVM's uncaught-exception
    line, or else a continuation line (``is_cont``; in a JSON file (``json_file``), a stray line instead)."""
    generic = cat.generic
    stamped_head, bare_head = _generic_heads(generic)
    head = F.col("_head")
    lines = with_head_fields(lines, "_gs", head, stamped_head, GENERIC_GROUPS)
    leveled = (F.col("_gs") == "") & head.substr(1, 1).isin("T", "D", "I", "W", "E", "F") & head.rlike(LEVEL_HEAD)
    lines = with_head_fields(lines, "_gb", head, bare_head, GENERIC_GROUPS, when=leveled)
    lines = lines.withColumns({"_gh": F.when(F.col("_gs") != "", F.col("_gs")).otherwise(F.col("_gb")),
                               "_gp": F.coalesce(F.col("_gs_f"), F.col("_gb_f"))}).drop("_gs", "_gs_f", "_gb", "_gb_f")
    parts = F.col("_gp")
    lines = lines.withColumns({f"_gq_{n}": F.trim(F.get(parts, i + 1)) for i, n in enumerate(GENERIC_GROUPS)})
    part = {n: _some(F.col(f"_gq_{n}")) for n in GENERIC_GROUPS}
    # A bracketed dotted name with no logger after it is the logger (Quarkus: [o.a.k.s.KafkaStreams] (thread)).
    thread_is_logger = part["logger"].isNull() & part["thread"].rlike(DOTTED_NAME)
    lines = lines.withColumns({
        "_g_start": parts.isNotNull(), "f_ts": part["ts"], "f_level": part["level"],
        "f_thread": F.coalesce(part["thread_a"], F.when(~thread_is_logger, part["thread"]), part["thread_c"]),
        "_g_logger0": F.when(thread_is_logger, part["thread"]).otherwise(part["logger"]),
    }).drop("_gp", *[f"_gq_{n}" for n in GENERIC_GROUPS])
    # Kafka's own layout ends the message with " (logger)"; a line that fits it only loosely keeps that.
    lines = with_trailer(lines, "_head", "_gh", "_g_trailer")
    cut = F.col("_g_logger0").isNull() & F.col("_g_trailer").isNotNull()
    lines = lines.withColumns({"_g_cut": cut, "f_logger": F.when(cut, F.col("_g_trailer")).otherwise(F.col("_g_logger0"))}
                              ).drop("_g_logger0")
    # The JVM's default handler prints an uncaught exception with no layout at all: a record of its own.
    uncaught = ~F.col("_g_start") & head.startswith(UNCAUGHT_HEAD)
    lines = lines.withColumn("_uncaught", uncaught)
    start, uncaught = F.col("_g_start"), F.col("_uncaught")
    is_start = start | uncaught
    lines = lines.withColumns({
        "is_start": is_start, "is_cont": ~is_start & ~F.coalesce(json_file, F.lit(False)), "f_stack": _blank(),
        "line_layout": F.when(is_start, F.lit(generic.id)),
        **{f"f_{name}": F.when(start, F.col(f"f_{name}")) for name in ("ts", "level", "thread", "logger")},
    })
    message = (F.when(start, F.when(F.col("_g_cut"), _message_after("_head", "_gh", "_g_trailer"))
                      .otherwise(_message_after("_head", "_gh", None)))
               .when(uncaught, head))
    message_head = (F.when(start, F.substring(head, F.length(F.col("_gh")) + 1, F.lit(MESSAGE_HEAD_CHARS)))
                    .when(uncaught, F.substring(head, 1, MESSAGE_HEAD_CHARS)))
    times = generic_timestamp(F.col("f_ts"), F.col("tz"), F.col("file_date"))
    return LineFields(_with_time_and_level(lines, times), message, message_head)


def _with_time_and_level(lines: DataFrame, ts: Column, *, always_dated: bool = False) -> DataFrame:
    """``ts``, ``ts_quality``, ``level``, ``date_base`` and ``borrows_date`` of record starts (``is_start``; null
    elsewhere), ``ts`` read from ``f_ts`` by the expression given; ``always_dated``: every stamp carries a date,
    known without looking (:attr:`~toolkit.layouts.catalogue.Layout.always_dated`)."""
    day, raw = F.col("file_date"), F.col("f_ts")
    starts = F.col("is_start")
    wrap_ts = parse_stamps(F.col("_wrap_ts"), WRAPPER_TS_FORMATS)
    # Some layouts print the date only optionally (logback): decide per line.
    dated = F.lit(True) if always_dated else raw.rlike(DATED_STAMP) | raw.rlike(r"^\d{9,19}(?:\.\d+)?$|^\{")
    # Parsed in a step of their own: the time, its quality and the clock offset all read them.
    lines = lines.withColumns({"_ts": F.when(starts, ts), "_wts": F.when(starts, wrap_ts), "_dated": F.when(starts, dated)})
    ts, wrap_ts, dated = F.col("_ts"), F.col("_wts"), F.col("_dated")
    # A wrapper stamp (docker -t, kubectl --timestamps) is exact: prefer it to a borrowed date, and take it for a
    # record start that prints no stamp at all (the JVM's "Exception in thread" line).
    ts = F.when(~F.coalesce(dated, F.lit(False)) & wrap_ts.isNotNull(), wrap_ts).otherwise(ts)
    quality = (F.when(ts.isNull(), F.lit("missing")).when(dated, F.lit("exact"))
               .when(wrap_ts.isNotNull(), F.lit("wrapper")).otherwise(F.lit("date_inferred")))
    # In microseconds, Spark's own precision: wrapper and JSON stamps print them, and they must survive an offset.
    ts = F.when(F.col("clock_offset_ms") != 0,
                F.timestamp_micros(F.unix_micros(ts) - F.col("clock_offset_ms") * 1000)).otherwise(ts)
    # Named layouts print the level in capitals already: case-map only the others (JSON "level":"info").
    lines = lines.withColumn("_level", F.when(F.col("f_level").isin(*CANONICAL_LEVELS), F.col("f_level"))
                             .otherwise(F.upper(F.trim(F.col("f_level")))))
    level = F.col("_level")
    level = (F.when(level == "WARNING", F.lit("WARN")).when(level.isin("FATAL", "SEVERE"), F.lit("ERROR"))
             .when(level == "CONFIG", F.lit("INFO")).when(level == "FINE", F.lit("DEBUG"))
             .when(level.isin("FINER", "FINEST"), F.lit("TRACE")).otherwise(level))
    return lines.withColumns({
        "ts": F.when(starts, ts), "ts_quality": F.when(starts, quality), "level": F.when(starts, level),
        # The day a time-only stamp borrowed: with the zone, it says which records count their days together.
        "date_base": F.when(starts & (quality == "date_inferred"), day),
        # A start whose stamp may have borrowed its date (checked without parsing it): the midnight rollover.
        # A constant where the layout always prints the date: Spark does not fold the expression, and a pass that
        # reads only this flag would otherwise split every line's head into its fields to compute it.
        "borrows_date": F.lit(False) if always_dated else
        starts & ~F.coalesce(dated, F.lit(True)) & F.col("_wrap_ts").isNull() & raw.isNotNull(),
    })
