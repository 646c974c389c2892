"""Raw log lines -> records, on Spark.

Per file, the layout (and any wrapper such as ``docker logs -t`` or ``kubectl --prefix``) is
detected from a sample of its first lines, most specific layout first. Every line of the file is
then read on its own with Spark-native functions: the file's layout rewrites a record's first line
into its fields with one regular expression; a line it does not fit but whose head carries a
timestamp (or opens with a level, or is the JVM's uncaught-exception line) is a record start read by
the generic layout; anything else is a continuation line (stack traces, config dumps, multi-line
messages) folded into the record above it. Every physical line ends up in exactly one record; lines
no record claims are kept as records with ``layout = 'unparsed'``.

Line numbers are computed without sorting all lines: Spark reads each file split in order, so a
line's number is the count of lines in earlier splits plus its position inside its own split.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Callable
from urllib.parse import unquote

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from toolkit import utc
from toolkit.bundle import Bundle, LogFile
from toolkit.bundle.gzip_logs import damaged_gzips, gzip_is_intact, recover_gzip, read_text_head
from toolkit.jvm import plan_for_lines
from toolkit.redact import redact_text_guarded_col
from toolkit.regex import to_java_regex
from toolkit.schemas import RECORD_COLUMNS, RECORD_SCHEMA, UNPARSED

FIELD_SEP = "\u0001"  # never printed by a logger; used to split one regex rewrite into fields
FIELDS = ("ts", "level", "thread", "logger", "message")
ANSI_ESCAPE = r"\x1b\[[0-9;?]*[A-Za-z]"
# Lines that belong to a stack trace (logback/log4j throwable rendering).
STACK_LINE = (
    r"^(?:\s+at |\s*\.\.\. \d+ (?:more|common frames omitted)|\s*Caused by: |\s*Suppressed: |"
    r"\s*[A-Za-z_$][\w$]*(?:\.[\w$]+)+(?:Exception|Error|Throwable)(?:: |:?$))"
)
# RFC 3339 stamps of docker/kubectl/journald wrappers: 0-9 fraction digits, Z or an offset.
WRAPPER_TS_FORMATS = (
    "yyyy-MM-dd'T'HH:mm:ss[.SSSSSSSSS][.SSSSSS][.SSS]XXX",
    "yyyy-MM-dd'T'HH:mm:ss[.SSSSSSSSS][.SSSSSS][.SSS]XX",
    "yyyy-MM-dd'T'HH:mm:ss[,SSSSSS][,SSS]XX",
)
LOGGER_TRAILER = r"^(.*?) ?\(([A-Za-z_$][\w$]*(?:\.[\w$]+)+)(?::\d+)?\)$"
#: A single-line message that ends with " (logger)" / " (logger:line)": Kafka's layout, loosely fitted.
MESSAGE_TRAILER = r"^(.*) \(([A-Za-z_$][\w$]*(?:\.[\w$]+)+)(?::\d+)?\)$"
DOTTED_NAME = r"^[A-Za-z_$][\w$]*(?:\.[\w$]+)+$"
#: java.util.logging's SimpleFormatter: the second line of a record starts with the level.
JUL_LEVEL_LINE = r"^(SEVERE|WARNING|INFO|CONFIG|FINEST|FINER|FINE): ?"
#: Levels as layouts print them; other spellings (lower case, padded, java.util.logging's) are normalised.
CANONICAL_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR")
#: First words of the JVM's default uncaught-exception output (ThreadGroup.uncaughtException).
UNCAUGHT_HEAD = 'Exception in thread "'
#: A record start that prints no timestamp but opens with its level (%p %m (%c)%n, a quoted fragment).
LEVEL_HEAD = r"^(?:TRACE|DEBUG|INFO|WARN|ERROR|FATAL) +(?=\S)"
#: Wiki markup that pasted logs carry at a line's start or end (JIRA {quote}, {code}, {noformat}).
PASTE_TAGS = ("quote", "code", "noformat")
PASTE_MARKUP = rf"^(?:\{{(?:{'|'.join(PASTE_TAGS)})(?::[^}}]*)?\}})+|(?:\{{(?:{'|'.join(PASTE_TAGS)})\}})+$|^`(?=[^`])|(?<=[^`]) ?`$"
#: The generic layout's stamp carries a date (everything but a time of day or a syslog stamp).
DATED_STAMP = r"^\d{4}[-/]\d{2}[-/]\d{2}|, \d{4} |^\d{2} [A-Z][a-z]{2} \d{4} "


def generic_fields(groups: dict[str, str | None]) -> dict[str, str]:
    """Fields of a generic-layout match (Python mirror of the Spark columns in :func:`_generic_columns`)."""
    def get(name: str) -> str:
        return (groups.get(name) or "").strip()

    thread, logger, message = get("thread"), get("logger"), groups.get("message") or ""
    if not logger and re.match(DOTTED_NAME, thread):
        logger, thread = thread, ""
    thread = get("thread_a") or thread or get("thread_c")
    if not logger and (m := re.match(MESSAGE_TRAILER, message)):
        message, logger = m.group(1), m.group(2)
    return {"ts": get("ts"), "level": get("level"), "thread": thread, "logger": logger, "message": message}


@dataclass(frozen=True)
class Layout:
    """One log layout from ``catalogue/layouts.toml``."""

    id: str
    description: str
    pattern: str | None = None
    ts_formats: tuple[str, ...] = ()
    logger_trailer: bool = False
    json: bool = False
    json_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    samples: tuple[dict, ...] = ()
    #: the per-line fallback for record starts no named layout fits (see :func:`generic_fields`)
    generic: bool = False
    #: generic layout: the pattern for a line that prints no timestamp but opens with its level
    bare_pattern: str | None = None

    @property
    def regex(self) -> re.Pattern[str] | None:
        return _compile(self.pattern) if self.pattern else None

    def fields(self, line: str) -> dict[str, str] | None:
        """The fields of a record's first line (ts, level, thread, logger, message), or None.

        The same split the Spark parser makes (leading whitespace ignored); for tests and tools.
        """
        if self.regex is None:
            return None
        head = line.lstrip()
        m = self.regex.match(head) or (_compile(self.bare_pattern).match(head) if self.bare_pattern else None)
        if not m:
            return None
        if self.generic:
            return generic_fields(m.groupdict())
        return {k: (m.groupdict().get(k) or "") for k in FIELDS}

    @property
    def has_date(self) -> bool:
        return any("yyyy" in f for f in self.ts_formats)


@dataclass(frozen=True)
class Wrapper:
    """A prefix that a log shipper or container runtime puts in front of every line."""

    id: str
    description: str
    pattern: str
    sample: str = ""
    #: a JSON wrapper (docker's json-file driver): the line is this key of the object, the stamp json_ts_key
    json_key: str | None = None
    json_ts_key: str | None = None

    @property
    def regex(self) -> re.Pattern[str]:
        return _compile(self.pattern)

    def strip(self, line: str) -> str | None:
        """The line without this wrapper, or None when the line does not carry it."""
        if self.json_key is None:
            m = self.regex.match(line)
            return line[m.end():] if m else None
        import json

        try:
            obj = json.loads(line)
        except ValueError:
            return None
        inner = obj.get(self.json_key) if isinstance(obj, dict) else None
        return inner.rstrip("\r\n") if isinstance(inner, str) else None


@dataclass(frozen=True)
class Detection:
    """The layout chosen for one file, with the share of sampled lines it recognised."""

    layout: str | None
    wrappers: tuple[str, ...] = ()
    start_share: float = 0.0
    sampled: int = 0

    @property
    def key(self) -> tuple[str | None, tuple[str, ...]]:
        return (self.layout, self.wrappers)


@dataclass
class Catalogue:
    layouts: list[Layout]
    wrappers: dict[str, Wrapper]
    chains: list[tuple[str, ...]]
    sample_lines: int
    min_start_share: float
    min_wrapper_share: float

    def layout(self, layout_id: str) -> Layout:
        for layout in self.layouts:
            if layout.id == layout_id:
                return layout
        raise KeyError(layout_id)

    @property
    def generic(self) -> Layout:
        """The fallback layout tried on every timestamped line its file's layout does not fit."""
        return next(l for l in self.layouts if l.generic)

    @property
    def named(self) -> list[Layout]:
        """Layouts chosen per file by detection (every layout but the generic fallback)."""
        return [l for l in self.layouts if not l.generic]


