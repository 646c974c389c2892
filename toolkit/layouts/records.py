"""Raw log lines -> records, on Spark, in two passes over the text (:func:`parse_logs`).

1. **The first pass** reads every line and decides whether its file's layout fits it (a record start: the
   layout's head at the line's head), in one job that aggregates, per file split and chunk of lines, the counts
   the numbering and accounting need, and keeps every line the layout does not fit (stack traces, config dumps,
   foreign lines, lines a JSON file holds outside an object) with its text. Those lines are few next to the
   others; they are kept in memory.
2. The kept lines are read with the generic layout (a stamp or level at the head, the JVM's uncaught-exception
   line): record starts of their own, or continuation lines. A run of continuation lines is *folded* into the
   record on the line before it (message lines first, the stack trace after); a run at a file's start has no
   record and becomes ``unparsed``.
3. **The second pass** reads every line again, keeps the lines the layout fits, reads their fields and time,
   joins the folded continuations (a small table, sent to every task) and writes the records with the records
   of the kept lines.

Each record is flagged ``candidate`` (:mod:`toolkit.catalogue.gate`): a catalogue template, a configuration dump
or a process-start marker may need it. Candidates and records with continuation lines keep their whole text
(message, stack); every record keeps its place, time, host, level, thread and logger, the others the first
:data:`MESSAGE_HEAD_CHARS` characters of their message (ending in an ellipsis when it goes on; the whole line stays in the bundle at ``source`` and
``line_no``): cutting and redacting every line's whole message cost more than reading the line.

Line numbers need no sort: Spark reads each file split in order, and a line's number is the count of lines
in the split's predecessors plus its row id within the split. Every physical line ends up in exactly one
record; lines no record claims are kept as records with ``layout = 'unparsed'``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from toolkit import utc
from toolkit.bundle import Bundle, LogFile
from toolkit.bundle.exports import INNER_RECORD_BASE
from toolkit.catalogue.gate import is_candidate
from toolkit.jvm import plan_for_lines
from toolkit.layouts.catalogue import JUL_LEVEL_LINE, LOGGER_TRAILER, STACK_LINE, Catalogue, load_layouts
from toolkit.layouts.detection import Detection, detect_file
from toolkit.layouts.fields import (
    LINE_HOST_SETTINGS, MESSAGE_HEAD_CHARS, LineFields, ReadPlan, generic_fields_of, named_fields, with_head,
)
from toolkit.layouts.reading import (
    SPREAD_SPLIT_LINES, file_table, line_host_table, local_path, plans_of, read_lines, read_splits, union_all,
)
from toolkit.redact import redact_text_guarded_col
from toolkit.schemas import CANDIDATE_COLUMN, RECORD_COLUMNS, STORED_RECORD_SCHEMA, UNPARSED
from toolkit.spark import where_computed, with_own_code

LINE_COUNT_SCHEMA = "source string, lines_read long, bad_utf8_lines long, nul_lines long, longest_line long"
#: Up to this many continuation lines, folded records are sent to every task of the join with all records.
BROADCAST_FOLDED_MAX_LINES = 300_000
#: A time of day that goes back by more than this against the record before it is the next day.
ROLLOVER_BACKSTEP_H = 12
#: Lines per chunk of the windows that follow a file in line order (continuation runs, midnight rollover):
#: each chunk is sorted in its own task, and one small row per chunk carries what the next chunk needs.
WINDOW_CHUNK_LINES = 262_144
#: Per file split, what the second pass reads its lines with (see :func:`toolkit.layouts.reading.known_lines`).
SPLITS_SCHEMA = "_uri string, block_start long, file_key string, _line_offset long, _bad_split boolean"
#: Ends the shortened message of a record no template can need (see :func:`_shortened`).
ELLIPSIS = "\u2026"
#: What the first pass keeps of a line its layout does not fit.
_KEPT = ("text", "value", "wrap_host", "_wrap_ts")


@dataclass
class ParsedLogs:
    """Records of all log files, plus what is needed to check that no line was lost."""

    #: ``STORED_RECORD_SCHEMA``: the record columns and ``candidate`` (see :mod:`toolkit.catalogue.gate`)
    records: DataFrame
    #: source, lines_read (physical lines Spark read per file); bad_utf8_lines and nul_lines
    #: (lines with undecodable bytes or NUL bytes) and longest_line (bytes) when the text was
    #: parsed in this run
    line_counts: DataFrame
    detections: dict[str, Detection]
    #: frees what the parse kept in memory; call it once ``records`` has been written
    release: Callable[[], object] = lambda: None


@dataclass
class FirstPass:
    """What the first pass over the text found (see the module's docstring)."""

    #: one row per (file split, chunk of rows): lines, first row, last row its layout fits, bad, NUL and
    #: date-borrowing lines, longest line
    chunks: list
    #: one row per line its layout does not fit: split, chunk, row id and :data:`_KEPT` (kept until released)
    others: DataFrame
    plans: dict[ReadPlan, list[LogFile]]
    held: list[DataFrame]

    def release(self) -> None:
        for df in self.held:
            df.unpersist()
        self.held.clear()


def _first_pass(spark: SparkSession, files: list[LogFile], detections: dict[str, Detection], cat: Catalogue) -> FirstPass:
    plans = plans_of(files, detections)
    needed = ("_uri", "block_start", "_row_id", "_bad_utf8", *_KEPT, "_named", "borrows_date")
    parts = []
    for plan, lines in read_lines(spark, plans, cat).items():
        layout = cat.layout(plan.layout) if plan.layout else None
        fields = named_fields(lines, layout, cat)
        parts.append(fields.lines.select(*needed))
    named = F.col("_named")
    # The kept text is null on the layout's lines before they are grouped: a grouping that carries strings is
    # sort-based in Spark, and sorting every line's whole text cost more than reading it.
    lines = union_all(parts).withColumns({
        "_nul": F.col("value").contains("\u0000"), "_bytes": F.octet_length("value"),
        **{name: F.when(~named, F.col(name)) for name in _KEPT}})
    grouped = lines.groupBy(
        "_uri", "block_start", F.floor(F.col("_row_id") / F.lit(WINDOW_CHUNK_LINES)).alias("_chunk"),
        # The layout's lines collapse into one row per chunk; every other line keeps a row of its own.
        F.when(~named, F.col("_row_id")).alias("_row"),
    ).agg(
        F.count(F.lit(1)).alias("lines"),
        F.min("_row_id").alias("first_row"),
        F.max(F.when(named, F.col("_row_id"))).alias("last_named_row"),
        F.count(F.when(F.col("_bad_utf8"), 1)).alias("bad_utf8"),
        F.count(F.when(F.col("_nul"), 1)).alias("nul"),
        F.max("_bytes").alias("longest"),
        F.count(F.when(F.col("borrows_date"), 1)).alias("borrowing"),
        *[F.max(name).alias(name) for name in _KEPT],
    ).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        chunks = grouped.groupBy("_uri", "block_start", "_chunk").agg(
            F.sum("lines").alias("lines"), F.min("first_row").alias("first_row"),
            F.max("last_named_row").alias("last_named_row"), F.sum("bad_utf8").alias("bad_utf8"),
            F.sum("nul").alias("nul"), F.max("longest").alias("longest"), F.sum("borrowing").alias("borrowing"),
        ).collect()
    except Exception:
        grouped.unpersist()
        raise
    others = grouped.where(F.col("_row").isNotNull()).select("_uri", "block_start", "_chunk", "_row", *_KEPT)
    return FirstPass(chunks, others, plans, [grouped])


@dataclass
class Numbering:
    """Line numbers and accounting from the first pass, computed on the driver from its per-chunk rows."""

    #: per split: _uri, block_start, file_key, _line_offset (line number = row id + offset), _bad_split (the split
    #: held undecodable bytes)
    splits: list[tuple]
    #: per file key: lines, bad UTF-8 lines, NUL lines, longest line (bytes)
    totals: dict[str, tuple[int, int, int, int]]
    largest_split: int
    borrowing: int


def _numbering(chunks: list) -> Numbering:
    by_split: dict[tuple, list] = {}
    for row in chunks:
        by_split.setdefault((row["_uri"], row["block_start"]), []).append(row)
    splits, totals = [], {}
    largest = 0
    for (uri, start), rows in sorted(by_split.items()):
        key = local_path(uri)
        lines = sum(r["lines"] for r in rows)
        largest = max(largest, lines)
        seen, bad, nul, longest = totals.get(key, (0, 0, 0, 0))
        splits.append((uri, start, key, seen - min(r["first_row"] for r in rows) + 1, _sum(rows, "bad_utf8") > 0))
        totals[key] = (seen + lines, bad + _sum(rows, "bad_utf8"), nul + _sum(rows, "nul"),
                       max(longest, max((r["longest"] or 0) for r in rows)))
    return Numbering(splits, totals, largest, _sum(chunks, "borrowing"))


def _sum(rows: list, name: str) -> int:
    return sum(r[name] or 0 for r in rows)


def _chunks_before(chunks: list, splits: list[tuple], other_last: dict[tuple, int]) -> list[tuple]:
    """Per (split, chunk): its first row and the number of the last line before it that continues no record (None
    when no line before it in the file does): where a run of continuation lines at a chunk's start belongs."""
    offsets = {(uri, start): (key, offset) for uri, start, key, offset, _bad in splits}
    out, last = [], {}
    for row in sorted(chunks, key=lambda r: (local_path(r["_uri"]), r["block_start"], r["_chunk"])):
        split = (row["_uri"], row["block_start"])
        key, offset = offsets[split]
        out.append((*split, row["_chunk"], row["first_row"], last.get(key)))
        rows = [r for r in (row["last_named_row"], other_last.get((*split, row["_chunk"]))) if r is not None]
        if rows:
            last[key] = max(rows) + offset
    return out


def _others(spark: SparkSession, first: FirstPass, numbering: Numbering, files: DataFrame, line_hosts: DataFrame | None,
            cat: Catalogue) -> LineFields:
    """The lines their layout does not fit, numbered, with their file's settings, read by the generic layout."""
    splits = utc.create_frame(spark, [row[:4] for row in numbering.splits],
                              "_uri string, block_start long, file_key string, _line_offset long")
    others = first.others.join(F.broadcast(splits), ["_uri", "block_start"]).withColumn(
        "line_no", F.col("_row") + F.col("_line_offset")).join(F.broadcast(files), "file_key")
    if line_hosts is not None:
        others = others.join(F.broadcast(line_hosts), ["file_key", "wrap_host"], "left")
        others = others.withColumns({name: F.coalesce(F.col(own), F.col(name))
                                     for name, own in LINE_HOST_SETTINGS.items()}).drop(*LINE_HOST_SETTINGS.values())
    json_ids = [l.id for l in cat.layouts if l.json]
    return generic_fields_of(with_head(others), cat, F.col("layout_id").isin(*json_ids) if json_ids else F.lit(False))


def _folded(spark: SparkSession, others: DataFrame, chunks: list[tuple], trailer_layouts: list[str]) -> DataFrame:
    """One row per record with continuation lines: its message part, stack part and line count. ``others``: the
    kept lines with ``is_cont``; ``chunks``: :func:`_chunks_before`."""
    before = utc.create_frame(spark, chunks, "_uri string, block_start long, _chunk long, _chunk_first long, _before long")
    conts = others.where(F.col("is_cont")).select("_uri", "block_start", "_chunk", "_row", "_line_offset", "file_key",
                                                 "line_no", "text", "value", "layout_id")
    conts = conts.join(F.broadcast(before), ["_uri", "block_start", "_chunk"])
    # Continuation runs ("islands"): row - rank is constant inside a run of consecutive continuation lines,
    # and the run belongs to the record on the line just before it. A run that reaches back over a chunk's
    # start belongs to the last line before that chunk that continues no record.
    by_chunk = Window.partitionBy("_uri", "block_start", "_chunk").orderBy("_row")
    conts = conts.withColumn("_island", F.col("_row") - F.row_number().over(by_chunk))
    conts = conts.withColumn("_run_start", F.min("_row").over(
        Window.partitionBy("_uri", "block_start", "_chunk", "_island")))
    conts = conts.withColumn("record_line", F.when(
        F.col("_run_start") == F.col("_chunk_first"), F.col("_before")).otherwise(
        F.col("_run_start") - 1 + F.col("_line_offset")))
    return conts.withColumn("stackish", F.col("text").rlike(STACK_LINE))


def _fold_continuations(attached: DataFrame, trailer_layouts: list[str]) -> DataFrame:
    """One row per record with continuation lines: message part, stack part, line count."""
    # Lines before the first stack-looking line continue the message; the rest is the stack.
    agg = attached.groupBy("file_key", F.col("record_line").alias("line_no")).agg(
        F.sort_array(F.collect_list(F.struct("line_no", "text"))).alias("_lines"),
        F.min(F.when(F.col("stackish"), F.col("line_no"))).alias("_first_stack"),
        F.count(F.lit(1)).alias("n_cont"),
        F.first("layout_id").alias("_layout"),
    )
    # Lambdas written as SQL text: a Python lambda gets a new variable name on every call (x_1, x_2...), which
    # Spark's generated code carries, so a second parse in one session could not reuse the first one's code.
    first = f"coalesce(_first_stack, {1 << 62})"
    msg = F.expr(f"transform(filter(_lines, line -> line.line_no < {first}), line -> line.text)")
    stack = F.expr(f"transform(filter(_lines, line -> line.line_no >= {first}), line -> line.text)")
    agg = agg.select("file_key", "line_no", "n_cont", "_layout", msg.alias("_msg"),
                     F.array_join(stack, "\n").alias("stack_cont"))
    # "[%d] %p %m (%c)%n": a multi-line message ends with " (logger)" on its last line.
    last = F.element_at(F.col("_msg"), -1)
    has_trailer = (F.col("_layout").isin(trailer_layouts) & (F.size(F.col("_msg")) > 0)
                   & last.rlike(LOGGER_TRAILER))
    body = F.when(
        has_trailer,
        F.concat(F.slice(F.col("_msg"), 1, F.greatest(F.size(F.col("_msg")) - 1, F.lit(0))),
                 F.array(F.regexp_extract(last, LOGGER_TRAILER, 1))),
    ).otherwise(F.col("_msg"))
    return agg.select(
        "file_key", "line_no", "n_cont", "stack_cont",
        # Trailing newlines only; a match may not start inside a run of them (a search would rescan
        # the run from each newline: quadratic in a record with a long block of blank lines).
        F.regexp_replace(F.array_join(body, "\n"), r"(?<!\n)\n+$", "").alias("msg_cont"),
        F.when(has_trailer, F.regexp_extract(last, LOGGER_TRAILER, 2)).alias("trailer_logger"),
    )


def _chunk_of_line() -> Column:
    return F.floor(F.col("line_no") / F.lit(WINDOW_CHUNK_LINES))


def _roll_over_midnight(starts: DataFrame) -> DataFrame:
    """Time-only layouts: move records after a midnight to the next day(s), per file in line order.

    The borrowed date (``bundle.toml`` ``date``) is the date of the first record in the file; each step
    back of more than 12 h in the time of day starts a new day. When the date came from the file's
    modification time it is the date of the LAST record, so the days are counted back from there.
    Only ``date_inferred`` records take part. In a file whose lines name their host, the hosts that share
    a zone and a borrowed date count their days together, as one clock (a host that stops before midnight
    still lies before the midnight another host's lines cross); hosts with a zone or date of their own
    count theirs apart. The windows run per chunk of lines; the time before a chunk's first record and the
    days rolled in earlier chunks come from one small row per chunk.
    """
    inferred = F.col("ts_quality") == "date_inferred"
    starts = starts.withColumns({"_chunk": _chunk_of_line(),
                                 "_clock": F.concat_ws("|", "tz", "date_from", "date_base")})
    chunks = Window.partitionBy("file_key", "_clock").orderBy("_chunk")
    last_time = starts.where(inferred).groupBy("file_key", "_clock", "_chunk").agg(F.max_by("ts", "line_no").alias("_last_ts"))
    last_time = last_time.select("file_key", "_clock", "_chunk", F.last("_last_ts").over(
        chunks.rowsBetween(Window.unboundedPreceding, -1)).alias("_ts_before"))
    starts = starts.join(F.broadcast(last_time), ["file_key", "_clock", "_chunk"], "left")

    by_line = Window.partitionBy("file_key", "_clock", "_chunk").orderBy("line_no")
    prev = F.coalesce(F.last(F.when(inferred, F.col("ts")), ignorenulls=True).over(
        by_line.rowsBetween(Window.unboundedPreceding, -1)), F.col("_ts_before"))
    backstep = inferred & ((F.unix_micros(prev) - F.unix_micros(F.col("ts"))) > ROLLOVER_BACKSTEP_H * 3_600_000_000)
    flag = F.coalesce(backstep, F.lit(False)).cast("int")
    starts = starts.withColumn("_rolls", flag)
    starts = starts.withColumn("_days", F.sum("_rolls").over(by_line.rowsBetween(Window.unboundedPreceding, 0)))
    rolls = starts.groupBy("file_key", "_clock", "_chunk").agg(F.sum("_rolls").alias("_chunk_rolls")).select(
        "file_key", "_clock", "_chunk",
        F.coalesce(F.sum("_chunk_rolls").over(chunks.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0))
        .alias("_rolls_before"),
        F.sum("_chunk_rolls").over(Window.partitionBy("file_key", "_clock")).alias("_rolls_total"))
    starts = starts.join(F.broadcast(rolls), ["file_key", "_clock", "_chunk"], "left")
    days = F.col("_days") + F.col("_rolls_before")
    days = F.when(F.col("date_from") == "mtime", days - F.col("_rolls_total")).otherwise(days)
    local = F.from_utc_timestamp(F.col("ts"), F.col("tz"))
    shifted = F.to_utc_timestamp(F.timestamp_add("DAY", days, local), F.col("tz"))
    return starts.withColumn("ts", F.when(inferred & (days != 0), shifted).otherwise(F.col("ts"))) \
        .drop("_chunk", "_clock", "_ts_before", "_rolls", "_days", "_rolls_before", "_rolls_total")


#: Columns a record carries until the midnight rollover has run (then dropped).
_CLOCK = ("file_key", "tz", "date_from", "date_base")


def _records_of(fields: LineFields, folded: DataFrame, generic_id: str) -> DataFrame:
    """The records of record starts (``fields``: lines with ``is_start``): their continuation lines joined, flagged
    ``candidate`` (:mod:`toolkit.catalogue.gate`), with their whole text (message, stack) for the candidates and
    the records with continuation lines only.

    Records no template, config dump or run marker can need keep their place, time, host, level, thread, logger
    and the head of their message (:func:`_shortened`); their whole text stays in the bundle (``source``, ``line_no``)."""
    # The filter reads the computed is_start (see toolkit.spark.where_computed).
    starts = where_computed(fields.lines, F.col("is_start")).withColumns({
        "host": F.coalesce(F.col("wrap_host"), F.col("file_host")), "ts_raw": F.col("f_ts"),
        "thread": F.nullif(F.trim(F.col("f_thread")), F.lit("")), "_message_head": fields.message_head})
    joined = starts.join(folded, ["file_key", "line_no"], "left")
    msg_cont = F.col("msg_cont")
    # java.util.logging prints "<date> <class> <method>" and then "<LEVEL>: <message>" on the next line:
    # the record's message is what follows the level (the method name is dropped).
    jul = (F.col("line_layout") == generic_id) & F.col("ts_raw").endswith("M") & msg_cont.rlike(JUL_LEVEL_LINE)
    jul_level = F.regexp_extract(msg_cont, JUL_LEVEL_LINE, 1)
    jul_level = (F.when(jul_level == "WARNING", F.lit("WARN")).when(jul_level == "SEVERE", F.lit("ERROR"))
                 .when(jul_level == "CONFIG", F.lit("INFO")).when(jul_level == "FINE", F.lit("DEBUG"))
                 .when(jul_level.isin("FINER", "FINEST"), F.lit("TRACE")).otherwise(jul_level))
    joined = joined.withColumns({
        "_jul": F.coalesce(jul, F.lit(False)),
        "logger": F.coalesce(F.col("f_logger"), F.col("trailer_logger")),
        "line_count": (F.lit(1) + F.coalesce(F.col("n_cont"), F.lit(0))).cast("int"),
    })
    jul = F.col("_jul")
    joined = joined.withColumn("level", F.when(jul, jul_level).otherwise(F.col("level")))
    joined = joined.withColumn(CANDIDATE_COLUMN, is_candidate(
        logger=F.col("logger"), level=F.col("level"), text=F.col("text"), message_head=F.col("_message_head"),
        continued=F.col("line_count") > 1))
    # Records with continuation lines are few: they keep their whole text (a stack trace at INFO is still evidence).
    keep = F.col(CANDIDATE_COLUMN) | (F.col("line_count") > 1)
    first = F.coalesce(fields.message, F.lit(""))
    message = F.when(msg_cont.isNotNull() & (msg_cont != ""), F.concat_ws("\n", first, msg_cont)).otherwise(first)
    return joined.select(
        "source", "line_no", "host", "ts", "ts_raw", "level", "thread", "logger",
        F.when(keep, F.when(jul, F.regexp_replace(msg_cont, JUL_LEVEL_LINE, "")).otherwise(message))
        .otherwise(_shortened(F.col("_message_head"))).alias("message"),
        F.when(keep, F.coalesce(F.col("f_stack"), F.nullif(F.col("stack_cont"), F.lit("")))).alias("stack"),
        F.col("line_layout").alias("layout"), "ts_quality", "line_count", CANDIDATE_COLUMN, *_CLOCK,
    )


def _shortened(message_head: Column) -> Column:
    """What a record no template can need keeps of its message: its head, marked when the message goes on."""
    return F.when(F.length(message_head) >= MESSAGE_HEAD_CHARS, F.concat(message_head, F.lit(ELLIPSIS))) \
        .otherwise(message_head)


def _strays(stray: DataFrame) -> DataFrame:
    """Lines nobody understands, as records: unknown layouts, non-JSON lines in JSON files, and continuation
    lines with no record above them (a file cut in the middle of a stack trace). Kept whole: they are
    candidates (no logger says otherwise)."""
    return stray.select(
        "source", "line_no", F.col("file_host").alias("host"), F.lit(None).cast("timestamp_ltz").alias("ts"),
        F.lit(None).cast("string").alias("ts_raw"), F.lit(None).cast("string").alias("level"),
        F.lit(None).cast("string").alias("thread"), F.lit(None).cast("string").alias("logger"),
        F.col("value").alias("message"), F.lit(None).cast("string").alias("stack"), F.lit(UNPARSED).alias("layout"),
        F.lit("missing").alias("ts_quality"), F.lit(1).alias("line_count"), F.lit(True).alias(CANDIDATE_COLUMN),
        *[F.lit(None).cast("string").alias(name) for name in _CLOCK],
    )


def parse_logs(spark: SparkSession, bundle: Bundle, cat: Catalogue | None = None,
               files: list[LogFile] | None = None, redact: bool = True) -> ParsedLogs:
    """Parse the bundle's log files (or only ``files``) into one records DataFrame
    (``toolkit.schemas.STORED_RECORD_SCHEMA``: the record columns and ``candidate``, see :mod:`toolkit.catalogue.gate`).

    With ``redact`` (the default) secret-looking values in messages and stack traces (passwords,
    tokens, JAAS configs, credentials in URLs, AWS keys) are replaced by ``[redacted]``.
    """
    cat = cat or load_layouts()
    logs = bundle.logs if files is None else files
    detections: dict[str, Detection] = {
        f.source: detect_file(f.local_path, cat) if f.size else Detection(None) for f in logs
    }
    readable = [f for f in logs if f.size]
    first: FirstPass | None = None
    if readable:
        readable, first = read_splits(spark, bundle, readable, lambda fs: _first_pass(spark, fs, detections, cat))
        logs = [f for f in logs if not f.size] + readable
    empty_counts = [(f.source, 0, 0, 0, 0) for f in logs if not f.size]
    if first is None:
        counts = utc.create_frame(spark, empty_counts, LINE_COUNT_SCHEMA)
        return ParsedLogs(utc.create_frame(spark, [], STORED_RECORD_SCHEMA), counts, detections)
    try:
        return _second_pass(spark, bundle, cat, readable, detections, first, empty_counts, redact)
    except Exception:
        first.release()
        raise


def _second_pass(spark: SparkSession, bundle: Bundle, cat: Catalogue, readable: list[LogFile],
                 detections: dict[str, Detection], first: FirstPass, empty_counts: list[tuple],
                 redact: bool) -> ParsedLogs:
    numbering = _numbering(first.chunks)
    plan_for_lines(spark, max((t[3] for t in numbering.totals.values()), default=0))
    sources = {str(f.local_path.resolve()): f.source for f in readable}
    counts = utc.create_frame(spark, [(sources[k], *v) for k, v in numbering.totals.items()] + empty_counts,
                              LINE_COUNT_SCHEMA)
    files = file_table(spark, bundle, readable, detections)
    line_hosts = line_host_table(spark, bundle, readable, detections, cat)
    # The lines their layout does not fit, read by the generic layout once and kept (a small table).
    others = _others(spark, first, numbering, files, line_hosts, cat)
    kept = others.lines.select(
        "_uri", "block_start", "_chunk", "_row", "_line_offset", "file_key", "source", "line_no", "text", "value",
        "layout_id", "file_host", "wrap_host", "tz", "date_from", "date_base", "f_ts", "f_level", "f_thread", "f_logger",
        "f_stack", "line_layout", "ts", "ts_quality", "level", "borrows_date", "is_start", "is_cont", "_head", "_gh",
        "_g_start", "_g_cut", "_g_trailer_at", "_g_trailer_has", "_uncaught",
    ).persist(StorageLevel.MEMORY_AND_DISK)
    first.held.append(kept)
    other_last = {(r["_uri"], r["block_start"], r["_chunk"]): r["_last"] for r in kept.groupBy(
        "_uri", "block_start", "_chunk").agg(F.max(F.when(~F.col("is_cont"), F.col("_row"))).alias("_last")).collect()}
    borrowing = numbering.borrowing + kept.where(F.col("borrows_date")).limit(1).count()
    trailer_layouts = [l.id for l in cat.layouts if l.logger_trailer]
    conts = _folded(spark, kept, _chunks_before(first.chunks, numbering.splits, other_last), trailer_layouts)
    # Kept: every read plan's records join it, and a plan that repeated its lineage per read plan grew with their
    # number until a bundle of many layouts could not be planned in a few GB of heap.
    folded = _fold_continuations(conts.where(F.col("record_line").isNotNull()), trailer_layouts).persist(
        StorageLevel.MEMORY_AND_DISK)
    first.held.append(folded)
    # Records with continuation lines are few next to all records: send them to every task of the join with
    # all records instead of shuffling every record.
    if kept.where(F.col("is_cont")).count() <= BROADCAST_FOLDED_MAX_LINES:
        folded = F.broadcast(folded)
    stray = conts.where(F.col("record_line").isNull()).select("file_key", "line_no", "value").unionByName(
        kept.where(~F.col("is_start") & ~F.col("is_cont")).select("file_key", "line_no", "value"))
    stray = stray.join(F.broadcast(files.select("file_key", "source", "file_host")), "file_key")

    splits = utc.create_frame(spark, numbering.splits, SPLITS_SCHEMA)
    plans = read_lines(spark, first.plans, cat, splits=splits, settings=files, line_hosts=line_hosts,
                       spread=numbering.largest_split > SPREAD_SPLIT_LINES)
    # Records of layouts that always print the date never roll over a midnight: only the others (time-only
    # layouts, the lines read by the generic layout) go through the rollover's windows, whose plan reads its
    # input three times.
    dated, undated = [], []
    for plan, lines in plans.items():
        layout = cat.layout(plan.layout) if plan.layout else None
        if layout is not None and not layout.generic:
            part = _records_of(named_fields(lines, layout, cat, only_named=True), folded, cat.generic.id)
            (dated if layout.always_dated else undated).append(part)
    kept_fields = LineFields(kept, others.message, others.message_head)
    undated += [_records_of(kept_fields, folded, cat.generic.id), _strays(stray)]
    records = union_all(undated)
    if borrowing:
        records = _roll_over_midnight(records)
    records = union_all([part.select(*RECORD_COLUMNS, CANDIDATE_COLUMN) for part in [*dated, records]])
    if redact:
        records = with_own_code(records, {name: redact_text_guarded_col(F.col(name)) for name in ("message", "stack")})
    records = _numbered_by_entry(spark, records, readable)
    return ParsedLogs(records=records, line_counts=counts, detections=detections, release=first.release)


#: Up to this many lines of rewritten exports, their entry numbers are sent to every task of the join.
BROADCAST_ENTRY_LINES = 2_000_000


def _numbered_by_entry(spark: SparkSession, records: DataFrame, files: list[LogFile]) -> DataFrame:
    """Records of rewritten log-platform exports (:mod:`toolkit.bundle.exports`) numbered by their entry in the
    export, so evidence points into the file the user has; other records as they are."""
    tables = [f.entries for f in files if f.entries is not None]
    if not tables:
        return records
    import pyarrow.parquet as pq

    entries = spark.read.parquet(*[str(p.resolve()) for p in tables])
    if sum(pq.read_metadata(p).num_rows for p in tables) <= BROADCAST_ENTRY_LINES:
        entries = F.broadcast(entries)
    number = (F.when(F.col("entry_start"), F.col("entry"))
              .when(F.col("entry").isNotNull(), F.lit(INNER_RECORD_BASE) + F.col("line_no"))
              .otherwise(F.col("line_no")))
    return records.join(entries, ["source", "line_no"], "left").select(
        *[number.alias("line_no") if name == "line_no" else F.col(name) for name in (*RECORD_COLUMNS, CANDIDATE_COLUMN)])

