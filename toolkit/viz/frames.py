"""Spark side of the charts: timeline tables -> bounded pandas frames.

``*_frame(timeline, ...)`` helpers run a small Spark aggregation or a ``limit``-ed selection and return a
**bounded** pandas frame (never raw lines). Each row that rests on a log line carries ``evidence``
(``source:line_no  text``) so a tooltip shows the exact line. :class:`ScopedFrames` keeps the frames a report
draws for one scope, each queried once.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Callable, Iterable, Sequence

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from toolkit import utc


#: Default row limit of the frame helpers (per frame).
DEFAULT_LIMIT = 2000
#: Row limit of the process-run frame (a run is one start and one end per host).
PROCESS_RUN_LIMIT = 500
#: Evidence text is cut to this many characters in tooltips and tables.
EVIDENCE_CHARS = 220


TimeWindow = tuple[datetime | str | None, datetime | str | None] | None


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