@lru_cache(maxsize=None)
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@lru_cache(maxsize=1)
def load_layouts() -> Catalogue:
    """Read the layout catalogue shipped with the package."""
    text = resources.files("toolkit.catalogue").joinpath("layouts.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    layouts = []
    for raw in data["layout"]:
        keys = {k.removesuffix("_keys"): tuple(v) for k, v in raw.items() if k.endswith("_keys")}
        pattern, bare = raw.get("pattern"), None
        if "stamp" in raw:  # generic: [stamp] then tail; a level-first line without a stamp reads the tail alone
            pattern = rf"^\[?(?P<ts>{raw['stamp']})\]?{raw['tail']}"
            bare = rf"^(?P<ts>)(?={LEVEL_HEAD[1:]}){raw['tail']}"
        layouts.append(
            Layout(
                id=raw["id"],
                description=raw.get("description", ""),
                pattern=pattern,
                bare_pattern=bare,
                ts_formats=tuple(raw.get("ts_formats", ())),
                logger_trailer=bool(raw.get("logger_trailer", False)),
                json=bool(raw.get("json", False)),
                json_keys=keys,
                samples=tuple(raw.get("samples", ())),
                generic=bool(raw.get("generic", False)),
            )
        )
    wrappers = {w["id"]: Wrapper(w["id"], w.get("description", ""), w["pattern"], w.get("sample", ""),
                                 w.get("json_key"), w.get("json_ts_key"))
                for w in data.get("wrapper", [])}
    det = data.get("detection", {})
    return Catalogue(
        layouts=layouts,
        wrappers=wrappers,
        chains=[()] + [tuple(c) for c in det.get("chains", [])],
        sample_lines=int(det.get("sample_lines", 400)),
        min_start_share=float(det.get("min_start_share", 0.05)),
        min_wrapper_share=float(det.get("min_wrapper_share", 0.9)),
    )


# --------------------------------------------------------------------------- detection (driver side, bounded sample)

_ANSI_RE = re.compile(ANSI_ESCAPE)
_PASTE_RE = re.compile(PASTE_MARKUP)


def _strip_chain(line: str, chain: tuple[str, ...], cat: Catalogue) -> str | None:
    for wid in chain:
        stripped = cat.wrappers[wid].strip(line)
        if stripped is None:
            return None
        line = stripped
    return line


def _json_line_ok(line: str, layout: Layout) -> bool:
    import json

    if not line.startswith("{"):
        return False
    try:
        obj = json.loads(line)
    except ValueError:
        return False
    return isinstance(obj, dict) and any(k in obj for k in layout.json_keys.get("message", ()))


def _starts(line: str, layout: Layout) -> bool:
    if layout.json:
        return _json_line_ok(line, layout)
    if layout.generic:
        head = line.lstrip()
        return bool(layout.regex.match(head) or head.startswith(UNCAUGHT_HEAD)
                    or _compile(layout.bare_pattern).match(head))
    return bool(layout.regex.match(line if layout.id == "message-only" else line.lstrip()))


def detect_lines(lines: list[str], cat: Catalogue | None = None) -> Detection:
    """Choose the layout and wrapper chain that recognise the most record starts in ``lines``.

    Named layouts that start at least ``min_start_share`` of the lines come first, then the generic
    layout at that share, then whichever layout found any record start at all (a few records among
    stack traces). Lines are read one by one anyway; the choice only decides which layout's field
    split is tried first.
    """
    cat = cat or load_layouts()
    sample = [_PASTE_RE.sub("", _ANSI_RE.sub("", ln)) for ln in lines if ln.strip()][: cat.sample_lines]
    if not sample:
        return Detection(None, (), 0.0, 0)
    # (named layouts at the required share, the generic layout at it, anything that read a record start)
    best: list[Detection | None] = [None, None, None]
    for chain in cat.chains:
        stripped = [_strip_chain(ln, chain, cat) for ln in sample] if chain else sample
        matched = [s for s in stripped if s is not None]
        if chain and len(matched) < cat.min_wrapper_share * len(sample):
            continue
        for layout in cat.layouts:
            hits = sum(1 for s in matched if _starts(s, layout))
            if not hits:
                continue
            found = Detection(layout.id, chain, hits / len(sample), len(sample))
            # A few record starts among stack traces still name the file's layout (lines are read one by one).
            rank = 2 if found.start_share < cat.min_start_share else int(layout.generic)
            current = best[rank]
            if current is None or hits > current.start_share * current.sampled + 1e-9:
                best[rank] = found
    return next((d for d in best if d is not None), Detection(None, (), 0.0, len(sample)))


def detect_file(path: Path, cat: Catalogue | None = None) -> Detection:
    """Detect the layout of a file from its first lines (reads at most 512 KiB of text, decompressed
    when the file is gzip)."""
    cat = cat or load_layouts()
    head = read_text_head(path, 512 * 1024)
    lines = head.decode("utf-8", errors="replace").splitlines()
    if len(head) == 512 * 1024 and lines:
        lines = lines[:-1]  # the last one may be cut
    return detect_lines(lines[: cat.sample_lines * 2], cat)


# --------------------------------------------------------------------------- Spark parsing


LINE_COUNT_SCHEMA = "source string, lines_read long, bad_utf8_lines long, nul_lines long, longest_line long"


@dataclass
class ParsedLogs:
    """Records of all log files, plus what is needed to check that no line was lost."""

    records: DataFrame
    #: source, lines_read (physical lines Spark read per file); bad_utf8_lines and nul_lines
    #: (lines with undecodable bytes or NUL bytes) and longest_line (characters) when the text was
    #: parsed in this run
    line_counts: DataFrame
    detections: dict[str, Detection]
    #: frees what the parse kept on executors' local disk; call it once ``records`` has been written
    release: Callable[[], object] = lambda: None


def _file_table(spark: SparkSession, bundle: Bundle, files: list[LogFile],
                detections: dict[str, Detection]) -> DataFrame:
    """One row per log file: where Spark finds it, its host settings and its detected layout."""
    rows = []
    for f in files:
        settings = bundle.settings_for(f.host)
        # Time-only layouts: the host's date, else the file's modification date in the host zone.
        day, date_from = settings.borrowed_date(f.local_path.stat().st_mtime)
        det = detections[f.source]
        rows.append((str(f.local_path.resolve()), f.source, f.host, settings.timezone,
                     int(settings.clock_offset_ms), day, date_from, det.layout, _chain_id(det.wrappers)))
    return utc.create_frame(
        spark,
        rows,
        "file_key string, source string, file_host string, tz string, clock_offset_ms long, "
        "file_date string, date_from string, layout_id string, chain_id string",
    )


#: Per-line settings of hosts named by a line prefix: they replace the file's settings of the same name.
LINE_HOST_SETTINGS = {"tz": "_line_tz", "clock_offset_ms": "_line_clock_offset_ms", "file_date": "_line_date",
                      "date_from": "_line_date_from"}


def carries_line_hosts(wrappers: tuple[str, ...], cat: Catalogue | None = None) -> bool:
    """Whether a wrapper chain names each line's host (kubectl --prefix, compose, stern, journald)."""
    cat = cat or load_layouts()
    return any("wrap_host" in cat.wrappers[w].regex.groupindex for w in wrappers if w in cat.wrappers)


def _line_host_table(spark: SparkSession, bundle: Bundle, files: list[LogFile], detections: dict[str, Detection],
                     cat: Catalogue) -> DataFrame | None:
    """One row per (file whose lines name their host, host with its own ``bundle.toml`` section): the
    settings a line of that file takes when its prefix names that host. None when no file needs one.

    A small table (prefixed files times host sections), looked up per line by a broadcast join: a prefixed
    file often holds every pod of a bundle, and each pod's zone, clock offset and date must apply to its lines.
    """
    rows = [(str(f.local_path.resolve()), *settings)
            for f in files if carries_line_hosts(detections[f.source].wrappers, cat)
            for settings in bundle.line_host_settings(f)]
    if not rows:
        return None
    return utc.create_frame(
        spark, rows,
        "file_key string, wrap_host string, _line_tz string, _line_clock_offset_ms long, _line_date string, "
        "_line_date_from string")


def _chain_id(chain: tuple[str, ...]) -> str:
    return "+".join(chain)


def _local_path(uri: str) -> str:
    """Spark reports ``file:/a%20b``; turn it back into the plain path the bundle knows."""
    return unquote(re.sub(r"^file:(//)?", "", uri))


#: A file split (a whole ``.gz`` is one) with more lines than this makes the numbered lines spread
#: over several tasks for the per-line parse, instead of one task parsing the whole file.
SPREAD_SPLIT_LINES = 2_000_000
#: Lines per task when the numbered lines are spread.
SPREAD_TASK_LINES = 1_000_000


def _raw_lines(spark: SparkSession, paths: list[str]) -> DataFrame:
    """The text lines of ``paths`` with their split and an id that grows with the line inside a split."""
    # A damaged file must fail the read (it is then recovered), never be skipped in silence.
    return spark.read.option("ignoreCorruptFiles", "false").text(paths).select(
        F.col("value"),
        F.col("_metadata.file_path").alias("_uri"),
        F.col("_metadata.file_block_start").alias("block_start"),
        F.monotonically_increasing_id().alias("_row_id"),
    )


def _split_rows(raw: DataFrame) -> list:
    """The first job over the text: one small row per file split (first id, lines, bad lines)."""
    return raw.groupBy("_uri", "block_start").agg(
        F.min("_row_id").alias("first_id"), F.count(F.lit(1)).alias("lines"),
        # Counted on the raw bytes: a bad byte outside the fields a layout keeps (a JSON key) still shows.
        F.count(F.when(~F.is_valid_utf8("value"), 1)).alias("bad_utf8"),
        F.count(F.when(F.col("value").contains("\u0000"), 1)).alias("nul"),
        F.max(F.length("value")).alias("longest"),
    ).collect()


def _numbered_lines(spark: SparkSession, paths: list[str], raw: DataFrame | None = None,
                    splits: list | None = None) -> tuple[DataFrame, DataFrame]:
    """Read text files and number their lines 1..n per file (no global sort).

    Within one file split Spark returns lines in order, and ``monotonically_increasing_id`` grows
    with them. A first pass counts the lines of each split (one small row per split, collected:
    a 4 GB bundle has a few dozen); the second numbers each line from its split's offset. ``raw``
    and ``splits``: that first pass, when already run. A split of more than ``SPREAD_SPLIT_LINES``
    (a big ``.gz`` is read as one) has its numbered lines spread over several tasks.
    """
    if raw is None or splits is None:
        raw = _raw_lines(spark, paths)
        splits = _split_rows(raw)
    offsets, totals = [], {}
    for split in sorted(splits, key=lambda r: (r["_uri"], r["block_start"])):
        key = _local_path(split["_uri"])
        lines, bad, nul, longest = totals.get(key, (0, 0, 0, 0))
        offsets.append((split["_uri"], split["block_start"], key, lines - split["first_id"] + 1, split["bad_utf8"] > 0))
        totals[key] = (lines + split["lines"], bad + split["bad_utf8"], nul + split["nul"],
                       max(longest, split["longest"] or 0))
    offset_table = utc.create_frame(
        spark, offsets, "_uri string, block_start long, file_key string, _line_offset long, _bad_utf8 boolean")
    numbered = raw.join(F.broadcast(offset_table), ["_uri", "block_start"]).select(
        # Undecodable bytes become U+FFFD so records.parquet holds valid UTF-8 for every reader; the first
        # pass counted them per split, so splits without any skip the per-line check.
        F.when(F.col("_bad_utf8"), F.make_valid_utf8("value")).otherwise(F.col("value")).alias("value"),
        "file_key",
        (F.col("_row_id") + F.col("_line_offset")).alias("line_no"),
    )
    if splits and max(split["lines"] for split in splits) > SPREAD_SPLIT_LINES:
        # The ids were taken in the scan, before this shuffle: numbering is unchanged by it.
        total = sum(split["lines"] for split in splits)
        tasks = max(2, -(-total // SPREAD_TASK_LINES))
        numbered = numbered.repartition(tasks, "file_key", F.floor(F.col("line_no") / F.lit(SPREAD_TASK_LINES)))
    counts = utc.create_frame(spark, [(k, *v) for k, v in totals.items()],
                                   "file_key string, lines_read long, bad_utf8_lines long, nul_lines long, longest_line long")
    return numbered, counts


def _read_splits(spark: SparkSession, bundle: Bundle, logs: list[LogFile]) -> tuple[list[LogFile], DataFrame, list]:
    """Run the first job over the logs' text; a gzip that turns out damaged is recovered on the driver.

    Spark decompresses ``.gz`` logs itself; a truncated or corrupt one fails the job. The damaged
    file is then the one the error names, or else found by checking every gzip log by streaming
    (only in this case); it is replaced by what :func:`~toolkit.bundle.gzip_logs.recover_gzip`
    keeps (with its problem row, in ``bundle.logs`` too) and the job runs again.
    Returns the logs as read, the raw lines and the split rows.
    """
    while True:
        raw = _raw_lines(spark, [str(f.local_path.resolve()) for f in logs])
        try:
            return logs, raw, _split_rows(raw)
        except Exception as exc:  # Py4JJavaError, or a Spark Connect error: both name the file
            damaged = _damaged_named_by(exc, logs, bundle)
            if not damaged:
                raise
            logs = _replace_recovered(bundle, logs, damaged)


def _damaged_named_by(exc: Exception, logs: list[LogFile], bundle: Bundle) -> list[LogFile]:
    """The damaged gzip logs behind a failed read: the file the error names if it is damaged, else
    every gzip that does not decompress cleanly (none: the failure is something else)."""
    gzipped = [f for f in logs if f.gzip]
    if not gzipped:
        return []
    message = unquote(str(exc))
    named = [f for f in gzipped if str(f.local_path.resolve()) in message]
    if named and not gzip_is_intact(named[0].local_path, bundle.limits):
        return named[:1]
    return damaged_gzips(gzipped, bundle.limits)


def _replace_recovered(bundle: Bundle, logs: list[LogFile], damaged: list[LogFile]) -> list[LogFile]:
    """``logs`` with each damaged gzip replaced by its recovered text (or dropped when nothing is left)."""
    replacement = {f.source: recover_gzip(bundle, f) for f in damaged}

    def swap(files: list[LogFile]) -> list[LogFile]:
        kept = (replacement.get(f.source, f) for f in files)
        return [f for f in kept if f is not None]

    bundle.logs[:] = swap(bundle.logs)
    return swap(logs)


def _case(key: Column, branches: dict[str, Column], otherwise: Column | None = None) -> Column:
    """CASE key WHEN k1 THEN v1 ... (each branch keeps its own literal regex, compiled once)."""
    expr = None
    for k, v in branches.items():
        expr = F.when(key == k, v) if expr is None else expr.when(key == k, v)
    if expr is None:
        return otherwise if otherwise is not None else F.lit(None)
    return expr.otherwise(otherwise) if otherwise is not None else expr


def _strip_chain_col(text: Column, chain: tuple[str, ...], cat: Catalogue) -> tuple[Column, Column, Column]:
    """Remove one chain of wrapper prefixes; return (text, wrapper host, wrapper timestamp)."""
    wrap_host: Column = F.lit(None).cast("string")
    wrap_ts: Column = F.lit(None).cast("string")
    for wid in chain:
        w = cat.wrappers[wid]
        if w.json_key:  # one JSON object per line: the printed line is a field (escapes decoded)
            inner = F.when(text.startswith("{"), F.get_json_object(text, f"$.{w.json_key}"))
            if w.json_ts_key:
                wrap_ts = F.when(inner.isNotNull(), F.get_json_object(text, f"$.{w.json_ts_key}"))
            text = F.when(inner.isNotNull(), F.regexp_replace(inner, r"\r?\n$", "")).otherwise(text)
            continue
        java = to_java_regex(w.pattern)
        groups = w.regex.groupindex
        if "wrap_host" in groups:
            wrap_host = F.nullif(F.regexp_extract(text, java, groups["wrap_host"]), F.lit(""))
        if "wrap_ts" in groups:
            wrap_ts = F.nullif(F.regexp_extract(text, java, groups["wrap_ts"]), F.lit(""))
        text = F.regexp_replace(text, java, "")
    return text, wrap_host, wrap_ts


def _timestamp(layout: Layout, ts_raw: Column, tz: Column, file_date: Column) -> Column:
    """UTC timestamp from the raw timestamp text of one layout (first format that parses)."""
    if layout.generic:
        return _generic_timestamp(ts_raw, tz, file_date)
    candidates = []
    if layout.json:  # epoch fields: seconds (with a fraction), milliseconds, microseconds or nanoseconds
        digits = F.length(F.regexp_extract(ts_raw, r"^(\d+)", 1))
        numeric = ts_raw.rlike(r"^\d{9,19}(?:\.\d+)?$")
        epoch = (F.when(numeric & (digits <= 11), F.timestamp_micros((ts_raw.cast("double") * 1e6).cast("long")))
                 .when(numeric & (digits <= 14), F.timestamp_millis(F.split(ts_raw, r"\.").getItem(0).cast("long")))
                 .when(numeric & (digits <= 17), F.timestamp_micros(F.split(ts_raw, r"\.").getItem(0).cast("long")))
                 .when(numeric, F.timestamp_micros(F.substring(ts_raw, 1, 16).cast("long"))))
        # log4j2 JsonLayout: "instant":{"epochSecond":..,"nanoOfSecond":..}
        micros = (F.get_json_object(ts_raw, "$.epochSecond").cast("long") * 1_000_000
                  + F.coalesce(F.get_json_object(ts_raw, "$.nanoOfSecond").cast("long"), F.lit(0)) / 1000)
        instant = F.when(ts_raw.startswith("{") & ts_raw.contains("epochSecond"),
                         F.timestamp_micros(micros.cast("long")))
        candidates += [epoch, instant]
    for fmt in layout.ts_formats:
        has_zone = "X" in fmt or "Z" in fmt or "x" in fmt
        if "yyyy" in fmt:
            parsed = F.try_to_timestamp(ts_raw, F.lit(fmt))
        else:  # time of day only: borrow the date from bundle.toml or the file
            parsed = F.try_to_timestamp(F.concat_ws(" ", file_date, ts_raw), F.lit(f"yyyy-MM-dd {fmt}"))
        candidates.append(parsed if has_zone else F.to_utc_timestamp(parsed, tz))
    if not candidates:
        return F.lit(None).cast("timestamp_ltz")
    return F.coalesce(*candidates) if len(candidates) > 1 else candidates[0]


_ISO_STAMP = r"^(\d{4})[-/](\d{2})[-/](\d{2})[T ](\d{2}:\d{2}:\d{2})(?:[.,](\d{1,9}))?"
_STAMP_ZONE = r"(Z|[+-]\d{2}:?\d{2}|UTC|GMT)$"


def _generic_timestamp(ts_raw: Column, tz: Column, file_date: Column) -> Column:
    """UTC timestamp of any stamp shape the generic layout accepts.

    ISO-like stamps are normalised to ``yyyy-MM-dd HH:mm:ss.f`` (any fraction length) and their
    printed zone, if any, wins over the host's; a time of day takes the file's date; a syslog stamp
    the file's year.
    """
    fraction = F.regexp_extract(ts_raw, _ISO_STAMP, 5)
    local = F.concat(F.regexp_extract(ts_raw, _ISO_STAMP, 1), F.lit("-"), F.regexp_extract(ts_raw, _ISO_STAMP, 2),
                     F.lit("-"), F.regexp_extract(ts_raw, _ISO_STAMP, 3), F.lit(" "),
                     F.regexp_extract(ts_raw, _ISO_STAMP, 4),
                     F.when(fraction != "", F.concat(F.lit("."), fraction)).otherwise(F.lit("")))
    zone = F.regexp_extract(ts_raw, _STAMP_ZONE, 1)
    zone = (F.when(zone == "", tz).when(zone.isin("Z", "UTC", "GMT"), F.lit("UTC"))
            .otherwise(F.regexp_replace(zone, r"^([+-]\d{2}):?(\d{2})$", "$1:$2")))
    iso = F.to_utc_timestamp(F.try_to_timestamp(local, F.lit("yyyy-MM-dd HH:mm:ss[.SSSSSSSSS]")), zone)
    time_only = F.to_utc_timestamp(F.try_to_timestamp(
        F.concat_ws(" ", file_date, F.translate(ts_raw, ",", ".")), F.lit("yyyy-MM-dd HH:mm:ss[.SSSSSSSSS]")), tz)
    jul = F.to_utc_timestamp(F.try_to_timestamp(ts_raw, F.lit("MMM d, yyyy h:mm:ss a")), tz)
    syslog = F.to_utc_timestamp(F.try_to_timestamp(
        F.concat_ws(" ", F.substring(file_date, 1, 4), F.regexp_replace(F.translate(ts_raw, ",", "."), " +", " ")),
        F.lit("yyyy MMM d HH:mm:ss[.SSSSSS]")), tz)
    log4j_date = F.to_utc_timestamp(F.try_to_timestamp(F.translate(ts_raw, ",", "."),
                                                       F.lit("dd MMM yyyy HH:mm:ss.SSS")), tz)
    first = F.substring(ts_raw, 1, 1)
    return (F.when(ts_raw.rlike(r"^\d{4}[-/]"), iso)
            .when(ts_raw.rlike(r"^\d{2}:"), time_only)
            .when(ts_raw.endswith("M"), jul)
            .when(first.rlike("[A-Z]"), syslog)
            .otherwise(log4j_date))


def _split_rewrite(rewritten: str, fields: int) -> Column:
    """The fields of a rewrite (SEP f1 SEP f2 ...) as an array whose item 0 is the empty text before the
    first SEP: the fields are items 1..n. Splitting the whole rewrite saves cutting off its first character,
    which copies the line and counts its characters once more."""
    return F.split(F.col(rewritten), FIELD_SEP, fields + 1)


def _rewrite_regex(layout: Layout, text: Column) -> Column:
    """One regex per line: a record's first line becomes SEP ts SEP level ... (unchanged if no match)."""
    groups = layout.regex.groupindex
    replacement = FIELD_SEP + FIELD_SEP.join(f"${groups[f]}" if f in groups else "" for f in FIELDS)
    return F.regexp_replace(text, to_java_regex(layout.pattern), replacement)


def _generic_parts(layout: Layout) -> tuple[str, list[str]]:
    """The generic layout's rewrite: its Java regex and the group order of the fields it yields."""
    names = ["ts", "level", "thread_a", "thread", "thread_c", "logger", "message"]
    groups = layout.regex.groupindex
    return to_java_regex(layout.pattern), [n for n in names if n in groups]


def _generic_columns(lines: DataFrame, generic: Layout, needs: Column) -> DataFrame:
    """``_g_*`` fields of lines the file's layout does not fit but whose head carries a timestamp.

    One anchored regex, run only where ``needs`` holds: it fails on the first characters of stack
    trace and continuation lines, so its cost is a few character tests on most lines.
    """
    java, names = _generic_parts(generic)
    groups = generic.regex.groupindex
    replacement = FIELD_SEP + FIELD_SEP.join(f"${groups[n]}" for n in names)
    head = F.col("_head")
    lines = lines.withColumn("_grw", F.when(needs, F.regexp_replace(head, java, replacement)))
    # No stamp, but the line opens with its level (%p ... %m, a stamp cut off in a paste): same fields.
    stamped = F.col("_grw").startswith(FIELD_SEP)
    leveled = needs & ~stamped & head.substr(1, 1).isin("T", "D", "I", "W", "E", "F") & head.rlike(LEVEL_HEAD)
    bare = F.regexp_replace(head, to_java_regex(generic.bare_pattern), replacement)
    lines = lines.withColumn("_grw", F.when(stamped, F.col("_grw")).when(leveled, bare))
    lines = lines.withColumn("_gparts", F.when(F.col("_grw").startswith(FIELD_SEP), _split_rewrite("_grw", len(names))))
    part = {n: F.nullif(F.trim(F.col("_gparts").getItem(i + 1)), F.lit("")) for i, n in enumerate(names)}
    message = F.col("_gparts").getItem(names.index("message") + 1)
    # A bracketed dotted name with no logger after it is the logger (Quarkus: [o.a.k.s.KafkaStreams] (thread)).
    thread_is_logger = part["logger"].isNull() & part["thread"].rlike(DOTTED_NAME)
    logger = F.when(thread_is_logger, part["thread"]).otherwise(part["logger"])
    thread = F.coalesce(part["thread_a"], F.when(~thread_is_logger, part["thread"]), part["thread_c"])
    # Kafka's own layout ends the message with " (logger)"; a line that fits it only loosely keeps that.
    trailer = logger.isNull() & message.endswith(")") & message.rlike(MESSAGE_TRAILER)
    return lines.select(
        "*",
        part["ts"].alias("_g_ts"), part["level"].alias("_g_level"), thread.alias("_g_thread"),
        F.when(trailer, F.regexp_extract(message, MESSAGE_TRAILER, 2)).otherwise(logger).alias("_g_logger"),
        F.when(trailer, F.regexp_extract(message, MESSAGE_TRAILER, 1)).otherwise(message).alias("_g_message"),
    )


def _line_columns(lines: DataFrame, layouts: list[Layout], generic: Layout) -> DataFrame:
    """Add ``f_ts .. f_message, f_stack``, ``is_start``, ``is_cont`` and ``line_layout`` for every line.

    The file's own layout is tried first (the best field split); a line it does not fit but whose
    head (after whitespace) carries a timestamp is a record start read by the generic layout, so a
    few foreign lines in a file lose nothing and a file no named layout fits is still read.

    Each expensive step is its own column (the regex rewrite, its split, the JSON map), so Spark
    evaluates it once per line: an expression repeated inside CASE branches would run once per
    use (the first version of this code ran the layout regex eleven times per line).
    """
    text, layout_id = F.col("text"), F.col("layout_id")
    regex_layouts = [l for l in layouts if l.pattern and not l.json and l.id != "message-only" and not l.generic]
    json_layouts = [l for l in layouts if l.json]
    message_only = [l for l in layouts if l.id == "message-only"]
    # Pasted and indented lines: the head is the text after leading whitespace.
    indented = text.startswith(" ") | text.startswith("\t")
    # Each stage is one withColumns (one analysis of the plan) holding the columns the next stage reads.
    lines = lines.withColumn("_head", F.when(indented, F.regexp_replace(text, r"^\s+", "")).otherwise(text))
    head = F.col("_head")
    lines = lines.withColumns({
        "_rw": _case(layout_id, {l.id: _rewrite_regex(l, head) for l in regex_layouts}, F.lit(None).cast("string")),
        "_json": _case(
            layout_id,
            {l.id: F.when(text.startswith("{"), F.from_json(text, "map<string,string>", {"mode": "PERMISSIVE"}))
             for l in json_layouts},
            F.lit(None).cast("map<string,string>")),
        # %m%n: every line is a message, except stack traces and indented continuation lines.
        "_msg_start": _case(
            layout_id,
            {l.id: ~(text.rlike(STACK_LINE) | text.rlike(r"^\s")) & (F.length(text) > 0) for l in message_only},
            F.lit(False)),
    })
    lines = lines.withColumn("_parts", F.when(F.col("_rw").startswith(FIELD_SEP), _split_rewrite("_rw", len(FIELDS))))

    def json_field(layout: Layout, kind: str) -> Column:
        keys = layout.json_keys.get(kind, ())
        return F.coalesce(*[F.col("_json").getItem(k) for k in keys]) if keys else F.lit(None).cast("string")

    named_fields = {}
    for i, name in enumerate(FIELDS):
        branches = {l.id: F.nullif(F.col("_parts").getItem(i + 1), F.lit("")) for l in regex_layouts}
        branches.update({l.id: json_field(l, name) for l in json_layouts})
        if name == "message":
            branches.update({l.id: F.when(F.col("_msg_start"), text) for l in message_only})
        named_fields[f"_n_{name}"] = _case(layout_id, branches, F.lit(None).cast("string"))
    lines = lines.withColumns(named_fields)
    named = _case(layout_id, {**{l.id: F.col("_parts").isNotNull() for l in regex_layouts},
                              **{l.id: F.col("_n_message").isNotNull() for l in json_layouts},
                              **{l.id: F.col("_msg_start") for l in message_only}}, F.lit(False))
    lines = lines.withColumn("_named_start", named)
    lines = _generic_columns(lines, generic, ~F.col("_named_start"))
    # The JVM's default handler prints an uncaught exception with no layout at all: a record of its own.
    bare = ~F.col("_named_start") & F.col("_gparts").isNull() & head.startswith(UNCAUGHT_HEAD)
    generic_start = F.col("_gparts").isNotNull() | bare
    fields = {
        f"f_{name}": F.when(F.col("_named_start"), F.col(f"_n_{name}")).when(F.col("_gparts").isNotNull(), F.col(f"_g_{name}"))
        .when(bare, head if name == "message" else F.lit(None).cast("string"))
        for name in FIELDS
    }
    fields["f_stack"] = F.when(F.col("_named_start"), _case(
        layout_id, {l.id: json_field(l, "stack") for l in json_layouts}, F.lit(None).cast("string")))
    lines = lines.withColumns(fields)
    is_start = F.col("_named_start") | generic_start
    # JSON lines keep stack traces inside the object: a non-JSON line is not a continuation.
    json_file = layout_id.isin(*[l.id for l in json_layouts]) if json_layouts else F.lit(False)
    return lines.select(
        "*",
        is_start.alias("is_start"),
        (~is_start & ~F.coalesce(json_file, F.lit(False))).alias("is_cont"),
        F.when(F.col("_named_start"), layout_id).when(generic_start, F.lit(generic.id)).alias("line_layout"),
    )


def _parse_all(spark: SparkSession, cat: Catalogue, files: DataFrame, paths: list[str],
               layouts: list[Layout], chains: list[tuple[str, ...]], redact: bool = True,
               raw: DataFrame | None = None, splits: list | None = None,
               line_hosts: DataFrame | None = None) -> tuple[DataFrame, DataFrame, DataFrame]:
    """Parse every text file in one Spark plan; per-file layout choices become CASE branches.

    ``line_hosts``: the settings of hosts that line prefixes name (:func:`_line_host_table`), if any.

    Returns (records, line counts, the persisted per-line table to release once records are written).
    """
    numbered, counts = _numbered_lines(spark, paths, raw, splits)
    lines = numbered.join(F.broadcast(files), "file_key")
    value = F.when(F.col("value").contains(FIELD_SEP), F.translate(F.col("value"), FIELD_SEP, " ")).otherwise(F.col("value"))
    value = F.when(value.contains("\u001b"), F.regexp_replace(value, ANSI_ESCAPE, "")).otherwise(value)
    # Paste markup sits only at a line's start or end (see PASTE_MARKUP): test those two characters, not the line.
    pasted = value.startswith("`") | value.endswith("`")
    for tag in PASTE_TAGS:
        pasted = pasted | value.startswith("{" + tag) | value.endswith("{" + tag + "}")
    value = F.when(pasted, F.regexp_replace(value, PASTE_MARKUP, "")).otherwise(value)
    # JIRA escapes markup characters of pasted text: PARTITIONS\_ASSIGNED, \*bold\*.
    value = F.when(value.contains("\\") & (value.contains("\\_") | value.contains("\\*")),
                   F.regexp_replace(F.regexp_replace(value, r"\\\*", ""), r"\\_", "_")).otherwise(value)
    stripped = {_chain_id(c): _strip_chain_col(value, c, cat) for c in chains if c}
    chain = F.col("chain_id")
    lines = lines.select(
        "*",
        _case(chain, {k: v[0] for k, v in stripped.items()}, value).alias("text"),
        _case(chain, {k: v[1] for k, v in stripped.items()}, F.lit(None).cast("string")).alias("wrap_host"),
        _case(chain, {k: v[2] for k, v in stripped.items()}, F.lit(None).cast("string")).alias("wrap_ts"),
    )
    if line_hosts is not None:
        # A line whose prefix names a host with its own section is read with that host's settings; a line
        # with no prefix, or naming a host without a section, keeps its file's.
        lines = lines.join(F.broadcast(line_hosts), ["file_key", "wrap_host"], "left")
        lines = lines.withColumns({name: F.coalesce(F.col(own), F.col(name)) for name, own in LINE_HOST_SETTINGS.items()}
                                  ).drop(*LINE_HOST_SETTINGS.values())
    layout_id = F.col("layout_id")
    generic = cat.generic
    lines = _line_columns(lines, layouts, generic)
    host = F.coalesce(F.col("wrap_host"), F.col("file_host")).alias("host")

    wrap_ts = F.coalesce(*[F.try_to_timestamp(F.col("wrap_ts"), F.lit(f)) for f in WRAPPER_TS_FORMATS])
    tz, day = F.col("tz"), F.col("file_date")
    named_ts = _case(layout_id, {l.id: _timestamp(l, F.col("f_ts"), tz, day) for l in layouts if not l.generic},
                     F.lit(None).cast("timestamp_ltz"))
    ts = F.when(F.col("line_layout") == generic.id, _timestamp(generic, F.col("f_ts"), tz, day)).otherwise(named_ts)
    # Some layouts print the date only optionally (logback): decide per line.
    dated = F.col("f_ts").rlike(DATED_STAMP) | F.col("f_ts").rlike(r"^\d{9,19}(?:\.\d+)?$|^\{")
    # The stamps are parsed in a stage of their own: the time, its quality and the clock offset all
    # read them, and Spark evaluates an expression inside CASE branches again at every use.
    starts_only = F.col("is_start")
    lines = lines.withColumns({"_ts": F.when(starts_only, ts), "_wrap_ts": F.when(starts_only, wrap_ts),
                               "_dated": F.when(starts_only, dated)})
    ts, wrap_ts, dated = F.col("_ts"), F.col("_wrap_ts"), F.col("_dated")
    # A wrapper stamp (docker -t, kubectl --timestamps) is exact: prefer it to a borrowed date.
    ts = F.when(~dated & wrap_ts.isNotNull(), wrap_ts).otherwise(ts)
    quality = (F.when(ts.isNull(), F.lit("missing")).when(dated, F.lit("exact"))
               .when(wrap_ts.isNotNull(), F.lit("wrapper")).otherwise(F.lit("date_inferred")))
    # In microseconds, Spark's own precision: wrapper and JSON stamps print them, and they must survive an offset.
    ts = F.when(F.col("clock_offset_ms") != 0,
                F.timestamp_micros(F.unix_micros(ts) - F.col("clock_offset_ms") * 1000)).otherwise(ts)
    # Named layouts print the level in capitals already: case-map only the others (JSON "level":"info").
    level = F.when(F.col("f_level").isin(*CANONICAL_LEVELS), F.col("f_level")).otherwise(F.upper(F.trim(F.col("f_level"))))
    level = (F.when(level == "WARNING", F.lit("WARN")).when(level.isin("FATAL", "SEVERE"), F.lit("ERROR"))
             .when(level == "CONFIG", F.lit("INFO")).when(level == "FINE", F.lit("DEBUG"))
             .when(level.isin("FINER", "FINEST"), F.lit("TRACE")).otherwise(level))

    # Everything later steps need from a line, computed once and kept on local disk: record starts,
    # continuation folding and the unparsed lines all read this table instead of re-parsing the text.
    is_start = F.col("is_start")
    per_line = lines.select(
        "file_key", "source", "line_no", host, "layout_id", "line_layout", "tz", "date_from", "is_start", "is_cont",
        F.when(is_start, ts).alias("ts"), F.col("f_ts").alias("ts_raw"), F.when(is_start, level).alias("level"),
        F.nullif(F.trim(F.col("f_thread")), F.lit("")).alias("thread"), F.col("f_logger").alias("logger"),
        F.when(is_start, F.coalesce(F.col("f_message"), F.lit(""))).alias("message"), F.col("f_stack").alias("stack"),
        F.when(is_start, quality).alias("ts_quality"),
        # The day a time-only stamp borrowed: with the zone, it says which records count their days together.
        F.when(is_start & (quality == "date_inferred"), day).alias("date_base"),
        F.when(~is_start, F.col("text")).alias("text"), F.when(~is_start, F.col("value")).alias("value"),
    ).persist(StorageLevel.DISK_ONLY)
    starts = per_line.where(is_start).select(
        "file_key", "source", "line_no", "host", "ts", "ts_raw", "level", "thread", "logger", "message", "stack",
        "line_layout", "ts_quality", "tz", "date_from", "date_base",
    )
    # One small job over the persisted lines: how many continuation lines, and whether any record
    # borrowed its date (only then is the per-file midnight rollover window worth its sort).
    tally = per_line.agg(F.count(F.when(F.col("is_cont"), 1)).alias("conts"),
                         F.count(F.when(F.col("ts_quality") == "date_inferred", 1)).alias("inferred")).first()
    if tally["inferred"]:
        starts = _roll_over_midnight(starts)
    starts = starts.drop("date_base")

    # Continuation runs ("islands"): line_no - rank is constant inside a run of consecutive
    # continuation lines, and the run belongs to the record on the line just before it.
    # The windows run per chunk of lines (not per file, which would make one task of a whole file); a
    # run that reaches back over a chunk's start belongs to the last other line before that chunk.
    conts = per_line.where("is_cont").select("file_key", "source", "line_no", "host", "text", "value", "layout_id",
                                             _chunk_of_line().alias("_chunk"))
    by_chunk = Window.partitionBy("file_key", "_chunk").orderBy("line_no")
    conts = conts.withColumn("_island", F.col("line_no") - F.row_number().over(by_chunk))
    conts = conts.withColumn("_run_start", F.min("line_no").over(Window.partitionBy("file_key", "_chunk", "_island")))
    starts_chunk = (F.col("_run_start") == F.col("_chunk") * WINDOW_CHUNK_LINES) & (F.col("_chunk") > 0)
    conts = conts.join(F.broadcast(_line_before_chunks(per_line)), ["file_key", "_chunk"], "left").withColumn(
        "record_line", F.when(starts_chunk, F.coalesce(F.col("_before"), F.lit(0))).otherwise(F.col("_run_start") - 1))
    attached = conts.where(F.col("record_line") >= 1).withColumn("stackish", F.col("text").rlike(STACK_LINE))
    trailer_layouts = [l.id for l in layouts if l.logger_trailer] + [generic.id]
    folded = _fold_continuations(attached, trailer_layouts)
    # Records with continuation lines are few next to all records: when the count says so, ship
    # them to every task instead of shuffling every record for the join.
    if tally["conts"] <= BROADCAST_FOLDED_MAX_LINES:
        folded = F.broadcast(folded)

    joined = starts.join(folded, ["file_key", "line_no"], "left")
    msg_cont = F.col("msg_cont")
    message = F.when(msg_cont.isNotNull() & (msg_cont != ""),
                     F.concat_ws("\n", F.col("message"), msg_cont)).otherwise(F.col("message"))
    # java.util.logging prints "<date> <class> <method>" and then "<LEVEL>: <message>" on the next line:
    # the record's message is what follows the level (the method name is dropped).
    jul = (F.col("line_layout") == generic.id) & F.col("ts_raw").endswith("M") & msg_cont.rlike(JUL_LEVEL_LINE)
    jul_level = F.regexp_extract(msg_cont, JUL_LEVEL_LINE, 1)
    jul_level = (F.when(jul_level == "WARNING", F.lit("WARN")).when(jul_level == "SEVERE", F.lit("ERROR"))
                 .when(jul_level == "CONFIG", F.lit("INFO")).when(jul_level == "FINE", F.lit("DEBUG"))
                 .when(jul_level.isin("FINER", "FINEST"), F.lit("TRACE")).otherwise(jul_level))
    records = joined.select(
        "source", "line_no", "host", "ts", "ts_raw",
        F.when(jul, jul_level).otherwise(F.col("level")).alias("level"), "thread",
        F.coalesce(F.col("logger"), F.col("trailer_logger")).alias("logger"),
        F.when(jul, F.regexp_replace(msg_cont, JUL_LEVEL_LINE, "")).otherwise(message).alias("message"),
        F.coalesce(F.col("stack"), F.nullif(F.col("stack_cont"), F.lit(""))).alias("stack"),
        F.col("line_layout").alias("layout"), "ts_quality",
        (F.lit(1) + F.coalesce(F.col("n_cont"), F.lit(0))).cast("int").alias("line_count"),
    )
    # Lines nobody understands: unknown layouts, non-JSON lines in JSON files, and continuation
    # lines with no record above them (a file cut in the middle of a stack trace).
    stray = conts.where(F.col("record_line") < 1).select("source", "line_no", "host", "value").unionByName(
        per_line.where(~is_start & ~F.col("is_cont")).select("source", "line_no", "host", "value")
    )
    stray = stray.select(
        "source", "line_no", "host", F.lit(None).cast("timestamp_ltz").alias("ts"),
        F.lit(None).cast("string").alias("ts_raw"), F.lit(None).cast("string").alias("level"),
        F.lit(None).cast("string").alias("thread"), F.lit(None).cast("string").alias("logger"),
        F.col("value").alias("message"), F.lit(None).cast("string").alias("stack"), F.lit(UNPARSED).alias("layout"),
        F.lit("missing").alias("ts_quality"), F.lit(1).alias("line_count"),
    )
    records = records.unionByName(stray)
    if redact:
        records = records.withColumn("message", redact_text_guarded_col(F.col("message"))).withColumn(
            "stack", redact_text_guarded_col(F.col("stack")))
    return records, counts, per_line


#: Up to this many continuation lines, folded records are broadcast to the join with all records.
BROADCAST_FOLDED_MAX_LINES = 300_000

#: A time of day that goes back by more than this against the record before it is the next day.
ROLLOVER_BACKSTEP_H = 12


#: Lines per chunk of the windows that follow a file in line order (continuation runs, midnight
#: rollover): each chunk is sorted in its own task, and one small row per chunk carries what the
#: next chunk needs to know.
WINDOW_CHUNK_LINES = 262_144


def _chunk_of_line() -> Column:
    return F.floor(F.col("line_no") / F.lit(WINDOW_CHUNK_LINES))


def _line_before_chunks(per_line: DataFrame) -> DataFrame:
    """Per (file, chunk): ``_before``, the last line before the chunk that is not a continuation line
    (null when there is none). One row per chunk of lines: a small table."""
    per_chunk = per_line.groupBy("file_key", _chunk_of_line().alias("_chunk")).agg(
        F.max(F.when(~F.col("is_cont"), F.col("line_no"))).alias("_last_other"))
    earlier = Window.partitionBy("file_key").orderBy("_chunk").rowsBetween(Window.unboundedPreceding, -1)
    return per_chunk.select("file_key", "_chunk", F.max("_last_other").over(earlier).alias("_before"))


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


def parse_logs(spark: SparkSession, bundle: Bundle, cat: Catalogue | None = None,
               files: list[LogFile] | None = None, redact: bool = True) -> ParsedLogs:
    """Parse the bundle's log files (or only ``files``) into one records DataFrame (``RECORD_SCHEMA``).

    With ``redact`` (the default) secret-looking values in messages and stack traces (passwords,
    tokens, JAAS configs, credentials in URLs, AWS keys) are replaced by ``[redacted]``.
    """
    cat = cat or load_layouts()
    logs = bundle.logs if files is None else files
    detections: dict[str, Detection] = {
        f.source: detect_file(f.local_path, cat) if f.size else Detection(None) for f in logs
    }
    readable = [f for f in logs if f.size]
    empty = utc.create_frame(spark, [], LINE_COUNT_SCHEMA)
    raw = splits = None
    if readable:
        readable, raw, splits = _read_splits(spark, bundle, readable)
        plan_for_lines(spark, max((s["longest"] or 0 for s in splits), default=0))
        logs = [f for f in logs if not f.size] + readable
    if not readable:
        zero = [(f.source, 0, 0, 0, 0) for f in logs]
        counts = utc.create_frame(spark, zero, LINE_COUNT_SCHEMA) if zero else empty
        return ParsedLogs(utc.create_frame(spark, [], RECORD_SCHEMA), counts, detections)
    files = _file_table(spark, bundle, readable, detections)
    line_hosts = _line_host_table(spark, bundle, readable, detections, cat)
    used_layouts = [l for l in cat.layouts if any(d.layout == l.id for d in detections.values())]
    used_chains = sorted({d.wrappers for d in detections.values()})
    paths = [str(f.local_path.resolve()) for f in readable]
    records, counts, per_line = _parse_all(spark, cat, files, paths, used_layouts, used_chains, redact, raw, splits,
                                           line_hosts)
    line_counts = counts.join(F.broadcast(files.select("file_key", "source")), "file_key").select(
        "source", "lines_read", "bad_utf8_lines", "nul_lines", "longest_line")
    zero = [(f.source, 0, 0, 0, 0) for f in logs if not f.size]
    if zero:
        line_counts = line_counts.unionByName(utc.create_frame(spark, zero, LINE_COUNT_SCHEMA))
    return ParsedLogs(records=records.select(*RECORD_COLUMNS), line_counts=line_counts, detections=detections,
                      release=per_line.unpersist)
