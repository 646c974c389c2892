"""Each process run's first and last line among all records (:func:`run_bounds`), in one cheap pass.

:func:`toolkit.events.runs.run_bounds` numbers every record with :func:`~toolkit.events.runs.tag_runs`,
whose window functions sort all records of a host: minutes on a gigabyte bundle. The numbering only
changes near start markers, so this module numbers exactly the records that can be affected and
aggregates the rest by the second:

1. *Markers* (config dump, version banners, CREATED transition, NiFi start) are found with a cheap
   literal prefilter, then the same regular expressions ``tag_runs`` uses.
2. Around every marker, a *window* from ``STARTUP_BURST_SECONDS`` before it to just after it holds every
   record whose run can be decided by the lines near a start (start-up lines on the ``main`` thread,
   the burst after a silence). The windows' records and the markers go through ``tag_runs`` itself.
3. Every other record lies in no window, so no start is within ``STARTUP_BURST_SECONDS`` after it and
   none in its own second: its run is the last run that started before its second. Those records are
   aggregated per host and second (a hash aggregate, no sort), and each second takes that run.

The result equals :func:`toolkit.events.runs.run_bounds` row for row (a test compares them). Records
without a timestamp are ordered by the last timestamp before them in their file, which needs the sort
this module avoids: when a host has any, the exact per-record numbering runs instead.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from toolkit.catalogue.gate import RUN_MARKER_HEADS
from toolkit.events import runs as exact
from toolkit.events.runs import BOUNDS_COLUMNS, STARTUP_BURST_SECONDS, tag_runs
from toolkit.schemas import CANDIDATE_COLUMN
from toolkit.spark import computed_once

#: Seconds kept on either side of a marker's window (``tag_runs`` compares times in fractions of seconds).
WINDOW_MARGIN_S = 2


def _is_marker(message: Column) -> Column:
    head = None
    # A record that starts with none of the markers' literal heads cannot be one: the regexes run on these only.
    for literal in RUN_MARKER_HEADS:
        test = message.startswith(literal)
        head = test if head is None else head | test
    body = F.regexp_replace(message, r"^(?:stream-client \[[^\]]*\] ?)", "")
    return head & (message.rlike(exact._STRONG_START) | body.rlike(exact._WEAK_START))


def _not_bootstrap(logger: Column) -> Column:
    """Not one of NiFi's bootstrap loggers (``runs.NIFI_BOOTSTRAP_LOGGER`` as two literal heads)."""
    return ~F.coalesce(logger.startswith("org.apache.nifi.bootstrap.") | logger.startswith("o.a.n.b."), F.lit(False))


def run_bounds(records: DataFrame, held: list[DataFrame] | None = None) -> DataFrame:
    """Per host and process run, its first and last line of any kind: the same table as
    :func:`toolkit.events.runs.run_bounds`, computed without sorting every record of a host.

    With ``held``, the two intermediate tables every part of the result reads (the records near a start,
    and every other record aggregated per second) are computed now, kept, and added to ``held``: the
    caller ``unpersist``s them once the result is written."""
    parsed = (F.col("layout").isNull() | (F.col("layout") != "unparsed")) if "layout" in records.columns else F.lit(True)
    if "logger" in records.columns:
        parsed = parsed & _not_bootstrap(F.col("logger"))
    keep = [c for c in ("host", "source", "line_no", "ts", "thread", "message") if c in records.columns]
    rows = records.where(F.col("host").isNotNull() & parsed)
    base = rows.select(*keep)
    if base.where(F.col("ts").isNull()).limit(1).count():
        # Ordering by the file's last timestamp needs the full sort.
        return exact.run_bounds(records)

    second = F.floor(F.unix_micros("ts") / 1_000_000).cast("long")
    # Every marker is a candidate (its head is one of the gate's): records.parquet's other partition is not read.
    marker_rows = rows.where(F.col(CANDIDATE_COLUMN)) if CANDIDATE_COLUMN in records.columns else rows
    markers = marker_rows.select(*keep).where(F.coalesce(_is_marker(F.col("message")), F.lit(False)))
    # Every second of every window, per host: a small table, broadcast to the pass over all records.
    window_seconds = markers.select(
        "host", F.explode(F.sequence(second - (STARTUP_BURST_SECONDS + WINDOW_MARGIN_S), second + WINDOW_MARGIN_S))
        .alias("_second")).distinct().withColumn("_in_window", F.lit(True))
    flagged = base.withColumn("_second", second).join(F.broadcast(window_seconds), ["host", "_second"], "left")
    in_window = F.coalesce(F.col("_in_window"), F.lit(False))

    # Records near a start, numbered by tag_runs itself (all markers are among them). This table and the
    # per-second one below are read by several parts of the result; left lazy, each part planned them again
    # from the records (on 0.25 GB, 18 scans of the records and twice the time).
    near = computed_once(tag_runs(flagged.where(in_window).drop("_second", "_in_window")), held)
    near_runs = near.groupBy("host", "run_no").agg(*_extremes())
    # The first second of each run: a record elsewhere belongs to the last run started before its second.
    starts = near.groupBy("host", "run_no").agg(F.min("ts").alias("_start")).where(F.col("run_no") > 0)

    # Everything else, aggregated per host and second (no sort), then given the run that covers the second.
    seconds = computed_once(flagged.where(~in_window).groupBy("host", "_second").agg(*_extremes()), held)
    runs_before = seconds.join(F.broadcast(starts), "host", "left").where(
        F.col("_start").isNull() | (F.unix_micros("_start") < F.col("_second") * 1_000_000))
    run_of_second = runs_before.groupBy("host", "_second").agg(F.coalesce(F.max("run_no"), F.lit(0)).alias("run_no"))
    far_runs = seconds.join(run_of_second, ["host", "_second"]).drop("_second")

    both = near_runs.unionByName(far_runs.select(*near_runs.columns))
    per_run = both.groupBy("host", "run_no").agg(
        F.min("_first").alias("_first"), F.max("_last").alias("_last"), F.sum("lines").alias("lines"))
    out = per_run.select(
        "host", "run_no", F.concat_ws("#", F.col("host"), F.col("run_no").cast("string")).alias("run_id"),
        F.col("_first.ts").alias("first_ts"), F.col("_first.source").alias("first_source"),
        F.col("_last.ts").alias("last_ts"), F.col("_last.source").alias("last_source"),
        F.col("_last.line_no").alias("last_line_no"), "lines")
    # The text of each run's last line: one small lookup instead of carrying every message through the aggregates.
    last_lines = base.join(F.broadcast(out.select("host", F.col("last_source").alias("source"),
                                                  F.col("last_line_no").alias("line_no"))), ["host", "source", "line_no"])
    out = out.join(last_lines.select("host", F.col("source").alias("last_source"), F.col("line_no").alias("last_line_no"),
                                     F.substring_index("message", "\n", 1).alias("last_text")),
                   ["host", "last_source", "last_line_no"], "left")
    file_end = base.groupBy("host", F.col("source").alias("last_source")).agg(F.max("line_no").alias("_file_last"))
    out = out.join(file_end, ["host", "last_source"], "left")
    return out.withColumn("last_of_file", F.col("last_line_no") == F.col("_file_last")).drop("_file_last") \
        .select(*BOUNDS_COLUMNS)


def _extremes() -> list[Column]:
    """Partial aggregates that combine into a run's bounds (min of mins, max of maxes, sum of counts)."""
    return [
        F.min(F.struct("ts", "line_no", "source")).alias("_first"),
        F.max(F.struct("ts", "line_no", "source")).alias("_last"),
        F.count(F.lit(1)).alias("lines"),
    ]
