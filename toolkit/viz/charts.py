"""Chart side: bounded pandas frames -> Altair charts of the timeline.

Each ``*_chart(frame, ...)`` takes a frame of :mod:`toolkit.viz.frames` and returns an Altair chart. They
never touch Spark, so they are unit-tested on small hand-made frames.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

# Charts read the panel being drawn through the module: _paneled rebinds it while a chart is built.
from toolkit.viz import panels
from toolkit.viz.panels import (
    CHART_WIDTH,
    HOST_FILTER,
    LANE_HEIGHT,
    Focus,
    _by_host,
    _empty,
    _HOSTS_OF,
    _in_focus,
    _interactive,
    _lane_axis,
    _overall,
    _paneled,
    _prepare,
    _stagger_labels,
    _thin,
    _x,
    bounded,
)


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
        width=panels._PANEL.width, height=max(60, 26 * max(len(y_lanes), 1)), title=title)
    _HOSTS_OF[id(chart)] = list(hosts)
    return _interactive(chart, hosts) if interactive else chart


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
    chart = alt.layer(*layers).properties(width=panels._PANEL.width, height=max(80, LANE_HEIGHT * len(lanes)), title=title)
    _HOSTS_OF[id(chart)] = list(hosts)
    return _interactive(chart, hosts) if interactive else chart


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
    chart = alt.layer(bars, labels).properties(width=panels._PANEL.width, height=160, title=title)
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
    y = alt.Y("lane:N", title="table" if panels._PANEL.y_axis else None, sort=lanes, scale=alt.Scale(domain=lanes),
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
        width=panels._PANEL.width, height=max(80, 40 * len(lanes)), title=title)
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
