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

from datetime import datetime
from typing import Iterable, Sequence

import altair as alt
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

#: Altair refuses to embed more than 5000 rows by default; stay under it by aggregating.
MAX_CHART_ROWS = 4000
#: Default row limit of the frame helpers (per frame).
DEFAULT_LIMIT = 2000
#: Evidence text is cut to this many characters in tooltips and tables.
EVIDENCE_CHARS = 220

CHART_WIDTH = 900

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
            t0 = F.lit(start).cast("timestamp") if start else None
            t1 = F.lit(end).cast("timestamp") if end else None
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
    pdf = df.orderBy(*order).limit(limit).toPandas()
    return pdf


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
    agg = (df.groupBy("group_id", "generation")
           .agg(F.min(F.coalesce("joined", "synced")).alias("start"),
                F.max(F.coalesce("synced", "joined")).alias("end"),
                F.countDistinct("host").alias("hosts"),
                F.max("members").alias("members")))
    return _to_pandas(agg, limit, ["start"])


def process_run_frame(tl, hosts: Sequence[str] | None = None, window: TimeWindow = None,
                      limit: int = 500) -> pd.DataFrame:
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
    null_ts, null_str, null_long = (F.lit(None).cast(t) for t in ("timestamp", "string", "long"))

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
    events = parts[0]
    for p in parts[1:]:
        events = events.unionByName(p)
    events = _filter(events, hosts=hosts, tasks=tasks, window=window, time_cols=("start", "end"))
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
    ``restore start``, ``restore end``), restore_id (pairs a restoration's start and end), evidence.
    """
    s = F.col
    cp = (tl.checkpoints.where(s("offset").isNotNull())
          .select("host", "task_id", "topic", "partition", F.coalesce("ts", "file_mtime").alias("ts"), "offset",
                  F.concat(F.lit("checkpoint "), s("kind")).alias("kind"), F.lit(None).cast("string").alias("restore_id"),
                  "source", "line_no"))
    rs = tl.restorations.withColumn(
        "restore_id", F.concat_ws("/", "host", "task_id", "topic", s("partition").cast("string"),
                                  s("start").cast("string")))
    rs_start = rs.select("host", "task_id", "topic", "partition", s("start").alias("ts"),
                         s("start_offset").alias("offset"), F.lit("restore start").alias("kind"), "restore_id",
                         F.coalesce("start_source", "source").alias("source"),
                         F.coalesce("start_line_no", "line_no").alias("line_no"))
    rs_end = rs.select("host", "task_id", "topic", "partition", s("end").alias("ts"), s("end_offset").alias("offset"),
                       F.lit("restore end").alias("kind"), "restore_id", "source", "line_no")
    df = _filter(cp.unionByName(rs_start).unionByName(rs_end), hosts=hosts, tasks=tasks)
    df = df.where(s("ts").isNotNull() & s("offset").isNotNull())
    pdf = _finish(_to_pandas(_evidence_text(tl, df), limit, ["task_id", "ts"]))
    if not pdf.empty:
        pdf["changelog"] = pdf["topic"].astype(str) + "-" + pdf["partition"].astype("Int64").astype(str)
    else:
        pdf["changelog"] = pd.Series(dtype="object")
    return pdf


def rebalance_frame(tl, hosts: Sequence[str] | None = None, window: TimeWindow = None,
                    bucket_seconds: int | None = None, limit: int = DEFAULT_LIMIT) -> pd.DataFrame:
    """Joins per host and time bucket with the highest generation reached (rebalance activity)."""
    df = _filter(tl.generations, hosts=hosts, window=window, time_cols=("joined",))
    df = df.where(F.col("joined").isNotNull())
    bucket = bucket_seconds or _bucket_for(df, "joined")
    agg = (df.groupBy("host", F.window("joined", f"{bucket} seconds").start.alias("bucket"))
           .agg(F.count(F.lit(1)).alias("joins"), F.max("generation").alias("generation"),
                F.min("generation").alias("first_generation")))
    pdf = _to_pandas(agg, limit, ["bucket", "host"])
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
    df = df.select("host", "ts", level.alias("level"), lines.alias("lines"))
    bucket = bucket_seconds or _bucket_for(df.where(F.col("ts").isNotNull()), "ts")
    # Records without a timestamp still count: they go to a bucket at the host's first time.
    agg = (df.groupBy("host", F.window(F.coalesce("ts", F.lit("1970-01-01").cast("timestamp")),
                                       f"{bucket} seconds").start.alias("bucket"), "level")
           .agg(F.sum("lines").alias("lines")))
    pdf = _to_pandas(agg, limit, ["bucket", "host", "level"])
    pdf["bucket_seconds"] = bucket
    return pdf


def _bucket_for(df: DataFrame, col: str, target_buckets: int = 120) -> int:
    """A round bucket size (seconds) giving about ``target_buckets`` buckets over the column's span."""
    row = df.agg(F.min(col).alias("a"), F.max(col).alias("b")).first()
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
# Chart side: pandas -> Altair
# --------------------------------------------------------------------------------------------

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
    return out


def _x(field: str, tz: str, title: str | None = None) -> alt.X:
    return alt.X(f"{field}:T", scale=alt.Scale(type="utc"), title=title or f"time ({tz})",
                 axis=alt.Axis(format="%H:%M:%S", labelAngle=0))


def _empty(title: str) -> alt.Chart:
    """A visible placeholder instead of a missing chart (so the report says why it is empty)."""
    return (alt.Chart(pd.DataFrame({"note": [f"{title}: nothing to draw"]}))
            .mark_text(align="left", fontSize=13).encode(text="note:N").properties(width=CHART_WIDTH, height=30))


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


def swimlane_chart(states: pd.DataFrame, generations: pd.DataFrame | None = None,
                   runs: pd.DataFrame | None = None, tz: str = "UTC", title: str = "Threads per host") -> alt.Chart:
    """(a) Swimlanes per host/thread coloured by state; generations as bands; crashes and clean stops marked."""
    if states.empty and (runs is None or runs.empty):
        return _empty(title)
    layers = []
    st = _prepare(bounded(states, ["host", "thread"], "start"), ["start", "end"], tz)
    if not st.empty:
        st["end"] = st["end"].fillna(st["start"].max())
        st["lane"] = st["host"].astype(str) + " · " + st["thread"].astype(str).str.replace(r"^.*-(?=StreamThread|StateUpdater|GlobalStreamThread)", "", regex=True)
    lane_y = alt.Y("lane:N", title=None, sort=None, axis=alt.Axis(labelLimit=320))
    if generations is not None and not generations.empty:
        gen = _prepare(generations, ["start", "end"], tz)
        gen["end"] = gen["end"].where(gen["end"] > gen["start"], gen["start"] + pd.Timedelta(milliseconds=500))
        layers.append(alt.Chart(gen).mark_rect(opacity=0.15, color="#ff7f0e").encode(
            x=_x("start", tz), x2="end:T",
            tooltip=[alt.Tooltip("generation:Q"), alt.Tooltip("group_id:N"), alt.Tooltip("start_text:N", title="from"),
                     alt.Tooltip("end_text:N", title="to")]))
        layers.append(alt.Chart(gen).mark_text(align="left", dy=-4, fontSize=9, color="#a0522d", baseline="top")
                      .encode(x=_x("start", tz), y=alt.value(0), text=alt.Text("generation:Q", format="d")))
    if not st.empty:
        layers.append(alt.Chart(st).mark_bar(height=14).encode(
            x=_x("start", tz), x2="end:T", y=lane_y,
            color=alt.Color("state:N", title="thread state"),
            tooltip=["host:N", "thread:N", "state:N", alt.Tooltip("start_text:N", title="from"),
                     alt.Tooltip("end_text:N", title="to"), "evidence:N"]))
    if runs is not None and not runs.empty:
        rn = _prepare(runs[runs["end"].notna()], ["end", "start"], tz)
        if not rn.empty:
            rn["kind"] = rn["end_kind"].fillna("unknown")
            layers.append(alt.Chart(rn).mark_rule(strokeWidth=2, strokeDash=[4, 2]).encode(
                x=_x("end", tz), color=alt.Color("kind:N", title="process end",
                                                 scale=alt.Scale(domain=["crash", "clean", "error", "unknown"],
                                                                 range=["#d62728", "#2ca02c", "#ff7f0e", "#7f7f7f"])),
                tooltip=["host:N", "kind:N", alt.Tooltip("end_text:N", title="at"),
                         alt.Tooltip("end_evidence_line:N", title="evidence")]))
            layers.append(alt.Chart(rn).mark_text(angle=270, align="left", dx=4, dy=-4, fontSize=10).encode(
                x=_x("end", tz), y=alt.value(0), text=alt.Text("label:N")).transform_calculate(
                label="datum.host + ' ' + datum.kind"))
    return alt.layer(*layers).resolve_scale(color="independent").properties(
        width=CHART_WIDTH, height=max(60, 22 * max(st["lane"].nunique() if not st.empty else 1, 1)), title=title)


def task_lane_chart(events: pd.DataFrame, findings: pd.DataFrame | None = None, tz: str = "UTC",
                    title: str = "Tasks: phases, locks, checkpoints, restores, wipes") -> alt.Chart:
    """(b) One lane per task and host: phases and restores as bars, everything else as labelled points."""
    if events.empty:
        return _empty(title)
    ev = _prepare(bounded(events, ["lane"], "start", keep=["category"]), ["start", "end"], tz)
    lanes = sorted(ev["lane"].unique())
    y = alt.Y("lane:N", title=None, sort=lanes, axis=alt.Axis(labelLimit=260))
    domain = list(CATEGORY_COLOURS)
    colour = alt.Color("category:N", title="what", scale=alt.Scale(domain=domain, range=list(CATEGORY_COLOURS.values())))
    tip = ["lane:N", "category:N", "label:N", "role:N", alt.Tooltip("start_text:N", title="at"), "evidence:N"]
    intervals = ev[ev["category"].isin(["phase", "restore"])].copy()
    points = ev[~ev["category"].isin(["phase", "restore"])].copy()
    layers = []
    if not intervals.empty:
        intervals["end"] = intervals["end"].fillna(ev["start"].max())
        # Restores sit in the lower half of a lane, phases fill it, so both stay visible.
        layers.append(alt.Chart(intervals[intervals["category"] == "phase"]).mark_bar(height=16, opacity=0.55).encode(
            x=_x("start", tz), x2="end:T", y=y, color=colour, tooltip=tip))
        layers.append(alt.Chart(intervals[intervals["category"] == "restore"]).mark_bar(height=6, yOffset=6).encode(
            x=_x("start", tz), x2="end:T", y=y, color=colour, tooltip=tip))
    if not points.empty:
        shapes = alt.Shape("category:N", title="what", scale=alt.Scale(
            domain=["lock", "lock-failed", "checkpoint", "checkpoint-file", "wipe", "cleanup", "process", "crash"],
            range=["circle", "triangle-down", "diamond", "diamond", "cross", "square", "triangle-right", "triangle-up"]))
        layers.append(alt.Chart(points).mark_point(size=110, filled=True, opacity=0.9).encode(
            x=_x("start", tz), y=y, color=colour, shape=shapes, tooltip=tip))
        # Label the events a reader looks for first: checkpoints, crashes, restarts, wipes, failed locks.
        key = _stagger_labels(points[points["category"].isin(["checkpoint", "crash", "wipe", "lock-failed", "process"])])
        for dy in LABEL_LEVELS:
            level = key[key["label_dy"] == dy]
            if not level.empty:
                layers.append(alt.Chart(level).mark_text(align="left", dx=5, dy=dy, fontSize=9).encode(
                    x=_x("start", tz), y=y, text="short:N"))
    if findings is not None and not findings.empty and findings["ts"].notna().any():
        fm = _prepare(findings[findings["ts"].notna()], ["ts"], tz)
        fm["lane"] = fm["task_id"].astype(str) + " @ " + fm["host"].astype(str)
        fm = fm[fm["lane"].isin(lanes)]
        if not fm.empty:
            layers.append(alt.Chart(fm).mark_point(shape="M-1,-1L1,1M-1,1L1,-1", size=260, strokeWidth=3,
                                                   color=CATEGORY_COLOURS["finding"]).encode(
                x=_x("ts", tz), y=y,
                tooltip=["detector:N", "title:N", "confidence:N", alt.Tooltip("ts_text:N", title="at"), "evidence:N"]))
    return alt.layer(*layers).properties(width=CHART_WIDTH, height=max(80, 46 * len(lanes)), title=title)


#: Text rows per lane for point labels; labels that fit in none of them are left to the tooltip.
LABEL_LEVELS = (-10, 12, -21)
_CHAR_PX = 5.2  # average width of a 9px label character


def _stagger_labels(points: pd.DataFrame, max_labels: int = 80) -> pd.DataFrame:
    """Place point labels on up to three text rows per lane so neighbours in time do not overprint."""
    if points.empty:
        return points.assign(label_dy=pd.Series(dtype="float64"), short=pd.Series(dtype="object"))
    pts = points.sort_values("start").copy()
    # Keep labels short: the changelog and the evidence line are in the tooltip.
    pts["short"] = pts["label"].astype(str).str.replace(r"^(checkpoint \w+ -?\d+).*$", r"\1", regex=True).str[:40]
    times = pts["start"].astype("int64")
    span = max(int(times.max() - times.min()), 1)
    per_px = span / CHART_WIDTH
    kept, dys = [], []
    for lane, grp in pts.groupby("lane", sort=False):
        free_from = [float("-inf")] * len(LABEL_LEVELS)
        for idx, t, text in zip(grp.index, times[grp.index], grp["short"]):
            for level, start_free in enumerate(free_from):
                if t >= start_free:
                    free_from[level] = t + (len(text) * _CHAR_PX + 12) * per_px
                    kept.append(idx)
                    dys.append(LABEL_LEVELS[level])
                    break
    out = pts.loc[kept].assign(label_dy=dys)
    return out.head(max_labels)


def offset_chart(offsets: pd.DataFrame, tz: str = "UTC",
                 title: str = "Changelog offsets: checkpoints vs restorations") -> alt.Chart:
    """(c) Checkpoint offsets vs restore start/end offsets; ranges never restored from the checkpoint shaded.

    The shaded band of a restoration spans from the last checkpoint offset seen before it (the
    offset the store claims to hold) to the offset the restore started at, when those differ: the
    records in between were neither in the store nor replayed (or were replayed on top of it).
    """
    if offsets.empty:
        return _empty(title)
    off = _prepare(offsets, ["ts"], tz)
    off["series"] = off["host"].astype(str) + " " + off["task_id"].astype(str) + " " + off["changelog"].astype(str)
    gaps = []
    for rid, grp in off[off["restore_id"].notna()].groupby("restore_id"):
        start = grp[grp["kind"] == "restore start"]
        end = grp[grp["kind"] == "restore end"]
        if start.empty:
            continue
        s0 = start.iloc[0]
        before = off[(off["series"] == s0["series"]) & off["kind"].str.startswith("checkpoint") & (off["ts"] <= s0["ts"])]
        if before.empty:
            continue
        ck = before.sort_values("ts").iloc[-1]
        end_offset = end.iloc[0]["offset"] if not end.empty else s0["offset"]
        low, high = sorted([ck["offset"], s0["offset"]])
        if high == low and end_offset != s0["offset"]:
            # The restore started from the checkpoint: shade what was replayed on top of the store.
            low, high, why = s0["offset"], end_offset, "replayed on top of the checkpointed store"
        else:
            why = "between checkpoint and restore start"
        if high != low:
            gaps.append({"series": s0["series"], "ts": ck["ts"], "ts_end": end.iloc[0]["ts"] if not end.empty else s0["ts"],
                         "low": low, "high": high, "why": why, "records": int(abs(high - low))})
    layers = []
    if gaps:
        g = pd.DataFrame(gaps)
        layers.append(alt.Chart(g).mark_rect(opacity=0.18, color="#d62728").encode(
            x=_x("ts", tz), x2="ts_end:T", y=alt.Y("low:Q", title="offset", scale=alt.Scale(zero=False)), y2="high:Q",
            tooltip=["series:N", "why:N", alt.Tooltip("low:Q", format=","), alt.Tooltip("high:Q", format=","),
                     alt.Tooltip("records:Q", format=",")]))
    base = alt.Chart(off).encode(x=_x("ts", tz), y=alt.Y("offset:Q", title="offset", scale=alt.Scale(zero=False)))
    restores = off[off["restore_id"].notna()]
    if not restores.empty:
        layers.append(alt.Chart(restores).mark_line(strokeWidth=2).encode(
            x=_x("ts", tz), y=alt.Y("offset:Q", scale=alt.Scale(zero=False)), detail="restore_id:N",
            color=alt.Color("series:N", title="host task changelog")))
    layers.append(base.mark_point(size=90, filled=True).encode(
        shape=alt.Shape("kind:N", title="kind"), color=alt.Color("series:N", title="host task changelog"),
        tooltip=["series:N", "kind:N", alt.Tooltip("offset:Q", format=","), alt.Tooltip("ts_text:N", title="at"),
                 "evidence:N"]))
    return alt.layer(*layers).properties(width=CHART_WIDTH, height=260, title=title)


def rebalance_chart(rebalances: pd.DataFrame, tz: str = "UTC", title: str = "Rebalance activity") -> alt.Chart:
    """(d) Group joins per host and time bucket, with the generation reached as a label."""
    if rebalances.empty:
        return _empty(title)
    rb = _prepare(rebalances, ["bucket"], tz)
    bars = alt.Chart(rb).mark_bar().encode(
        x=_x("bucket", tz), y=alt.Y("sum(joins):Q", title="joins"), color=alt.Color("host:N"),
        tooltip=["host:N", alt.Tooltip("bucket_text:N", title="from"), "joins:Q", "first_generation:Q", "generation:Q"])
    labels = alt.Chart(rb).mark_text(dy=-6, fontSize=9).encode(
        x=_x("bucket", tz), y=alt.Y("sum(joins):Q"), text=alt.Text("max(generation):Q", format="d"))
    return alt.layer(bars, labels).properties(width=CHART_WIDTH, height=160, title=title)


#: Substrings that identify the migration steps the gap is measured between.
ACTIVE_STEP = "ACTIVE"
WRITE_STEP_MARKERS = ("WRITE", "PUT", "UPDATE", "COPY", "CHECKPOINT")


def migration_summary(steps: pd.DataFrame) -> pd.DataFrame:
    """Per table: when it became ACTIVE, its first write after that, the gap, and the outcome."""
    rows = []
    if steps.empty:
        return pd.DataFrame(columns=["base_table", "active", "first_write", "gap_s", "errors", "outcome"])
    st = steps.copy()
    st["ts"] = pd.to_datetime(st["ts"])
    key = st["base_table"].fillna(st["table"])
    for table, grp in st.assign(_key=key).groupby("_key"):
        grp = grp.sort_values("ts")
        step = grp["step"].fillna("").str.upper()
        active = grp[step.str.contains(ACTIVE_STEP)]
        t_active = active["ts"].iloc[-1] if not active.empty else pd.NaT
        writes = grp[step.apply(lambda s: any(m in s for m in WRITE_STEP_MARKERS) and ACTIVE_STEP not in s)]
        if pd.notna(t_active):
            writes = writes[writes["ts"] >= t_active]
        t_write = writes["ts"].iloc[0] if not writes.empty else pd.NaT
        errors = int(grp["error_code"].notna().sum() + step.str.contains("FAIL|ERROR").sum())
        outcome = "failed" if errors else ("migrated" if pd.notna(t_write) else "unknown")
        gap = (t_write - t_active).total_seconds() if pd.notna(t_write) and pd.notna(t_active) else None
        rows.append({"base_table": table, "active": t_active, "first_write": t_write, "gap_s": gap,
                     "errors": errors, "outcome": outcome})
    return pd.DataFrame(rows, columns=["base_table", "active", "first_write", "gap_s", "errors", "outcome"])


def migration_chart(steps: pd.DataFrame, tz: str = "UTC",
                    title: str = "NiFi checkpoint-table migration per table") -> alt.Chart:
    """(e) Migration steps per table, the ACTIVE → first write gap as a bar, coloured by outcome."""
    if steps.empty:
        return _empty(title)
    st = _prepare(steps, ["ts"], tz)
    st["lane"] = st["base_table"].fillna(st["table"])
    summary = migration_summary(steps)
    y = alt.Y("lane:N", title="table", sort=sorted(st["lane"].unique()))
    layers = []
    gaps = summary[summary["active"].notna()].copy()
    if not gaps.empty:
        gaps["first_write"] = gaps["first_write"].fillna(pd.to_datetime(steps["ts"]).max())
        gaps = _prepare(gaps, ["active", "first_write"], tz).rename(columns={"base_table": "lane"})
        gaps["gap_label"] = [f"{g:.1f}s to first write" if pd.notna(g) else "no write after ACTIVE" for g in gaps["gap_s"]]
        layers.append(alt.Chart(gaps).mark_bar(height=10, opacity=0.35).encode(
            x=_x("active", tz), x2="first_write:T", y=y,
            color=alt.Color("outcome:N", scale=alt.Scale(domain=["failed", "migrated", "unknown"],
                                                         range=["#d62728", "#2ca02c", "#7f7f7f"])),
            tooltip=["lane:N", "outcome:N", "gap_label:N", alt.Tooltip("active_text:N", title="ACTIVE at")]))
        layers.append(alt.Chart(gaps).mark_text(align="left", dx=4, dy=-10, fontSize=9).encode(
            x=_x("active", tz), y=y, text="gap_label:N"))
    layers.append(alt.Chart(st).mark_point(size=80, filled=True).encode(
        x=_x("ts", tz), y=y, shape=alt.Shape("origin:N"), color=alt.value("#333333"),
        tooltip=["lane:N", "table:N", "step:N", "origin:N", "error_code:N", alt.Tooltip("ts_text:N", title="at"),
                 "evidence:N"]))
    return alt.layer(*layers).properties(width=CHART_WIDTH, height=max(80, 40 * st["lane"].nunique()), title=title)


def ingest_chart(ingest: pd.DataFrame, tz: str = "UTC", title: str = "Lines per host over time") -> alt.Chart:
    """(f) Stacked lines per bucket by level, one row per host, plus the unparsed share per host."""
    if ingest.empty:
        return _empty(title)
    ig = _prepare(ingest, ["bucket"], tz)
    levels = ["ERROR", "WARN", "INFO", "DEBUG", "TRACE", "unparsed", "?"]
    bars = alt.Chart(ig).mark_bar().encode(
        x=_x("bucket", tz), y=alt.Y("sum(lines):Q", title="lines"),
        color=alt.Color("level:N", scale=alt.Scale(domain=levels, range=["#d62728", "#ff7f0e", "#1f77b4", "#9edae5",
                                                                         "#c7c7c7", "#000000", "#bcbd22"])),
        tooltip=["host:N", "level:N", "lines:Q", alt.Tooltip("bucket_text:N", title="from")],
    ).properties(width=CHART_WIDTH - 200, height=70).facet(row=alt.Row("host:N", title=None))
    share = (ig.groupby("host", as_index=False)
             .apply(lambda g: pd.Series({"unparsed_share": g.loc[g["level"] == "unparsed", "lines"].sum()
                                         / max(g["lines"].sum(), 1)}), include_groups=False))
    share_chart = alt.Chart(share).mark_bar(color="#000000").encode(
        y=alt.Y("host:N", title=None), x=alt.X("unparsed_share:Q", title="unparsed share",
                                                scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
        tooltip=["host:N", alt.Tooltip("unparsed_share:Q", format=".1%")]).properties(width=150, height=20 * len(share))
    return alt.vconcat(bars, share_chart).properties(title=title)


def task_lanes_for(tl, tasks: Sequence[str] | None = None, hosts: Sequence[str] | None = None,
                   window: TimeWindow = None, findings: Iterable | None = None, tz: str = "UTC") -> alt.Chart:
    """Convenience: frame + chart for the task lanes of a timeline."""
    return task_lane_chart(task_event_frame(tl, tasks=tasks, hosts=hosts, window=window),
                           finding_frame(findings or []), tz=tz)


def timeline_charts(tl, hosts: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
                    window: TimeWindow = None, findings: Iterable | None = None, tz: str = "UTC",
                    records: DataFrame | None = None) -> dict[str, alt.Chart]:
    """Every chart that applies to this timeline, by name (NiFi-only bundles skip the Kafka charts)."""
    charts: dict[str, alt.Chart] = {}
    states = thread_state_frame(tl, hosts=hosts, window=window)
    runs = process_run_frame(tl, hosts=hosts, window=window)
    if not states.empty or (not runs.empty and (runs["product"] != "nifi").any()):
        charts["threads"] = swimlane_chart(states, generation_frame(tl, hosts=hosts, window=window), runs, tz=tz)
    tasks_pdf = task_event_frame(tl, tasks=tasks, hosts=hosts, window=window)
    if not tasks_pdf.empty:
        charts["tasks"] = task_lane_chart(tasks_pdf, finding_frame(findings or []), tz=tz)
    offsets = offset_frame(tl, tasks=tasks, hosts=hosts)
    if not offsets.empty:
        charts["offsets"] = offset_chart(offsets, tz=tz)
    rebalances = rebalance_frame(tl, hosts=hosts, window=window)
    if not rebalances.empty:
        charts["rebalances"] = rebalance_chart(rebalances, tz=tz)
    steps = migration_frame(tl)
    if not steps.empty:
        charts["migration"] = migration_chart(steps, tz=tz)
    if records is not None:
        charts["ingest"] = ingest_chart(ingest_frame(records, hosts=hosts), tz=tz)
    return charts


def use_inline_svg() -> None:
    """Render charts as inline SVG (vl-convert): the notebook and its HTML need no JavaScript or network."""
    alt.renderers.enable("svg")


def use_charts(mode: str) -> None:
    """``svg`` (static, offline, for reports) or ``interactive`` (Vega-Lite in Jupyter, hover tooltips)."""
    if mode == "svg":
        use_inline_svg()
    else:
        alt.renderers.enable("default")


def to_svg(chart: alt.TopLevelMixin) -> str:
    """The chart as an SVG string (vl-convert; no browser, no network)."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart.to_dict())
