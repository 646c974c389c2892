"""Timeline tables -> bounded pandas frames -> Altair charts.

Two halves, kept apart on purpose:

* ``*_frame(timeline, ...)`` helpers run a small Spark aggregation or a ``limit``-ed selection and
  return a **bounded** pandas frame (never raw lines). Each row that rests on a log line carries
  ``evidence`` (``source:line_no  text``) so a tooltip shows the exact line.
* ``*_chart(frame, ...)`` functions take those frames and return Altair charts. They never touch
  Spark, so they are unit-tested on small hand-made frames.

Times: Spark hands back naive UTC timestamps (the session time zone is UTC). Charts show wall-clock
time in a chosen zone (``tz``) on a ``utc`` scale, so the rendering machine's own zone never shifts
them (vl-convert and browsers otherwise parse naive ISO strings as local time).

Frames above :data:`MAX_CHART_ROWS` are aggregated per lane and time bucket before drawing instead
of hitting Altair's max-rows error.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Iterable, Sequence

import altair as alt
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from toolkit import utc

#: Altair refuses to embed more than 5000 rows by default; stay under it by aggregating.
MAX_CHART_ROWS = 4000
#: Default row limit of the frame helpers (per frame).
DEFAULT_LIMIT = 2000
#: Row limit of the process-run frame (a run is one start and one end per host).
PROCESS_RUN_LIMIT = 500
#: Evidence text is cut to this many characters in tooltips and tables.
EVIDENCE_CHARS = 220

CHART_WIDTH = 760

TimeWindow = tuple[datetime | str | None, datetime | str | None] | None

# Colours that mean the same thing in every chart.
CATEGORY_COLOURS = {
    "phase": "#9ecae1",
    "restore": "#74c476",
    "lock": "#fd8d3c",
    "lock-failed": "#d62728",
    "checkpoint": "#6a51a3",
    "checkpoint-file": "#bcbddc",
    "wipe": "#000000",
    "cleanup": "#8c564b",
    "process": "#636363",
    "crash": "#d62728",
    "finding": "#e7298a",
}
#: Legend symbols of the same categories (bars show as squares).
CATEGORY_SHAPES = {"phase": "square", "restore": "square", "lock": "circle", "lock-failed": "triangle-down",
                   "checkpoint": "diamond", "checkpoint-file": "diamond", "wipe": "cross", "cleanup": "square",
                   "process": "triangle-right", "crash": "triangle-up", "finding": "cross"}


# --------------------------------------------------------------------------------------------
# Spark side: bounded frames
# --------------------------------------------------------------------------------------------

def _filter(df: DataFrame, hosts: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
            window: TimeWindow = None, time_cols: Sequence[str] = ("ts",)) -> DataFrame:
    """Restrict a timeline table to hosts, tasks and a time window (columns it lacks are ignored)."""
    if hosts and "host" in df.columns:
        df = df.where(F.col("host").isin(list(hosts)))
    if tasks and "task_id" in df.columns:
        df = df.where(F.col("task_id").isin(list(tasks)))
    if window and any(window):
        start, end = window
        cols = [c for c in time_cols if c in df.columns]
        if cols:
            t0 = utc.lit(start) if start else None
            t1 = utc.lit(end) if end else None
            # An interval overlaps the window when it starts before its end and ends after its start.
            first, last = F.col(cols[0]), F.coalesce(*[F.col(c) for c in cols[::-1]])
            cond = F.lit(True)
            if t1 is not None:
                cond = cond & (first.isNull() | (first <= t1))
            if t0 is not None:
                cond = cond & (last.isNull() | (last >= t0))
            df = df.where(cond)
    return df


def _evidence_text(tl, rows: DataFrame) -> DataFrame:
    """Add ``text`` (the logged message of each row's ``source``/``line_no``) to an already small frame."""
    lines = tl.events.select("source", "line_no", F.col("message").alias("text"))
    keys = rows.select("source", "line_no").where(F.col("line_no").isNotNull()).distinct()
    # Semi-join first so only the cited lines travel, then a broadcast join back onto the rows.
    cited = lines.join(F.broadcast(keys), ["source", "line_no"], "left_semi")
    return rows.join(cited, ["source", "line_no"], "left")


def _to_pandas(df: DataFrame, limit: int, order: Sequence[str | Column]) -> pd.DataFrame:
    """Bounded collection: order then limit on Spark, never the whole table."""
    return utc.to_pandas(df.orderBy(*order).limit(limit))


def _finish(pdf: pd.DataFrame) -> pd.DataFrame:
    """Add the ``evidence`` column shown in tooltips and evidence tables."""
    if pdf.empty:
        pdf["evidence"] = pd.Series(dtype="object")
        return pdf
    src = pdf["source"].fillna("") if "source" in pdf else pd.Series("", index=pdf.index)
    line = pdf["line_no"] if "line_no" in pdf else pd.Series(None, index=pdf.index)
    text = pdf["text"].fillna("") if "text" in pdf else pd.Series("", index=pdf.index)
    where = [f"{s}:{int(n)}" if pd.notna(n) else s for s, n in zip(src, line)]
    pdf["evidence"] = [f"{w}  {t}".strip()[:EVIDENCE_CHARS] for w, t in zip(where, text)]
    return pdf


def thread_state_frame(tl, hosts: Sequence[str] | None = None, window: TimeWindow = None,
                       limit: int = DEFAULT_LIMIT) -> pd.DataFrame:
    """Thread and client state intervals: host, lane (thread), state, start, end, evidence."""
    threads = tl.thread_states.withColumn("lane_kind", F.lit("thread"))
    clients = tl.client_states.withColumn("lane_kind", F.lit("client"))
    df = _filter(threads.unionByName(clients), hosts=hosts, window=window, time_cols=("start", "end"))
    df = df.select("host", "lane_kind", "thread", "state", "from_state", "start", "end", "source", "line_no")
    pdf = _to_pandas(_evidence_text(tl, df), limit, ["host", "thread", "start"])
    return _finish(pdf)


def generation_frame(tl, hosts: Sequence[str] | None = None, window: TimeWindow = None,
                     limit: int = 500) -> pd.DataFrame:
    """One band per consumer-group generation: first join to last sync across members."""
    df = _filter(tl.generations, hosts=hosts, window=window, time_cols=("joined",))
    first = F.coalesce("joined", "synced")
    agg = (df.groupBy("group_id", "generation")
           .agg(F.min(first).alias("start"),
                F.max(F.coalesce("synced", "joined")).alias("end"),
                F.countDistinct("host").alias("hosts"),
                F.max("members").alias("members"),
                # The first member's join line stands for the generation in tooltips.
                F.min_by("source", first).alias("source"), F.min_by("line_no", first).alias("line_no")))
    return _finish(_to_pandas(_evidence_text(tl, agg), limit, ["start"]))


def process_run_frame(tl, hosts: Sequence[str] | None = None, window: TimeWindow = None,
                      limit: int = PROCESS_RUN_LIMIT) -> pd.DataFrame:
    """Process runs per host with how they ended (crash / clean / error / unknown)."""
    df = _filter(tl.process_runs, hosts=hosts, window=window, time_cols=("start", "end"))
    df = df.select("host", "run_id", "run_no", "product", "version", "guarantee", "start", "end", "end_kind",
                   "end_evidence", "end_source", "end_line_no", "source", "line_no")
    pdf = _to_pandas(_evidence_text(tl, df), limit, ["host", "start"])
    pdf = _finish(pdf)
    if not pdf.empty:
        pdf["end_evidence_line"] = [
            f"{s}:{int(n)}  {t or ''}".strip()[:EVIDENCE_CHARS] if pd.notna(n) else (t or "")
            for s, n, t in zip(pdf["end_source"], pdf["end_line_no"], pdf["end_evidence"])
        ]
    return pdf


def task_event_frame(tl, tasks: Sequence[str] | None = None, hosts: Sequence[str] | None = None,
                     window: TimeWindow = None, limit: int = DEFAULT_LIMIT) -> pd.DataFrame:
    """Everything that happened to each task on each host, one row per interval or point.

    Columns: host, task_id, lane (``task @ host``), category, label, start, end (null for points),
    role, offset, source, line_no, text, evidence. Categories: phase, restore, lock, lock-failed,
    checkpoint, checkpoint-file, wipe, cleanup, process (starts and stops of the host's process,
    repeated on each of its task lanes so crash and restart sit in order with the task's events).
    """
    s = F.col
    null_ts, null_str, null_long = (F.lit(None).cast(t) for t in ("timestamp_ltz", "string", "long"))

    def part(df: DataFrame, category: Column, label: Column, start: Column, end: Column,
             role: Column = null_str, offset: Column = null_long) -> DataFrame:
        return df.select(s("host"), s("task_id"), category.alias("category"), label.alias("label"),
                         start.alias("start"), end.alias("end"), role.alias("role"), offset.alias("offset"),
                         s("source"), s("line_no"))

    lc = tl.task_lifecycles
    lk = tl.locks
    cp = tl.checkpoints
    rs = tl.restorations
    parts = [
        part(lc, F.lit("phase"), s("phase"), s("start"), s("end"), s("role")),
        part(lk, F.when(s("kind") == "failed", "lock-failed").otherwise("lock"),
             F.concat_ws(" ", F.lit("lock"), s("kind"), F.concat(F.lit("by "), s("thread")),
                         F.when(s("holder_thread").isNotNull(), F.concat(F.lit("(held by "), s("holder_thread"),
                                                                         F.lit(")")))),
             s("ts"), null_ts, s("role")),
        # A capture's checkpoint file is dated by its mtime: that is when it was written.
        part(cp, F.when(s("kind") == "file", "checkpoint-file").otherwise("checkpoint"),
             F.concat_ws(" ", F.lit("checkpoint"), s("kind"), s("offset").cast("string"),
                         F.concat(s("topic"), F.lit("-"), s("partition").cast("string"))),
             F.coalesce(s("ts"), s("file_mtime")), null_ts, offset=s("offset")),
        part(rs, F.lit("restore"),
             F.concat_ws(" ", F.lit("restore"), s("start_offset").cast("string"), F.lit("→"),
                         s("end_offset").cast("string"),
                         F.when(s("from_scratch"), F.lit("(from scratch)")),
                         F.when(~s("completed"), F.lit("(incomplete)"))),
             s("start"), s("end"), offset=s("end_offset")),
        part(tl.wipes, F.lit("wipe"), F.concat_ws(" ", F.lit("state wiped:"), s("reason")), s("ts"), null_ts),
        part(tl.dir_cleanups, F.lit("cleanup"),
             F.concat_ws(" ", F.lit("cleaner deleted dir; last owner"), s("last_owner_thread"), s("last_owner_role")),
             s("ts"), null_ts),
    ]
    events = _filter(functools.reduce(DataFrame.unionByName, parts), hosts=hosts, tasks=tasks, window=window,
                     time_cols=("start", "end"))
    events = events.where(s("task_id").isNotNull())

    # Process starts and ends on each lane's host, so a crash is visible between task events.
    lanes = events.select("host", "task_id").distinct()
    runs = tl.process_runs
    starts = runs.select("host", F.lit("process").alias("category"),
                         F.concat_ws(" ", F.lit("process start, run"), s("run_no").cast("string")).alias("label"),
                         s("start").alias("start"), "source", "line_no")
    ends = runs.where(s("end").isNotNull()).select(
        "host", F.when(s("end_kind") == "crash", "crash").otherwise("process").alias("category"),
        F.concat_ws(" ", F.lit("process end:"), s("end_kind")).alias("label"), s("end").alias("start"),
        s("end_source").alias("source"), s("end_line_no").alias("line_no"))
    procs = _filter(starts.unionByName(ends), window=window, time_cols=("start",))
    procs = procs.join(F.broadcast(lanes), "host").select(
        "host", "task_id", "category", "label", "start", null_ts.alias("end"), null_str.alias("role"),
        null_long.alias("offset"), "source", "line_no")
    allrows = events.unionByName(procs).where(s("start").isNotNull())
    pdf = _to_pandas(_evidence_text(tl, allrows), limit, ["task_id", "host", "start"])
    pdf = _finish(pdf)
    pdf["lane"] = pdf["task_id"].astype(str) + " @ " + pdf["host"].astype(str) if not pdf.empty else []
    return pdf


def offset_frame(tl, tasks: Sequence[str] | None = None, hosts: Sequence[str] | None = None,
                 limit: int = DEFAULT_LIMIT) -> pd.DataFrame:
    """Offsets over time per changelog partition: checkpoint offsets and restore start/end offsets.

    Columns: host, task_id, changelog (``topic-partition``), ts, offset, kind (``checkpoint <kind>``,
    ``restore start``, ``restore end``), restore_id (pairs a restoration's start and end), target_offset (on a
    restore start: the end offset it restores to, when its start line says), evidence.
    """
    s = F.col
    no_target = F.lit(None).cast("long").alias("target_offset")
    cp = (tl.checkpoints.where(s("offset").isNotNull())
          .select("host", "task_id", "topic", "partition", F.coalesce("ts", "file_mtime").alias("ts"), "offset",
                  F.concat(F.lit("checkpoint "), s("kind")).alias("kind"), F.lit(None).cast("string").alias("restore_id"),
                  no_target, "source", "line_no"))
    rs = tl.restorations.withColumn(
        "restore_id", F.concat_ws("/", "host", "task_id", "topic", s("partition").cast("string"),
                                  s("start").cast("string")))
    rs_start = rs.select("host", "task_id", "topic", "partition", s("start").alias("ts"),
                         s("start_offset").alias("offset"), F.lit("restore start").alias("kind"), "restore_id",
                         s("end_offset").alias("target_offset"),
                         F.coalesce("start_source", "source").alias("source"),
                         F.coalesce("start_line_no", "line_no").alias("line_no"))
    rs_end = rs.select("host", "task_id", "topic", "partition", s("end").alias("ts"), s("end_offset").alias("offset"),
                       F.lit("restore end").alias("kind"), "restore_id", no_target, "source", "line_no")
    df = _filter(cp.unionByName(rs_start).unionByName(rs_end), hosts=hosts, tasks=tasks)
    df = df.where(s("ts").isNotNull() & s("offset").isNotNull())
    pdf = _finish(_to_pandas(_evidence_text(tl, df), limit, ["task_id", "ts"]))
    if not pdf.empty:
        pdf["changelog"] = pdf["topic"].astype(str) + "-" + pdf["partition"].astype("Int64").astype(str)
    else:
        pdf["changelog"] = pd.Series(dtype="object")
    return pdf


class ScopedFrames:
    """The frames a report draws for one scope (``hosts``, ``tasks``, ``window``) of a timeline, each
    queried once.

    A report draws the same tasks several times: once for the whole scope, then once per finding,
    whose tasks and hosts are a part of it. When the scope's frame is complete (under its row limit),
    a narrower one is cut from it in pandas, which gives the rows the narrower query would (the task
    and host filters are plain membership tests); otherwise the narrower frame is queried on Spark."""

    def __init__(self, tl, hosts: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
                 window: TimeWindow = None):
        self.timeline = tl
        self.hosts = list(hosts) if hosts else None
        self.tasks = list(tasks) if tasks else None
        self.window = window
        self._whole: dict[str, pd.DataFrame] = {}

    def task_events(self, tasks: Sequence[str] | None = None, hosts: Sequence[str] | None = None) -> pd.DataFrame:
        """:func:`task_event_frame` of ``tasks`` on ``hosts`` (default: the scope's), within the scope's window."""
        return self._frame("task_events", task_event_frame, DEFAULT_LIMIT, tasks, hosts, by_task=True,
                           window=self.window)

    def offsets(self, tasks: Sequence[str] | None = None, hosts: Sequence[str] | None = None) -> pd.DataFrame:
        """:func:`offset_frame` of ``tasks`` on ``hosts`` (default: the scope's)."""
        return self._frame("offsets", offset_frame, DEFAULT_LIMIT, tasks, hosts, by_task=True)

    def process_runs(self, hosts: Sequence[str] | None = None) -> pd.DataFrame:
        """:func:`process_run_frame` of ``hosts`` (default: the scope's), over the whole log."""
        return self._frame("process_runs", process_run_frame, PROCESS_RUN_LIMIT, None, hosts, by_task=False)

    def _frame(self, name: str, query: Callable[..., pd.DataFrame], limit: int, tasks: Sequence[str] | None,
               hosts: Sequence[str] | None, *, by_task: bool, **scope) -> pd.DataFrame:
        """``query``'s frame (its rows have a ``task_id`` and it takes ``tasks`` when ``by_task``)."""
        whole = self._whole.get(name)
        if whole is None:
            kwargs = {"tasks": self.tasks} if by_task else {}
            whole = self._whole[name] = query(self.timeline, hosts=self.hosts, limit=limit, **kwargs, **scope)
        tasks = list(tasks) if tasks else self.tasks
        hosts = list(hosts) if hosts else self.hosts
        if tasks == self.tasks and hosts == self.hosts:
            return whole.copy()
        if len(whole) < limit and _within(tasks, self.tasks) and _within(hosts, self.hosts):
            cut = whole
            if tasks and by_task:
                cut = cut[cut["task_id"].isin(tasks)]
            if hosts:
                cut = cut[cut["host"].isin(hosts)]
            return cut.reset_index(drop=True)
        kwargs = {"tasks": tasks} if by_task else {}
        return query(self.timeline, hosts=hosts, limit=limit, **kwargs, **scope)


def _within(part: Sequence[str] | None, scope: Sequence[str] | None) -> bool:
    """True when every row of ``part`` is also in ``scope`` (None: everything)."""
    return scope is None or (part is not None and set(part) <= set(scope))


def rebalance_frame(tl, hosts: Sequence[str] | None = None, window: TimeWindow = None,
                    bucket_seconds: int | None = None, limit: int = DEFAULT_LIMIT) -> pd.DataFrame:
    """Joins per host and time bucket with the highest generation reached (rebalance activity)."""
    df = _filter(tl.generations, hosts=hosts, window=window, time_cols=("joined",))
    df = df.where(F.col("joined").isNotNull())
    bucket = bucket_seconds or _bucket_for(df, "joined")
    agg = (df.groupBy("host", F.window("joined", f"{bucket} seconds").start.alias("bucket"))
           .agg(F.count(F.lit(1)).alias("joins"), F.max("generation").alias("generation"),
                F.min("generation").alias("first_generation"),
                F.min_by("source", "joined").alias("source"), F.min_by("line_no", "joined").alias("line_no")))
    pdf = _finish(_to_pandas(_evidence_text(tl, agg), limit, ["bucket", "host"]))
    pdf["bucket_seconds"] = bucket
    return pdf


def migration_frame(tl, limit: int = DEFAULT_LIMIT) -> pd.DataFrame:
    """NiFi checkpoint-table migration steps per table (logs and CloudTrail), with evidence."""
    df = tl.migration_steps.select("table", "base_table", "ts", "step", "origin", "host", "error_code", "detail",
                                   "source", "line_no")
    pdf = _finish(_to_pandas(_evidence_text(tl, df), limit, ["base_table", "ts"]))
    if not pdf.empty:
        # CloudTrail rows have no line number; their detail is the best evidence text.
        pdf["evidence"] = [e if pd.notna(n) else f"{s or ''}  {d or ''}".strip()[:EVIDENCE_CHARS]
                           for e, n, s, d in zip(pdf["evidence"], pdf["line_no"], pdf["source"], pdf["detail"])]
    return pdf


def ingest_frame(records: DataFrame, hosts: Sequence[str] | None = None, bucket_seconds: int | None = None,
                 limit: int = DEFAULT_LIMIT) -> pd.DataFrame:
    """Lines per host, time bucket and level; ``unparsed`` is its own level (its share is what matters)."""
    df = records
    if hosts:
        df = df.where(F.col("host").isin(list(hosts)))
    level = F.when(F.col("layout") == "unparsed", F.lit("unparsed")).otherwise(F.coalesce("level", F.lit("?")))
    lines = F.coalesce(F.col("line_count"), F.lit(1)) if "line_count" in df.columns else F.lit(1)
    df = df.select("host", "ts", level.alias("level"), lines.alias("lines"), "source", "line_no",
                   F.substring("message", 1, EVIDENCE_CHARS).alias("text"))
    bucket = bucket_seconds or _bucket_for(df.where(F.col("ts").isNotNull()), "ts")
    # Records without a timestamp still count: they go to a bucket at the host's first time.
    order = F.struct("source", "line_no")
    agg = (df.groupBy("host", F.window(F.coalesce("ts", F.lit("1970-01-01").cast("timestamp_ltz")),
                                       f"{bucket} seconds").start.alias("bucket"), "level")
           .agg(F.sum("lines").alias("lines"), F.min_by("source", order).alias("source"),
                F.min_by("line_no", order).alias("line_no"), F.min_by("text", order).alias("text")))
    pdf = _finish(_to_pandas(agg, limit, ["bucket", "host", "level"]))
    pdf["bucket_seconds"] = bucket
    return pdf


def _bucket_for(df: DataFrame, col: str, target_buckets: int = 120) -> int:
    """A round bucket size (seconds) giving about ``target_buckets`` buckets over the column's span."""
    row = utc.first(df.agg(F.min(col).alias("a"), F.max(col).alias("b")))
    if row is None or row["a"] is None:
        return 60
    span = max((row["b"] - row["a"]).total_seconds(), 1.0)
    for size in (1, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400):
        if span / size <= target_buckets:
            return size
    return 86400


def finding_frame(findings: Iterable) -> pd.DataFrame:
    """One marker row per finding and (host, task) it names; works on ``Finding`` objects or dicts."""
    rows = []
    for rank, f in enumerate(findings, 1):
        get = (lambda k, f=f: f.get(k)) if isinstance(f, dict) else (lambda k, f=f: getattr(f, k, None))
        hosts = list(get("hosts") or []) or [None]
        tasks = list(get("tasks") or []) or [None]
        evidence = list(get("evidence") or [])
        first = evidence[0] if evidence else None
        ev_get = (lambda k: first.get(k)) if isinstance(first, dict) else (lambda k: getattr(first, k, None))
        ev_text = f"{ev_get('source')}:{ev_get('line_no')}  {ev_get('text') or ''}" if first is not None else ""
        for h in hosts:
            for t in tasks:
                rows.append({"rank": rank, "detector": get("detector"), "severity": get("severity"),
                             "confidence": get("confidence"), "title": get("title"), "host": h, "task_id": t,
                             "ts": pd.to_datetime(get("ts")) if get("ts") is not None else pd.NaT,
                             "evidence": ev_text[:EVIDENCE_CHARS]})
    cols = ["rank", "detector", "severity", "confidence", "title", "host", "task_id", "ts", "evidence"]
    return pd.DataFrame(rows, columns=cols)


# --------------------------------------------------------------------------------------------
# The incident window: where the charts open
# --------------------------------------------------------------------------------------------

#: Context kept on each side of the incident, as a share of its span, and at least this much.
FOCUS_MARGIN = 0.12
FOCUS_MIN_MARGIN = pd.Timedelta(seconds=20)


def _ts(value) -> pd.Timestamp | None:
    if value is None:
        return None
    ts = pd.to_datetime(value, errors="coerce")
    if pd.isna(ts):
        return None
    if ts.tzinfo is not None:
        ts = ts.tz_convert("UTC").tz_localize(None)
    return ts


def _pad(times: Sequence[pd.Timestamp]) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    times = sorted(t for t in times if t is not None)
    if not times:
        return None
    start, end = times[0], times[-1]
    margin = max((end - start) * FOCUS_MARGIN, FOCUS_MIN_MARGIN)
    return start - margin, end + margin


#: Quiet stretches longer than this (and than a share of the whole span) break the time axis.
FOCUS_BREAK = pd.Timedelta(minutes=3)
FOCUS_BREAK_SHARE = 0.15
#: At most this many panels side by side.
MAX_FOCUS_RANGES = 3


def _evidence_times(finding) -> list[pd.Timestamp]:
    get = finding.get if isinstance(finding, dict) else (lambda k: getattr(finding, k, None))
    times = [_ts(get("ts"))]
    for e in get("evidence") or []:
        times.append(_ts(e.get("ts") if isinstance(e, dict) else getattr(e, "ts", None)))
    return [t for t in times if t is not None]


def _clusters(times: Sequence[pd.Timestamp]) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """Group moments separated by long quiet stretches; each group padded with context."""
    times = sorted(set(times))
    if not times:
        return []
    span = times[-1] - times[0]
    cut = max(FOCUS_BREAK, span * FOCUS_BREAK_SHARE)
    groups = [[times[0]]]
    for t in times[1:]:
        if t - groups[-1][-1] > cut:
            groups.append([t])
        else:
            groups[-1].append(t)
    while len(groups) > MAX_FOCUS_RANGES:
        # Merge the two neighbours with the shortest quiet stretch between them.
        i = min(range(len(groups) - 1), key=lambda k: groups[k + 1][0] - groups[k][-1])
        groups[i:i + 2] = [groups[i] + groups[i + 1]]
    return [r for r in (_pad(g) for g in groups) if r]


def finding_window(finding) -> list[tuple[pd.Timestamp, pd.Timestamp]] | None:
    """The time ranges of one finding: its time and its evidence lines, with context on both sides
    (several ranges when long quiet stretches separate them)."""
    return _clusters(_evidence_times(finding)) or None


def incident_window(findings: Iterable, runs: pd.DataFrame | None = None,
                    ) -> list[tuple[pd.Timestamp, pd.Timestamp]] | None:
    """Where the charts open: the findings (their times and evidence) and the process crashes and
    stops near them, with context on both sides, as one range or a few (a broken axis) when long
    quiet stretches separate them. Naive UTC times; None when there is nothing to focus on (the
    charts then show the whole log)."""
    times: list[pd.Timestamp] = []
    for f in findings or []:
        times += _evidence_times(f)
    if runs is not None and not runs.empty and "end" in runs:
        ended = runs[runs["end"].notna() & runs.get("end_kind", pd.Series("", index=runs.index))
                     .isin(["crash", "error", "clean"])]
        ends = [t for t in (_ts(v) for v in ended["end"]) if t is not None]
        if times:
            # Crashes and stops inside (or next to) the findings' span belong to the incident.
            low, high = min(times), max(times)
            near = (high - low) * 0.25 + pd.Timedelta(minutes=5)
            times += [t for t in ends if low - near <= t <= high + near]
        else:
            times += [t for kind, t in zip(ended["end_kind"], ended["end"]) if kind in ("crash", "error")
                      for t in [_ts(t)] if t is not None]
    return _clusters(times) or None


# --------------------------------------------------------------------------------------------
# Chart side: pandas -> Altair
# --------------------------------------------------------------------------------------------

Focus = tuple[datetime | pd.Timestamp, datetime | pd.Timestamp] | None


def _wall(series: pd.Series, tz: str) -> pd.Series:
    """Naive-or-aware UTC times -> wall-clock times in ``tz``, labelled UTC so a utc scale shows them as is."""
    ts = pd.to_datetime(series, errors="coerce")
    if ts.dt.tz is None:
        ts = ts.dt.tz_localize("UTC")
    return ts.dt.tz_convert(tz).dt.tz_localize(None).dt.tz_localize("UTC")


def _prepare(frame: pd.DataFrame, time_cols: Sequence[str], tz: str) -> pd.DataFrame:
    out = frame.copy()
    for c in time_cols:
        if c in out:
            out[c] = _wall(out[c], tz)
            out[f"{c}_text"] = out[c].dt.strftime("%Y-%m-%d %H:%M:%S.%f").str[:-3].fillna("")
    # Altair cannot serialise pandas NA in object columns; nullable ints become floats.
    for c in out.columns:
        if str(out[c].dtype) in ("Int64", "Int32"):
            out[c] = out[c].astype("float64")
    if "evidence" in out:
        out["evidence"] = out["evidence"].fillna("").astype(str)
    return out


def _wall_focus(focus: Focus, tz: str) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    """The focus range in the chart's wall-clock coordinates."""
    if not focus or focus[0] is None or focus[1] is None:
        return None
    both = _wall(pd.Series(pd.to_datetime([focus[0], focus[1]])), tz)
    return both.iloc[0], both.iloc[1]


def _x(field: str, tz: str, title: str | None = None, focus: Focus = None) -> alt.X:
    """A time axis; with ``focus`` it opens on that range (the data outside stays, a zoom-out away)."""
    scale = alt.Scale(type="utc")
    wall = _wall_focus(focus, tz)
    if wall is not None:
        scale = alt.Scale(type="utc", domain=[int(wall[0].timestamp() * 1000), int(wall[1].timestamp() * 1000)])
    return alt.X(f"{field}:T", scale=scale, title=title or f"time ({tz})",
                 axis=alt.Axis(format="%H:%M:%S", labelAngle=0, labelOverlap=True, labelFlush=True))


def _in_focus(frame: pd.DataFrame, col: str, focus: Focus, tz: str) -> pd.DataFrame:
    """Rows whose ``col`` falls inside the focus (for labels: text outside the plot would print on the legend)."""
    wall = _wall_focus(focus, tz)
    if wall is None or frame.empty:
        return frame
    return frame[(frame[col] >= wall[0]) & (frame[col] <= wall[1])]


def _empty(title: str) -> alt.Chart:
    """A visible placeholder instead of a missing chart (so the report says why it is empty)."""
    return (alt.Chart(pd.DataFrame({"note": [f"{title}: nothing to draw"]}))
            .mark_text(align="left", fontSize=13).encode(text="note:N").properties(width=CHART_WIDTH, height=30))


@dataclass
class _Panel:
    """Width and y axis of the chart being built: a chart over several incident ranges is drawn as
    side-by-side panels (a broken time axis), each narrower, only the first with lane names."""

    width: int = CHART_WIDTH
    y_axis: bool = True
    index: int = 0
    #: Layers filter on the host select box only when the chart will declare it (interactive charts).
    host_filter: bool = True


_PANEL = _Panel()
#: Hosts each chart under construction filters on (read back by :func:`_paneled`).
_HOSTS_OF: dict[int, list] = {}


def _lane_axis(limit: int) -> alt.Axis | None:
    return alt.Axis(labelLimit=limit) if _PANEL.y_axis else None


def _ranges(focus) -> list:
    """``focus`` as a list of (start, end) ranges: one range, several (a broken axis), or ``[None]``."""
    if not focus:
        return [None]
    if isinstance(focus, list):
        return [r for r in focus if r] or [None]
    return [focus]


def _overall(focus) -> tuple | None:
    """One range covering every range of ``focus`` (for charts drawn without panels)."""
    ranges = [r for r in _ranges(focus) if r]
    return (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else None


def _paneled(build: Callable) -> Callable:
    """Let a time chart take several focus ranges: one narrower panel per range, side by side, each
    opening on its range (zoom and pan still reach the rest), sharing colours, legends and the host filter."""

    @functools.wraps(build)
    def chart(*args, focus=None, interactive: bool = True, title: str | None = None, **kwargs):
        ranges = _ranges(focus)
        named = {"title": title} if title is not None else {}
        global _PANEL
        if len(ranges) == 1:
            saved, _PANEL = _PANEL, _Panel(host_filter=interactive)
            try:
                single = build(*args, focus=ranges[0], interactive=interactive, **named, **kwargs)
            finally:
                _PANEL = saved
            _HOSTS_OF.pop(id(single), None)
            return single
        gap = 12
        panels, hosts = [], set()
        for i, r in enumerate(ranges):
            saved, _PANEL = _PANEL, _Panel(width=max(160, (CHART_WIDTH - gap * (len(ranges) - 1)) // len(ranges)),
                                           y_axis=(i == 0), index=i, host_filter=interactive)
            try:
                panel = build(*args, focus=r, interactive=False, title=" ", **kwargs)
            finally:
                _PANEL = saved
            hosts |= set(_HOSTS_OF.pop(id(panel), []))
            if interactive and isinstance(panel, alt.LayerChart):
                panel = panel.add_params(alt.selection_interval(name=f"zoom_{i}", bind="scales", encodings=["x"]))
            panels.append(panel)
        text = named.get("title") or inspect.signature(build).parameters["title"].default
        whole = alt.hconcat(*panels, spacing=gap).properties(title=alt.Title(text, subtitle=(
            "time axis broken between the incident's moments; scroll or drag a panel to zoom in time")))
        return _interactive(whole, sorted(hosts), zoom=False) if interactive else whole

    return chart


#: The expression a host filter uses (a select box in the interactive report; "all" shows every host).
HOST_FILTER = "host_filter"


def _interactive(chart: alt.LayerChart, hosts: Sequence[str] | None = None, zoom: bool = True) -> alt.LayerChart:
    """Zoom and pan on time (scroll, drag; double-click resets) and, with several hosts, a host filter."""
    params = []
    if zoom:
        params.append(alt.selection_interval(name="zoom", bind="scales", encodings=["x"]))
    names = sorted({str(h) for h in hosts or [] if h is not None and str(h) != "nan"})
    if len(names) > 1:
        params.append(alt.param(name=HOST_FILTER, value="all",
                                bind=alt.binding_select(options=["all", *names], name="host ")))
    return chart.add_params(*params) if params else chart


def _by_host(chart: alt.Chart, hosts: Sequence[str] | None) -> alt.Chart:
    """Apply the host filter to a layer whose rows have a ``host``."""
    names = {str(h) for h in hosts or [] if h is not None and str(h) != "nan"}
    if len(names) <= 1 or not _PANEL.host_filter:
        return chart
    return chart.transform_filter(f"{HOST_FILTER} == 'all' || datum.host == {HOST_FILTER}")


def bounded(frame: pd.DataFrame, lane_cols: Sequence[str], time_col: str, max_rows: int = MAX_CHART_ROWS,
            keep: Sequence[str] = ()) -> pd.DataFrame:
    """Aggregate ``frame`` to at most about ``max_rows`` rows: per lane and time bucket keep the first row
    (with its evidence) and a ``count`` of rows it stands for. Small frames pass through with count 1."""
    if len(frame) <= max_rows:
        return frame.assign(count=1)
    times = pd.to_datetime(frame[time_col])
    lanes = max(frame.groupby(list(lane_cols), dropna=False).ngroups, 1)
    buckets = max(max_rows // lanes, 1)
    span = (times.max() - times.min()) / buckets
    key = (times - times.min()) // span if span > pd.Timedelta(0) else 0
    grouped = frame.assign(_bucket=key).groupby([*lane_cols, *keep, "_bucket"], dropna=False, sort=False)
    first = grouped.head(1).copy()
    first["count"] = grouped[time_col].transform("size").loc[first.index]
    return first.drop(columns="_bucket").head(max_rows)


def _short_thread(thread: pd.Series) -> pd.Series:
    """``StreamThread-1`` for a stream thread; ``client`` for a Streams client named by its process UUID."""
    short = thread.astype(str).str.replace(r"^.*-(?=StreamThread|StateUpdater|GlobalStreamThread)", "", regex=True)
    return short.str.replace(r"^.*[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", "client", regex=True)


@_paneled
def swimlane_chart(states: pd.DataFrame, generations: pd.DataFrame | None = None,
                   runs: pd.DataFrame | None = None, tz: str = "UTC", title: str = "Threads per host",
                   focus: Focus = None, interactive: bool = True) -> alt.LayerChart | alt.Chart:
    """(a) Swimlanes per host/thread coloured by state; generations as bands; crashes and stops on a lane of
    their own (labelled points, a rule across the lanes)."""
    if states.empty and (runs is None or runs.empty):
        return _empty(title)
    layers = []
    st = _prepare(bounded(states, ["host", "thread"], "start"), ["start", "end"], tz)
    lanes: list[str] = []
    if not st.empty:
        st["end"] = st["end"].fillna(st["start"].max())
        st["lane"] = st["host"].astype(str) + " · " + _short_thread(st["thread"])
        lanes = sorted(st["lane"].unique())
    ends = pd.DataFrame()
    if runs is not None and not runs.empty:
        ends = _prepare(runs[runs["end"].notna()], ["end", "start"], tz)
        if not ends.empty:
            ends["kind"] = ends["end_kind"].fillna("unknown")
            ends["lane"] = "process ends"
            ends["label"] = ends["host"].astype(str) + " " + ends["kind"]
            ends["evidence"] = ends.get("end_evidence_line", ends.get("evidence", "")).fillna("").astype(str)
    y_lanes = (["process ends"] if not ends.empty else []) + lanes
    lane_y = alt.Y("lane:N", title=None, sort=y_lanes, scale=alt.Scale(domain=y_lanes), axis=_lane_axis(220))
    hosts = sorted(set(st["host"].astype(str)) | (set(ends["host"].astype(str)) if not ends.empty else set())) \
        if not st.empty or not ends.empty else []
    if generations is not None and not generations.empty:
        gen = _prepare(generations, ["start", "end"], tz)
        gen["end"] = gen["end"].where(gen["end"] > gen["start"], gen["start"] + pd.Timedelta(milliseconds=500))
        gen_tip = [alt.Tooltip("generation:Q"), alt.Tooltip("group_id:N"), alt.Tooltip("members:Q"),
                   alt.Tooltip("start_text:N", title="from"), alt.Tooltip("end_text:N", title="to"),
                   alt.Tooltip("evidence:N", title="first join")]
        layers.append(alt.Chart(gen).mark_rect(opacity=0.15, color="#ff7f0e", clip=True).encode(
            x=_x("start", tz, focus=focus), x2="end:T", tooltip=gen_tip))
        labels = _thin(_in_focus(gen, "start", focus, tz), "start", focus, tz, px=18)
        if not labels.empty:
            layers.append(alt.Chart(labels).mark_text(align="left", dx=2, dy=2, fontSize=9, color="#a0522d",
                                                      baseline="top", clip=True)
                          .encode(x=_x("start", tz, focus=focus), y=alt.value(0),
                                  text=alt.Text("generation:Q", format="d"), tooltip=gen_tip))
    if not st.empty:
        layers.append(_by_host(alt.Chart(st).mark_bar(height=14, clip=True).encode(
            x=_x("start", tz, focus=focus), x2="end:T", y=lane_y,
            color=alt.Color("state:N", title="thread state"),
            tooltip=["host:N", "thread:N", "state:N", alt.Tooltip("start_text:N", title="from"),
                     alt.Tooltip("end_text:N", title="to"), "evidence:N"]), hosts))
    if not ends.empty:
        # Stroke and fill, not colour: thread states own the colour scale, and one shared legend per
        # channel keeps the legends together at the right of every panel.
        kinds = alt.Scale(domain=["crash", "clean", "error", "unknown"],
                          range=["#d62728", "#2ca02c", "#ff7f0e", "#7f7f7f"])
        tip = ["host:N", "kind:N", alt.Tooltip("end_text:N", title="at"), alt.Tooltip("evidence:N", title="evidence")]
        layers.append(_by_host(alt.Chart(ends).mark_rule(strokeWidth=1.5, strokeDash=[4, 2], opacity=0.7,
                                                         clip=True).encode(
            x=_x("end", tz, focus=focus), stroke=alt.Stroke("kind:N", title="process end", scale=kinds,
                                                            legend=None), tooltip=tip), hosts))
        layers.append(_by_host(alt.Chart(ends).mark_point(shape="triangle-down", size=90, filled=True,
                                                          clip=True).encode(
            x=_x("end", tz, focus=focus), y=lane_y, fill=alt.Fill("kind:N", title="process end", scale=kinds),
            stroke=alt.value(None), tooltip=tip), hosts))
        as_points = ends.drop(columns=["start"]).rename(columns={"end": "start"})
        key = _stagger_labels(_in_focus(as_points, "start", focus, tz), focus=focus, tz=tz, levels=(-10, 10))
        if not key.empty:
            key = key.rename(columns={"start": "end"})
            for (dy, align), level in key.groupby(["label_dy", "label_align"]):
                layers.append(_by_host(alt.Chart(level).mark_text(
                    align=align, dx=7 if align == "left" else -7, dy=float(dy), fontSize=9, clip=True).encode(
                    x=_x("end", tz, focus=focus), y=lane_y, text="short:N", tooltip=tip), hosts))
    chart = alt.layer(*layers).properties(
        width=_PANEL.width, height=max(60, 26 * max(len(y_lanes), 1)), title=title)
    _HOSTS_OF[id(chart)] = list(hosts)
    return _interactive(chart, hosts) if interactive else chart


def _thin(frame: pd.DataFrame, col: str, focus: Focus, tz: str, px: float) -> pd.DataFrame:
    """Keep only rows at least ``px`` pixels apart on the time axis (their tooltips keep the rest)."""
    if frame.empty:
        return frame
    frame = frame.sort_values(col)
    per_px = _ns_per_px(frame[col], focus, tz)
    kept, last = [], None
    for idx, t in zip(frame.index, frame[col].astype("int64")):
        if last is None or t - last >= px * per_px:
            kept.append(idx)
            last = t
    return frame.loc[kept]


def _ns_per_px(times: pd.Series, focus: Focus, tz: str) -> float:
    wall = _wall_focus(focus, tz)
    if wall is not None:
        span = wall[1].value - wall[0].value
    else:
        ints = times.astype("int64")
        span = int(ints.max() - ints.min())
    return max(span, 1) / _PANEL.width


@_paneled
def task_lane_chart(events: pd.DataFrame, findings: pd.DataFrame | None = None, tz: str = "UTC",
                    title: str = "Tasks: phases, locks, checkpoints, restores, wipes", focus: Focus = None,
                    interactive: bool = True) -> alt.LayerChart | alt.Chart:
    """(b) One lane per task and host: phases and restores as bars, everything else as labelled points."""
    if events.empty:
        return _empty(title)
    ev = _prepare(bounded(events, ["lane"], "start", keep=["category"]), ["start", "end"], tz)
    if "role" not in ev:
        ev["role"] = None
    lanes = sorted(ev["lane"].astype(str).unique())
    hosts = sorted(ev["host"].dropna().astype(str).unique()) if "host" in ev else []
    y = alt.Y("lane:N", title=None, sort=lanes, scale=alt.Scale(domain=lanes), axis=_lane_axis(200))
    domain = list(CATEGORY_COLOURS)
    colour = alt.Color("category:N", title="what", scale=alt.Scale(domain=domain, range=list(CATEGORY_COLOURS.values())))
    tip = ["lane:N", "category:N", "label:N", "role:N", alt.Tooltip("start_text:N", title="at"), "evidence:N"]
    intervals = ev[ev["category"].isin(["phase", "restore"])].copy()
    points = ev[~ev["category"].isin(["phase", "restore"])].copy()
    layers = []
    if not intervals.empty:
        intervals["end"] = intervals["end"].fillna(ev["start"].max())
        # Restores sit in the lower half of a lane, phases fill it, so both stay visible.
        layers.append(_by_host(alt.Chart(intervals[intervals["category"] == "phase"]).mark_bar(
            height=16, opacity=0.55, clip=True).encode(
            x=_x("start", tz, focus=focus), x2="end:T", y=y, color=colour, tooltip=tip), hosts))
        layers.append(_by_host(alt.Chart(intervals[intervals["category"] == "restore"]).mark_bar(
            height=6, yOffset=6, clip=True).encode(
            x=_x("start", tz, focus=focus), x2="end:T", y=y, color=colour, tooltip=tip), hosts))
    if not points.empty:
        # Same field, title and domain as the colour: Vega-Lite merges both into one legend.
        shapes = alt.Shape("category:N", title="what", scale=alt.Scale(
            domain=domain, range=[CATEGORY_SHAPES[c] for c in domain]))
        layers.append(_by_host(alt.Chart(points).mark_point(size=110, filled=True, opacity=0.9, clip=True).encode(
            x=_x("start", tz, focus=focus), y=y, color=colour, shape=shapes, tooltip=tip), hosts))
        # Label the events a reader looks for first: checkpoints, crashes, restarts, wipes, failed locks.
        wanted = points[points["category"].isin(["checkpoint", "crash", "wipe", "lock-failed", "process"])]
        key = _stagger_labels(_in_focus(wanted, "start", focus, tz), focus=focus, tz=tz)
        for (dy, align), level in key.groupby(["label_dy", "label_align"]):
            layers.append(_by_host(alt.Chart(level).mark_text(align=align, dx=7 if align == "left" else -7,
                                                              dy=float(dy), fontSize=9, clip=True).encode(
                x=_x("start", tz, focus=focus), y=y, text="short:N", tooltip=tip), hosts))
    if findings is not None and not findings.empty and findings["ts"].notna().any():
        fm = _prepare(findings[findings["ts"].notna()], ["ts"], tz)
        fm["lane"] = fm["task_id"].astype(str) + " @ " + fm["host"].astype(str)
        fm = fm[fm["lane"].isin(lanes)]
        if not fm.empty:
            layers.append(_by_host(alt.Chart(fm).mark_point(shape="M-1,-1L1,1M-1,1L1,-1", size=260, strokeWidth=3,
                                                            color=CATEGORY_COLOURS["finding"], clip=True).encode(
                x=_x("ts", tz, focus=focus), y=y,
                tooltip=["detector:N", "title:N", "confidence:N", alt.Tooltip("ts_text:N", title="at"),
                         "evidence:N"]), hosts))
    chart = alt.layer(*layers).properties(width=_PANEL.width, height=max(80, LANE_HEIGHT * len(lanes)), title=title)
    _HOSTS_OF[id(chart)] = list(hosts)
    return _interactive(chart, hosts) if interactive else chart


#: Text rows per lane for point labels (pixels from the lane's centre); labels that fit in none of
#: them are left to the tooltip.
LABEL_LEVELS = (-11, 13, -23)
#: Pixels per task lane (room for the three label rows).
LANE_HEIGHT = 56
_CHAR_PX = 5.4  # average width of a 9px label character
#: Which labels get a place first when they compete for room (lower first); the rest keep time order.
LABEL_PRIORITY = {"crash": 0, "wipe": 0, "lock-failed": 1, "checkpoint": 2, "process": 3}


def _stagger_labels(points: pd.DataFrame, max_labels: int = 80, focus: Focus = None, tz: str = "UTC",
                    levels: Sequence[int] = LABEL_LEVELS) -> pd.DataFrame:
    """Place point labels on a few text rows per lane so no two overprint; crashes, wipes, failed locks
    and checkpoint writes are placed first, and a label that finds no room is left to the tooltip."""
    if points.empty:
        return points.assign(label_dy=pd.Series(dtype="float64"), short=pd.Series(dtype="object"),
                             label_align=pd.Series(dtype="object"))
    pts = points.sort_values("start").copy()
    # Keep labels short: the changelog and the evidence line are in the tooltip.
    pts["short"] = pts["label"].astype(str).str.replace(r"^(checkpoint \w+ -?\d+).*$", r"\1", regex=True).str[:40]
    written = pts["short"].str.startswith("checkpoint written")
    rank = pts.get("category", pd.Series("", index=pts.index)).map(LABEL_PRIORITY).fillna(5)
    pts["_rank"] = rank.where(~written, 1.5)
    times = pts["start"].astype("int64")
    per_px = _ns_per_px(pts["start"], focus, tz)
    wall = _wall_focus(focus, tz)
    right_edge = times.min() + _PANEL.width * per_px if wall is None else wall[1].value
    kept, dys, aligns = [], [], []
    for _lane, grp in pts.groupby("lane", sort=False):
        taken: list[list[tuple[float, float]]] = [[] for _ in levels]
        for idx in grp.sort_values(["_rank", "start"]).index:
            t, text = times[idx], grp.at[idx, "short"]
            width = (len(text) * _CHAR_PX + 14) * per_px
            # Near the right edge the label goes to the left of its mark, so it stays inside the plot.
            left, align = (t, "left") if t + width <= right_edge else (t - width, "right")
            for level, spans in enumerate(taken):
                if all(left + width <= a or left >= b for a, b in spans):
                    spans.append((left, left + width))
                    kept.append(idx)
                    dys.append(levels[level])
                    aligns.append(align)
                    break
    out = pts.loc[kept].assign(label_dy=dys, label_align=aligns).drop(columns="_rank")
    return out.head(max_labels)


def offset_chart(offsets: pd.DataFrame, tz: str = "UTC",
                 title: str = "Changelog offsets per task: checkpoint vs restored vs replayed") -> alt.Chart:
    """(c) One small chart per task, host and changelog partition on an offset axis: a row of the
    checkpoint offsets (written, read, on disk), then a row per restoration (labelled with its start
    time): a green bar from its start to its end offset, under it in red the range between the last
    checkpoint and the restore start (never restored) or, when it started at the checkpoint, the range
    replayed on top of the checkpointed store. Times are in the tooltips, next to the evidence line.
    """
    if offsets.empty:
        return _empty(title)
    off = _prepare(offsets, ["ts"], tz)
    off["series"] = (off["task_id"].astype(str) + " @ " + off["host"].astype(str) + " · "
                     + off["changelog"].astype(str))
    restores = []
    for rid, grp in off[off["restore_id"].notna()].groupby("restore_id"):
        start = grp[grp["kind"] == "restore start"]
        end = grp[grp["kind"] == "restore end"]
        if start.empty:
            continue
        s0 = start.iloc[0]
        e0 = end.iloc[0] if not end.empty else None
        # Without an end line (always before 2.6) the start line's end offset is the range it set out to restore.
        target = s0.get("target_offset")
        aimed = e0 is None and target is not None and pd.notna(target)
        restores.append({"series": s0["series"], "host": s0["host"], "low": s0["offset"],
                         "high": e0["offset"] if e0 is not None else target if aimed else s0["offset"],
                         "row": f"restore {str(s0['ts_text'])[11:19]}", "ended": e0 is not None,
                         "what": ("restored" if e0 is not None else
                                  "restore started toward this end offset; its end is not logged" if aimed
                                  else "restore started (no end logged)"),
                         "from_text": s0["ts_text"], "to_text": e0["ts_text"] if e0 is not None else "",
                         "evidence": s0["evidence"], "end_evidence": e0["evidence"] if e0 is not None else "",
                         "ts": s0["ts"]})
    gaps = []
    for r in restores:
        before = off[(off["series"] == r["series"]) & off["kind"].str.startswith("checkpoint") & (off["ts"] <= r["ts"])]
        if before.empty:
            continue
        ck = before.sort_values("ts").iloc[-1]
        # Restoration resumes at the record after the checkpointed offset (or at it): no gap.
        if not 0 <= r["low"] - ck["offset"] <= 1:
            low, high = sorted([ck["offset"], r["low"]])
            why, kind = "between the checkpoint and the restore start: never restored", "never restored"
        elif r["high"] != r["low"]:
            low, high = r["low"], r["high"]
            why = f"replayed on top of the store checkpointed at {str(ck['ts_text'])[:19]} (offset {int(ck['offset']):,})"
            kind = "replayed on the checkpointed store"
        else:
            continue
        gaps.append({"series": r["series"], "host": r["host"], "low": low, "high": high, "row": r["row"], "range": kind,
                     "why": why, "records": int(abs(high - low)), "evidence": ck["evidence"],
                     "restore_evidence": r["evidence"]})
    points = off[off["kind"].str.startswith("checkpoint")].copy()
    points["row"] = "checkpoint"
    points["row_order"] = "0"
    for r in restores:
        r["row_order"] = f"1 {r['from_text']}"
    rs = pd.DataFrame(restores)
    for g in gaps:
        g["row_order"] = next(r["row_order"] for r in restores if r["row"] == g["row"] and r["series"] == g["series"])
    series = sorted(off["series"].unique())
    hosts = sorted(off["host"].astype(str).unique())
    y = alt.Y("row:N", title=None, axis=alt.Axis(labelLimit=140),
              sort=alt.EncodingSortField("row_order", order="ascending"))
    x = alt.X("offset:Q", title="changelog offset", scale=alt.Scale(zero=False, nice=False),
              # Offsets are whole numbers: no tick between two of them (a short range repeated its labels).
              axis=alt.Axis(format=",d", labelOverlap=True, labelFlush=True, tickMinStep=1))
    layers = []
    if gaps:
        layers.append(_by_host(alt.Chart(pd.DataFrame(gaps)).mark_bar(height=5, yOffset=6).encode(
            # Fill, not colour: the checkpoint diamonds own the colour scale (one legend each).
            fill=alt.Fill("range:N", title="range", scale=alt.Scale(
                domain=["never restored", "replayed on the checkpointed store"], range=["#d62728", "#ff7f0e"])),
            x=alt.X("low:Q", title="changelog offset"), x2="high:Q", y=y,
            tooltip=["series:N", "why:N", alt.Tooltip("low:Q", format=","), alt.Tooltip("high:Q", format=","),
                     alt.Tooltip("records:Q", format=","), alt.Tooltip("evidence:N", title="checkpoint evidence"),
                     alt.Tooltip("restore_evidence:N", title="restore evidence")]), hosts))
    if not rs.empty:
        layers.append(_by_host(alt.Chart(rs).mark_bar(height=8, yOffset=-2, color=CATEGORY_COLOURS["restore"]).encode(
            x=alt.X("low:Q", title="changelog offset"), x2="high:Q", y=y,
            # A restore whose end is not logged is drawn faint: the range it set out to restore, not one it finished.
            opacity=alt.condition(alt.datum.ended, alt.value(1.0), alt.value(0.35)),
            tooltip=["series:N", "what:N", alt.Tooltip("low:Q", format=",", title="from offset"),
                     alt.Tooltip("high:Q", format=",", title="to offset"), alt.Tooltip("from_text:N", title="started"),
                     alt.Tooltip("to_text:N", title="ended"), "evidence:N",
                     alt.Tooltip("end_evidence:N", title="end evidence")]), hosts))
        layers.append(_by_host(alt.Chart(rs).mark_tick(thickness=2, size=14, color="#1b7837").encode(
            x="low:Q", y=y, tooltip=["series:N", alt.Tooltip("low:Q", format=",", title="restore start"),
                                     "evidence:N"]), hosts))
    if not points.empty:
        layers.append(_by_host(alt.Chart(points).mark_point(size=110, filled=True, shape="diamond").encode(
            x=x, y=y, color=alt.Color("kind:N", title="checkpoint", scale=alt.Scale(
                domain=["checkpoint written", "checkpoint read", "checkpoint file"],
                range=[CATEGORY_COLOURS["checkpoint"], "#2171b5", CATEGORY_COLOURS["checkpoint-file"]])),
            tooltip=["series:N", "kind:N", alt.Tooltip("offset:Q", format=","), alt.Tooltip("ts_text:N", title="at"),
                     "evidence:N"]), hosts))
    # One small layered chart per series (the layers have different frames, which a facet cannot take).
    parts = []
    for name in series:
        sub = []
        for layer in layers:
            sub.append(layer.transform_filter(alt.datum.series == name))
        rows_here = 1 + sum(1 for r in restores if r["series"] == name)
        parts.append(alt.layer(*sub).properties(width=CHART_WIDTH - 160, height=22 * rows_here + 8, title=alt.Title(
            name, fontSize=11, anchor="start", fontWeight="normal")))
    top = alt.vconcat(*parts, spacing=8).resolve_scale(x="independent").properties(title=title)
    params = [alt.param(name=HOST_FILTER, value="all", bind=alt.binding_select(options=["all", *hosts], name="host "))] \
        if len(hosts) > 1 else []
    return top.add_params(*params) if params else top


@_paneled
def rebalance_chart(rebalances: pd.DataFrame, tz: str = "UTC", title: str = "Rebalance activity",
                    focus: Focus = None, interactive: bool = True) -> alt.LayerChart | alt.Chart:
    """(d) Group joins per host and time bucket, with the generation reached as a label."""
    if rebalances.empty:
        return _empty(title)
    rb = _prepare(rebalances, ["bucket"], tz)
    hosts = sorted(rb["host"].astype(str).unique())
    tip = ["host:N", alt.Tooltip("bucket_text:N", title="from"), "joins:Q", "first_generation:Q", "generation:Q",
           alt.Tooltip("evidence:N", title="first join")]
    seconds = int(rb["bucket_seconds"].iloc[0]) if "bucket_seconds" in rb and len(rb) else 60
    rb["bucket_end"] = rb["bucket"] + pd.Timedelta(seconds=seconds)
    bars = _by_host(alt.Chart(rb).mark_bar(clip=True).encode(
        x=_x("bucket", tz, focus=focus), x2="bucket_end:T", y=alt.Y("sum(joins):Q", title="joins"),
        color=alt.Color("host:N"), tooltip=tip), hosts)
    labels = _by_host(alt.Chart(_thin(_in_focus(rb, "bucket", focus, tz), "bucket", focus, tz, px=16))
                      .mark_text(dy=-6, fontSize=9, clip=True).encode(
        x=_x("bucket", tz, focus=focus), y=alt.Y("sum(joins):Q"), text=alt.Text("max(generation):Q", format="d")),
        hosts)
    chart = alt.layer(bars, labels).properties(width=_PANEL.width, height=160, title=title)
    _HOSTS_OF[id(chart)] = list(hosts)
    return _interactive(chart, hosts) if interactive else chart


#: Substrings that identify the migration steps the gap is measured between.
ACTIVE_STEP = "ACTIVE"
WRITE_STEP_MARKERS = ("WRITE", "PUT", "UPDATE", "COPY", "CHECKPOINT")
#: Lane of a migration step that names no table (still drawn, never dropped).
NO_TABLE = "(no table name)"


def _table_lane(steps: pd.DataFrame) -> pd.Series:
    """The lane of each migration step: its base table, else its table, else :data:`NO_TABLE`."""
    lane = steps["base_table"] if "base_table" in steps else pd.Series(None, index=steps.index, dtype="object")
    if "table" in steps:
        lane = lane.where(lane.notna(), steps["table"])
    return lane.where(lane.notna() & (lane.astype(str) != ""), NO_TABLE).astype(str)


def migration_summary(steps: pd.DataFrame) -> pd.DataFrame:
    """Per table: when it became ACTIVE, its first write after that, the gap, and the outcome."""
    rows = []
    if steps.empty:
        return pd.DataFrame(columns=["base_table", "active", "first_write", "gap_s", "errors", "outcome"])
    st = steps.copy()
    st["ts"] = pd.to_datetime(st["ts"])
    for table, grp in st.assign(_key=_table_lane(st)).groupby("_key"):
        grp = grp.sort_values("ts")
        step = grp["step"].fillna("").astype(str).str.upper()
        active = grp[step.str.contains(ACTIVE_STEP)]
        t_active = active["ts"].iloc[-1] if not active.empty else pd.NaT
        writes = grp[step.apply(lambda s: any(m in s for m in WRITE_STEP_MARKERS) and ACTIVE_STEP not in s)]
        if pd.notna(t_active):
            writes = writes[writes["ts"] >= t_active]
        t_write = writes["ts"].iloc[0] if not writes.empty else pd.NaT
        errors = int(grp["error_code"].notna().sum() + step.str.contains("FAIL|ERROR").sum())
        outcome = "failed" if errors else ("migrated" if pd.notna(t_write) else "unknown")
        gap = (t_write - t_active).total_seconds() if pd.notna(t_write) and pd.notna(t_active) else None
        evidence = active["evidence"].iloc[-1] if not active.empty and "evidence" in active else ""
        rows.append({"base_table": table, "active": t_active, "first_write": t_write, "gap_s": gap,
                     "errors": errors, "outcome": outcome, "evidence": evidence})
    return pd.DataFrame(rows, columns=["base_table", "active", "first_write", "gap_s", "errors", "outcome", "evidence"])


#: Kinds of checkpoint-table migration steps, each with its colour: what failed and what was deleted stand out.
MIGRATION_STEP_COLOURS = {"failure": "#d62728", "deletion": "#ff7f0e", "creation": "#1f77b4", "copy": "#2ca02c",
                          "other": "#7f7f7f"}


def _migration_step_kind(step: object, error_code: object = None) -> str:
    """A migration step's kind (:data:`MIGRATION_STEP_COLOURS`) from its name (an event or a CloudTrail call)."""
    name = str(step or "").upper()
    if "FAIL" in name or (error_code is not None and pd.notna(error_code) and str(error_code)):
        return "failure"
    for kind, words in (("deletion", ("DELETE",)), ("creation", ("CREATE", "ACTIVE")),
                        ("copy", ("COPY", "COPIED", "PUT_ITEM", "WRITE_ITEM", "RECOPY"))):
        if any(word in name for word in words):
            return kind
    return "other"


@_paneled
def migration_chart(steps: pd.DataFrame, tz: str = "UTC",
                    title: str = "NiFi checkpoint-table migration per table", focus: Focus = None,
                    interactive: bool = True) -> alt.LayerChart | alt.Chart:
    """(e) Migration steps per table, the ACTIVE → first write gap as a bar, coloured by outcome."""
    if steps.empty:
        return _empty(title)
    st = _prepare(steps, ["ts"], tz)
    st["lane"] = _table_lane(st)
    for col in ("table", "step", "origin", "error_code", "host"):
        if col in st:
            st[col] = st[col].astype("object").where(st[col].notna(), None)
    summary = migration_summary(steps)
    lanes = sorted(st["lane"].unique())
    hosts = sorted(st["host"].dropna().astype(str).unique()) if "host" in st else []
    y = alt.Y("lane:N", title="table" if _PANEL.y_axis else None, sort=lanes, scale=alt.Scale(domain=lanes),
              axis=_lane_axis(260))
    layers = []
    gaps = summary[summary["active"].notna()].copy()
    if not gaps.empty:
        gaps["first_write"] = gaps["first_write"].fillna(pd.to_datetime(steps["ts"]).max())
        gaps = _prepare(gaps, ["active", "first_write"], tz).rename(columns={"base_table": "lane"})
        gaps["gap_label"] = [f"{g:.1f}s to first write" if pd.notna(g) else "no write after ACTIVE" for g in gaps["gap_s"]]
        layers.append(alt.Chart(gaps).mark_bar(height=10, opacity=0.35, clip=True).encode(
            x=_x("active", tz, focus=focus), x2="first_write:T", y=y,
            color=alt.Color("outcome:N", scale=alt.Scale(domain=["failed", "migrated", "unknown"],
                                                         range=["#d62728", "#2ca02c", "#7f7f7f"])),
            tooltip=["lane:N", "outcome:N", "gap_label:N", alt.Tooltip("active_text:N", title="ACTIVE at"),
                     alt.Tooltip("evidence:N", title="ACTIVE evidence")]))
        labels = _in_focus(gaps, "active", focus, tz)
        if not labels.empty:
            layers.append(alt.Chart(labels).mark_text(align="left", dx=4, dy=-11, fontSize=9, clip=True).encode(
                x=_x("active", tz, focus=focus), y=y, text="gap_label:N",
                tooltip=["lane:N", "gap_label:N", alt.Tooltip("evidence:N", title="ACTIVE evidence")]))
    st["kind"] = [_migration_step_kind(step, code) for step, code in zip(st["step"], st.get("error_code", [None] * len(st)))]
    layers.append(_by_host(alt.Chart(st).mark_point(size=80, filled=True, clip=True).encode(
        x=_x("ts", tz, focus=focus), y=y, shape=alt.Shape("origin:N"),
        color=alt.Color("kind:N", title="step", scale=alt.Scale(domain=list(MIGRATION_STEP_COLOURS),
                                                                range=list(MIGRATION_STEP_COLOURS.values()))),
        tooltip=["lane:N", "table:N", "step:N", "kind:N", "origin:N", "error_code:N",
                 alt.Tooltip("ts_text:N", title="at"), "evidence:N"]), hosts))
    # The outcome bars and the step points each keep their own colour legend.
    chart = alt.layer(*layers).resolve_scale(color="independent").properties(
        width=_PANEL.width, height=max(80, 40 * len(lanes)), title=title)
    _HOSTS_OF[id(chart)] = list(hosts)
    return _interactive(chart, hosts) if interactive else chart


def ingest_chart(ingest: pd.DataFrame, tz: str = "UTC", title: str = "Lines per host over time",
                 focus: Focus = None) -> alt.Chart:
    """(f) Stacked lines per bucket by level, one row per host, plus the unparsed share per host."""
    if ingest.empty:
        return _empty(title)
    focus = _overall(focus)
    ig = _prepare(ingest, ["bucket"], tz)
    if "evidence" not in ig:
        ig["evidence"] = ""
    levels = ["ERROR", "WARN", "INFO", "DEBUG", "TRACE", "unparsed", "?"]
    bars = alt.Chart(ig).mark_bar(clip=True).encode(
        x=_x("bucket", tz, focus=focus), y=alt.Y("sum(lines):Q", title="lines"),
        color=alt.Color("level:N", scale=alt.Scale(domain=levels, range=["#d62728", "#ff7f0e", "#1f77b4", "#9edae5",
                                                                         "#c7c7c7", "#000000", "#bcbd22"])),
        tooltip=["host:N", "level:N", "lines:Q", alt.Tooltip("bucket_text:N", title="from"),
                 alt.Tooltip("evidence:N", title="first line")],
    ).properties(width=CHART_WIDTH - 200, height=70).facet(row=alt.Row("host:N", title=None))
    totals = ig.groupby("host")["lines"].sum()
    unparsed = ig[ig["level"] == "unparsed"].groupby("host")["lines"].sum()
    first_unparsed = ig[ig["level"] == "unparsed"].groupby("host")["evidence"].first()
    share = pd.DataFrame({"host": totals.index.astype(str),
                          "unparsed_share": [float(unparsed.get(h, 0)) / max(float(t), 1.0) for h, t in totals.items()],
                          "evidence": [first_unparsed.get(h, "") for h in totals.index]})
    share_chart = alt.Chart(share).mark_bar(color="#000000").encode(
        y=alt.Y("host:N", title=None), x=alt.X("unparsed_share:Q", title="unparsed share",
                                                scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
        tooltip=["host:N", alt.Tooltip("unparsed_share:Q", format=".1%"),
                 alt.Tooltip("evidence:N", title="first unparsed line")]).properties(width=150, height=20 * len(share))
    return alt.vconcat(bars, share_chart).properties(title=title)


def task_lanes_for(tl, tasks: Sequence[str] | None = None, hosts: Sequence[str] | None = None,
                   window: TimeWindow = None, findings: Iterable | None = None, tz: str = "UTC",
                   focus: Focus | str = "incident") -> alt.Chart:
    """Convenience: frame + chart for the task lanes of a timeline (opening on the findings' time by default)."""
    findings = list(findings or [])
    if focus == "incident":
        focus = incident_window(findings, process_run_frame(tl, hosts=hosts)) if window is None else None
    return task_lane_chart(task_event_frame(tl, tasks=tasks, hosts=hosts, window=window),
                           finding_frame(findings), tz=tz, focus=focus)


ChartBuilder = Callable[[], "alt.TopLevelMixin | None"]


def timeline_chart_builders(tl, hosts: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
                            window: TimeWindow = None, findings: Iterable | None = None, tz: str = "UTC",
                            records: DataFrame | None = None, focus: Focus = None,
                            frames: ScopedFrames | None = None) -> dict[str, ChartBuilder]:
    """Every timeline chart, by name, as a function that queries its frames and draws it (None when the
    bundle has nothing for it), so a caller can draw each on its own and survive one that fails.

    ``frames``: where the task and offset frames come from when a caller draws them again later
    (a report's findings); by default they are queried here."""
    findings = list(findings or [])
    frames = frames or ScopedFrames(tl, hosts=hosts, tasks=tasks, window=window)

    def threads():
        states = thread_state_frame(tl, hosts=hosts, window=window)
        # Without a window these are the scope's runs over the whole log, which a report has queried already.
        runs = frames.process_runs(hosts) if window is None else process_run_frame(tl, hosts=hosts, window=window)
        if states.empty and (runs.empty or not (runs["product"] != "nifi").any()):
            return None
        return swimlane_chart(states, generation_frame(tl, hosts=hosts, window=window), runs, tz=tz, focus=focus)

    def task_lanes():
        frame = frames.task_events()
        return None if frame.empty else task_lane_chart(frame, finding_frame(findings), tz=tz, focus=focus)

    def offsets():
        frame = frames.offsets()
        return None if frame.empty else offset_chart(frame, tz=tz)

    def rebalances():
        frame = rebalance_frame(tl, hosts=hosts, window=window)
        return None if frame.empty else rebalance_chart(frame, tz=tz, focus=focus)

    def migration():
        frame = migration_frame(tl)
        return None if frame.empty else migration_chart(frame, tz=tz, focus=focus)

    builders: dict[str, ChartBuilder] = {"threads": threads, "tasks": task_lanes, "offsets": offsets,
                                         "rebalances": rebalances, "migration": migration}
    if records is not None:
        builders["ingest"] = lambda: ingest_chart(ingest_frame(records, hosts=hosts), tz=tz, focus=focus)
    return builders


def timeline_charts(tl, hosts: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
                    window: TimeWindow = None, findings: Iterable | None = None, tz: str = "UTC",
                    records: DataFrame | None = None, focus: Focus = None) -> dict[str, alt.Chart]:
    """Every chart that applies to this timeline, by name (NiFi-only bundles skip the Kafka charts)."""
    charts = {}
    for name, build in timeline_chart_builders(tl, hosts, tasks, window, findings, tz, records, focus).items():
        chart = build()
        if chart is not None:
            charts[name] = chart
    return charts


# --------------------------------------------------------------------------------------------
# Rendering: static SVG, inline Vega (offline HTML), or a JupyterLab widget (offline)
# --------------------------------------------------------------------------------------------

#: Class of the element that holds one interactive chart's spec in an HTML page.
HTML_CHART_MARKER = "si-chart-spec"
HTML_RENDERER = "stream-incident-html"


def spec_html(spec: dict) -> str:
    """One chart as HTML, from its Vega-Lite spec: its static SVG (shown without JavaScript) and the spec, which
    the page's inline runtime (:func:`vega_runtime_html`) turns into an interactive chart. It takes the spec,
    not the chart, so the caller checks it against the schema once: Altair's checks cost a few tenths of a
    second per chart, and a report draws dozens."""
    import html as html_lib
    import json

    import vl_convert as vlc

    svg = vlc.vegalite_to_svg(spec)
    # "</" cannot end the script element early once escaped; the JSON stays valid.
    payload = json.dumps(spec, default=str).replace("</", "<\\/")
    return (f'<div class="si-chart"><div class="si-static">{svg}</div>'
            f'<script type="application/json" class="{HTML_CHART_MARKER}">{payload}</script></div>'
            f'<!-- {html_lib.escape(str(spec.get("title", "")))[:80]} -->')


@functools.cache
def vega_runtime_html() -> str:
    """One ``<script type="module">`` with Vega, Vega-Lite and vega-embed inlined (from vl-convert) that
    renders every chart spec on the page and hides its static SVG once the live chart is drawn.

    Bundling takes a second or two and gives the same text every time in a process: it is kept."""
    import vl_convert as vlc
    from altair.utils._importers import vl_version_for_vl_convert

    snippet = """
for (const node of document.querySelectorAll("script.%s")) {
  const box = node.parentElement;
  const live = document.createElement("div");
  live.className = "si-live";
  box.insertBefore(live, box.firstChild);
  vegaEmbed(live, JSON.parse(node.textContent), {actions: false, renderer: "svg"})
    .then(() => { box.querySelector(".si-static").style.display = "none"; box.dataset.live = "yes"; })
    .catch((err) => { live.textContent = "interactive chart unavailable (" + err + "); static picture below"; });
}
""" % HTML_CHART_MARKER
    bundle = vlc.javascript_bundle(snippet, vl_version=vl_version_for_vl_convert())
    style = ("<style>.si-chart .vega-bindings{font:12px sans-serif;margin:4px 0}"
             "#vg-tooltip-element{max-width:720px;white-space:normal}"
             "#vg-tooltip-element td.value{font-family:monospace;word-break:break-all}</style>")
    return style + '<script type="module">' + bundle.replace("</script", "<\\/script") + "</script>"


def _html_renderer(spec: dict, **_kwargs) -> dict:
    return {"text/html": spec_html(spec)}


def renders_offline() -> bool:
    """True when the active chart renderer gives finished text (inline SVG or the report's HTML), which
    can be made on another thread; False for a widget, which belongs to the kernel's own thread."""
    return alt.renderers.active in ("svg", HTML_RENDERER)


def use_inline_svg() -> None:
    """Render charts as inline SVG (vl-convert): the notebook and its HTML need no JavaScript or network."""
    alt.renderers.enable("svg")


def use_charts(mode: str) -> None:
    """``svg`` (static), ``html`` (interactive with its JavaScript inline in the page, plus an SVG
    fallback: the offline report) or ``interactive`` (a JupyterLab widget that ships its JavaScript)."""
    if mode == "svg":
        use_inline_svg()
    elif mode == "html":
        if HTML_RENDERER not in alt.renderers.names():
            alt.renderers.register(HTML_RENDERER, _html_renderer)
        alt.renderers.enable(HTML_RENDERER)
    else:
        use_offline_widgets()


def use_offline_widgets() -> None:
    """Charts as JupyterLab widgets whose Vega libraries come from vl-convert, not a CDN (needs
    ``anywidget``, in the ``lab`` extra); without it, the inline ``html`` renderer."""
    try:
        import anywidget  # noqa: F401
    except ImportError:
        use_charts("html")
        return
    # SVG rather than canvas: chart text stays selectable and searchable in the notebook.
    alt.renderers.enable("jupyter", offline=True, embed_options={"renderer": "svg", "actions": False})


def to_svg(chart: alt.TopLevelMixin) -> str:
    """The chart as an SVG string (vl-convert; no browser, no network)."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart.to_dict())
