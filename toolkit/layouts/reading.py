"""Reading the bundle's log files on Spark: one table of raw lines for every read plan, and damaged gzips.

Every file is read by the plan of its layout, wrappers and clean-up (:class:`~toolkit.layouts.fields.ReadPlan`);
the plans' lines are one union. Each line carries its file split (``_uri``, ``block_start``) and a row id
that grows with the line inside the split (``monotonically_increasing_id``, taken at the scan): a line's
number is its split's offset plus its row id, the offset coming from the first pass over the text
(:mod:`toolkit.layouts.records`). Both passes read the same union, so they see the same ids.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import unquote

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from toolkit import utc
from toolkit.bundle import Bundle, LogFile
from toolkit.bundle.gzip_logs import damaged_gzips, gzip_is_intact, recover_gzip
from toolkit.layouts.catalogue import Catalogue, carries_line_hosts
from toolkit.layouts.detection import Detection
from toolkit.layouts.fields import LINE_HOST_SETTINGS, ReadPlan, prepared_lines

FILE_TABLE_SCHEMA = ("file_key string, source string, file_host string, tz string, clock_offset_ms long, "
                     "file_date string, date_from string, layout_id string")

def plan_of(detection: Detection) -> ReadPlan:
    """The read plan of a file with this detection."""
    return ReadPlan(detection.layout, tuple(detection.wrappers), frozenset(detection.cleaning))


def local_path(uri: str) -> str:
    """Spark reports ``file:/a%20b``; turn it back into the plain path the bundle knows."""
    return unquote(re.sub(r"^file:(//)?", "", uri))


def file_key(log: LogFile) -> str:
    """How the parse names a file in its tables: its absolute local path."""
    return str(log.local_path.resolve())


def file_table(spark: SparkSession, bundle: Bundle, files: list[LogFile], detections: dict[str, Detection]) -> DataFrame:
    """One row per log file: its key, host settings and detected layout."""
    rows = []
    for f in files:
        settings = bundle.settings_for(f.host)
        # Time-only layouts: the host's date, else the file's modification date in the host zone.
        day, date_from = settings.borrowed_date(f.local_path.stat().st_mtime)
        rows.append((file_key(f), f.source, f.host, settings.timezone, int(settings.clock_offset_ms), day, date_from,
                     detections[f.source].layout))
    return utc.create_frame(spark, rows, FILE_TABLE_SCHEMA)


def line_host_table(spark: SparkSession, bundle: Bundle, files: list[LogFile], detections: dict[str, Detection],
                    cat: Catalogue) -> DataFrame | None:
    """One row per (file whose lines name their host, host with its own ``bundle.toml`` section): the
    settings a line of that file takes when its prefix names that host. None when no file needs one.

    A small table (prefixed files times host sections), looked up per line by a broadcast join: a prefixed
    file often holds every pod of a bundle, and each pod's zone, clock offset and date must apply to its lines.
    """
    rows = [(file_key(f), *settings)
            for f in files if carries_line_hosts(detections[f.source].wrappers, cat)
            for settings in bundle.line_host_settings(f)]
    if not rows:
        return None
    return utc.create_frame(
        spark, rows,
        "file_key string, wrap_host string, _line_tz string, _line_clock_offset_ms long, _line_date string, "
        "_line_date_from string")


def raw_lines(spark: SparkSession, paths: list[str]) -> DataFrame:
    """The text lines of ``paths`` with their split and a row id that grows with the line inside a split.

    Undecodable bytes become U+FFFD (so every later step, and ``records.parquet``, holds valid UTF-8);
    ``_bad_utf8`` marks the lines that had some."""
    # A damaged file must fail the read (it is then recovered), never be skipped in silence.
    raw = spark.read.option("ignoreCorruptFiles", "false").text(paths)
    valid = F.is_valid_utf8("value")
    return raw.select(
        F.when(valid, F.col("value")).otherwise(F.make_valid_utf8("value")).alias("value"),
        (~valid).alias("_bad_utf8"),
        *_position(),
    )


def _position() -> list:
    return [F.col("_metadata.file_path").alias("_uri"), F.col("_metadata.file_block_start").alias("block_start"),
            F.monotonically_increasing_id().alias("_row_id")]


def known_lines(spark: SparkSession, paths: list[str], splits: DataFrame) -> DataFrame:
    """:func:`raw_lines` read again with what the first pass learnt of each split (``splits``: ``_uri``,
    ``block_start``, ``file_key``, ``_line_offset`` and ``_bad_split``): each line's ``file_key`` and ``line_no``;
    only the lines of a split that held undecodable bytes are checked for them again."""
    raw = spark.read.option("ignoreCorruptFiles", "false").text(paths).select("value", *_position())
    lines = raw.join(F.broadcast(splits), ["_uri", "block_start"])
    return lines.select(
        F.when(F.col("_bad_split"), F.make_valid_utf8("value")).otherwise(F.col("value")).alias("value"),
        F.lit(False).alias("_bad_utf8"), "_uri", "block_start", "_row_id", "file_key",
        (F.col("_row_id") + F.col("_line_offset")).alias("line_no"),
    )


#: The file settings a line's fields read, as typed nulls (a pass that needs no time leaves them out).
_NO_SETTINGS = {"file_key": "string", "source": "string", "file_host": "string", "tz": "string",
                "clock_offset_ms": "long", "file_date": "string", "date_from": "string", "layout_id": "string"}

#: A split of more than this many lines (a whole ``.gz`` is one) has its lines spread over several tasks for
#: the per-line parse, instead of one task parsing the whole file.
SPREAD_SPLIT_LINES = 2_000_000
#: Lines per task when a split's lines are spread.
SPREAD_TASK_LINES = 1_000_000


def plans_of(files: list[LogFile], detections: dict[str, Detection]) -> dict[ReadPlan, list[LogFile]]:
    """The files of each read plan, plans in a stable order (both passes must build the same union)."""
    plans: dict[ReadPlan, list[LogFile]] = {}
    for f in files:
        plans.setdefault(plan_of(detections[f.source]), []).append(f)
    return dict(sorted(plans.items(), key=lambda item: item[0].id))


def read_lines(spark: SparkSession, plans: dict[ReadPlan, list[LogFile]], cat: Catalogue, *,
               splits: DataFrame | None = None, settings: DataFrame | None = None,
               line_hosts: DataFrame | None = None, spread: bool = False) -> dict[ReadPlan, DataFrame]:
    """Every line of the plans' files, prepared (:func:`~toolkit.layouts.fields.prepared_lines`: its text without
    clean-up and wrappers), one read per plan (lazy: nothing is read yet).

    Without ``splits`` the lines carry their split and row id only (the first pass). With ``splits`` (per
    split: ``_uri``, ``block_start``, ``file_key``, ``_line_offset``, ``_bad_split``) each line gets its
    ``file_key`` and ``line_no`` (:func:`known_lines`), and with ``settings`` (:func:`file_table`) its file's settings, so its time can be read;
    ``line_hosts`` (:func:`line_host_table`) gives lines that name their host that host's settings. ``spread``:
    a split is large, its lines are spread over several tasks before they are parsed.
    """
    out = {}
    for plan, members in plans.items():
        paths = [file_key(f) for f in members]
        lines = raw_lines(spark, paths)
        if splits is not None:
            lines = known_lines(spark, paths, splits)
            if spread:
                # The ids were taken in the scan, before this shuffle: numbering is unchanged by it.
                lines = lines.repartition("file_key", F.floor(F.col("line_no") / F.lit(SPREAD_TASK_LINES)))
        if settings is not None:
            lines = lines.join(F.broadcast(settings), "file_key")
        else:
            lines = lines.withColumns({name: F.lit(None).cast(kind) for name, kind in _NO_SETTINGS.items()
                                       if name not in lines.columns})
        hosts = line_hosts if line_hosts is not None and carries_line_hosts(plan.wrappers, cat) else None
        out[plan] = prepared_lines(lines, plan, cat, hosts)
    return out


def union_all(tables: list[DataFrame]) -> DataFrame:
    """One table of several with the same columns."""
    table = tables[0]
    for part in tables[1:]:
        table = table.unionByName(part)
    return table


def read_splits(spark: SparkSession, bundle: Bundle, logs: list[LogFile],
                first_pass: Callable[[list[LogFile]], object]) -> tuple[list[LogFile], object]:
    """Run ``first_pass`` (the first job over the logs' text); a gzip that turns out damaged is recovered on the
    driver and the pass runs again.

    Spark decompresses ``.gz`` logs itself; a truncated or corrupt one fails the job. The damaged file is then
    the one the error names, or else found by checking every gzip log by streaming (only in this case); it is
    replaced by what :func:`~toolkit.bundle.gzip_logs.recover_gzip` keeps (with its problem row, in
    ``bundle.logs`` too). Returns the logs as read and what the pass returned.
    """
    while True:
        try:
            return logs, first_pass(logs)
        except Exception as exc:  # Py4JJavaError, or a Spark Connect error: both name the file
            damaged = _damaged_named_by(exc, logs, bundle)
            if not damaged:
                raise
            logs = _replace_recovered(bundle, logs, damaged)
            if not logs:
                return logs, None


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


__all__ = ["FILE_TABLE_SCHEMA", "LINE_HOST_SETTINGS", "SPREAD_SPLIT_LINES", "SPREAD_TASK_LINES", "file_key", "file_table",
           "line_host_table", "local_path", "plan_of", "plans_of", "raw_lines", "read_lines", "read_splits", "union_all"]
