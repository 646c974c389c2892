"""NiFi repositories and component state in time: bounded frames and Altair charts.

Same split as :mod:`toolkit.viz`: ``*_frame`` helpers run a small, ``limit``-ed Spark selection on the
``nifi_checkpoints`` / ``nifi_state_changes`` / ``process_runs`` tables and return pandas frames with an
``evidence`` column; ``*_chart`` functions draw those frames and never touch Spark.

Charts, per node:

* repositories: one lane per host and repository (FlowFile repository, local state provider), checkpoints as
  points coloured by what happened (checkpointed, failed, recovered, restored, damaged), process starts and ends
  (crash / clean) as rules;
* component state: per host and component, the state's ``listing.timestamp`` before and after each change (a
  drop or an empty state is a reset), changes coloured by kind, with :func:`state_before_after` as the table that
  goes next to it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import altair as alt
import pandas as pd
from pyspark.sql import functions as F

from toolkit.viz.frames import (
    DEFAULT_LIMIT,
    TimeWindow,
    _evidence_text,
    _filter,
    _finish,
    _to_pandas,
    process_run_frame,
)
from toolkit.viz.panels import CHART_WIDTH, _empty, _prepare, _x, bounded

#: Colours per kind of repository event (the rest are grey).
CHECKPOINT_COLOURS = {
    "checkpointed": "#6a51a3", "wal_checkpointed": "#bcbddc", "checkpoint_started": "#9e9ac8",
    "checkpoint_failed": "#d62728", "journal_poisoned": "#a50f15", "journal_truncated": "#fb6a4a",
    "journal_nul_bytes": "#fb6a4a", "snapshot_empty": "#fb6a4a", "orphaned": "#fdd0a2", "orphans_dropped": "#fd8d3c",
    "recovery_started": "#74c476", "recovered": "#31a354", "restored": "#006d2c", "snapshot_recovered": "#a1d99b",
    "journal_recovered": "#c7e9c0", "snapshot": "#636363", "journal": "#969696", "snapshot_partial": "#bdbdbd",
}
STATE_COLOURS = {
    "first_seen": "#9ecae1", "updated": "#3182bd", "listed": "#6baed6", "cleared": "#d62728",
    "regressed": "#d62728", "not_carried_over": "#a50f15", "reset_detected": "#e7298a", "deleted": "#636363",
    "save_failed": "#fd8d3c", "read_failed": "#fd8d3c", "clear_failed": "#fd8d3c",
}
RESET_KINDS = ("cleared", "regressed", "not_carried_over", "reset_detected")


def _colour_scale(colours: dict[str, str], present: Sequence[str]) -> alt.Scale:
    domain = [k for k in colours if k in set(present)] + sorted(set(present) - set(colours))
    return alt.Scale(domain=domain, range=[colours.get(k, "#7f7f7f") for k in domain])


# --------------------------------------------------------------------------- Spark side: bounded frames


def checkpoint_frame(tl, hosts: Sequence[str] | None = None, window: TimeWindow = None,
                     limit: int = DEFAULT_LIMIT) -> pd.DataFrame:
    """Repository life-cycle rows (logs and capture facts) with their evidence line."""
    df = _filter(tl.nifi_checkpoints, hosts=hosts, window=window).where(F.col("ts").isNotNull())
    df = df.select("host", "run_id", "repository", "ts", "kind", "records", "swap_files", "duration_ms",
                   "max_transaction_id", "origin", "path", "problem", "source", "line_no")
    return _finish(_to_pandas(_evidence_text(tl, df), limit, ["host", "ts"]))


def state_change_frame(tl, hosts: Sequence[str] | None = None, window: TimeWindow = None,
                       limit: int = DEFAULT_LIMIT) -> pd.DataFrame:
    """Component-state changes (logs and the local state provider's log on disk) with their evidence."""
    df = _filter(tl.nifi_state_changes, hosts=hosts, window=window).where(F.col("ts").isNotNull())
    df = df.select("host", "component_type", "component_id", "ts", "kind", "origin", "state_version",
                   "entries_before", "entries_after", "listing_before", "listing_after", "records", "detail",
                   "source", "line_no")
    pdf = _finish(_to_pandas(_evidence_text(tl, df), limit, ["host", "component_id", "ts"]))
    if not pdf.empty:
        # A component id names the same processor in logs and on disk: carry the type the logs give.
        types = pdf.dropna(subset=["component_type"]).groupby("component_id")["component_type"].first()
        pdf["component_type"] = pdf["component_type"].fillna(pdf["component_id"].map(types))
        pdf["component"] = [f"{t or 'component'}[{str(c)[:8]}]" for t, c in zip(pdf["component_type"],
                                                                              pdf["component_id"])]
    return pdf


def _nifi_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The NiFi rows of a :func:`~toolkit.viz.process_run_frame`."""
    return runs[runs["product"] == "nifi"] if not runs.empty else runs


def state_before_after(states: pd.DataFrame) -> pd.DataFrame:
    """One row per change: the component's state before and after it (entries, ``listing.timestamp``)."""
    cols = ["host", "component", "ts", "kind", "origin", "entries_before", "entries_after", "listing_before",
            "listing_after", "detail", "evidence"]
    if states.empty:
        return pd.DataFrame(columns=cols)
    keep = states[~states["kind"].isin(["listed"])]
    return keep[[c for c in cols if c in keep.columns]].reset_index(drop=True)


# --------------------------------------------------------------------------- charts


def repository_chart(checkpoints: pd.DataFrame, runs: pd.DataFrame | None = None, tz: str = "UTC",
                     title: str = "NiFi repositories: checkpoints, restores and restarts per node") -> alt.Chart:
    """One lane per host and repository; points per checkpoint/recovery event, rules at process starts/ends."""
    if checkpoints.empty:
        return _empty(title)
    cp = checkpoints.copy()
    cp["lane"] = cp["host"].astype(str) + " · " + cp["repository"].fillna("unknown").astype(str)
    cp = _prepare(bounded(cp, ["lane", "kind"], "ts"), ["ts"], tz)
    lane_y = alt.Y("lane:N", title=None, sort=None, axis=alt.Axis(labelLimit=320))
    layers = [alt.Chart(cp).mark_point(filled=True, size=70).encode(
        x=_x("ts", tz), y=lane_y,
        color=alt.Color("kind:N", title="event", scale=_colour_scale(CHECKPOINT_COLOURS, cp["kind"].unique())),
        shape=alt.Shape("origin:N", title="from", scale=alt.Scale(domain=["log", "capture"],
                                                                 range=["circle", "square"])),
        tooltip=["host:N", "repository:N", "kind:N", alt.Tooltip("ts_text:N", title="at"), "records:Q",
                 "duration_ms:Q", "problem:N", "evidence:N"])]
    if runs is not None and not runs.empty:
        starts = _prepare(runs, ["start", "end"], tz)
        layers.append(alt.Chart(starts).mark_rule(strokeWidth=1, color="#2ca02c").encode(
            x=_x("start", tz), tooltip=["host:N", alt.Tooltip("start_text:N", title="NiFi started"), "version:N"]))
        ends = starts[starts["end"].notna()].copy()
        if not ends.empty:
            ends["kind"] = ends["end_kind"].fillna("unknown")
            layers.append(alt.Chart(ends).mark_rule(strokeWidth=2, strokeDash=[4, 2]).encode(
                x=_x("end", tz), color=alt.Color("kind:N", title="process end", scale=alt.Scale(
                    domain=["crash", "clean", "error", "unknown"], range=["#d62728", "#2ca02c", "#ff7f0e", "#7f7f7f"])),
                tooltip=["host:N", "kind:N", alt.Tooltip("end_text:N", title="at"),
                         alt.Tooltip("end_evidence_line:N", title="evidence")]))
    return alt.layer(*layers).resolve_scale(color="independent").properties(
        width=CHART_WIDTH, height=max(60, 28 * cp["lane"].nunique()), title=title)


def state_chart(states: pd.DataFrame, tz: str = "UTC",
                title: str = "NiFi component state: listing.timestamp before and after each change") -> alt.Chart:
    """Per host and component: the stored ``listing.timestamp`` over time, resets marked; other changes as ticks."""
    if states.empty:
        return _empty(title)
    st = states.copy()
    st["lane"] = st["host"].astype(str) + " · " + st["component"].astype(str)
    st = _prepare(st, ["ts", "listing_before", "listing_after"], tz)
    # y: the state after the change; a cleared state has none, so it is drawn at the state it replaced
    st["state_at"] = st["listing_after"].fillna(st["listing_before"])
    st["state_text"] = st["listing_after_text"].where(st["listing_after"].notna(), "(none)")
    with_state = st[st["state_at"].notna()]
    layers = []
    if not with_state.empty:
        base = alt.Chart(with_state).encode(
            x=_x("ts", tz), y=alt.Y("state_at:T", scale=alt.Scale(type="utc"), title="listing.timestamp"))
        layers.append(base.mark_line(color="#9ecae1").encode(detail="lane:N"))
        layers.append(base.mark_point(filled=True, size=80).encode(
            color=alt.Color("kind:N", title="change", scale=_colour_scale(STATE_COLOURS, st["kind"].unique())),
            shape=alt.Shape("lane:N", title="host · component"),
            tooltip=["lane:N", "kind:N", "origin:N", alt.Tooltip("ts_text:N", title="at"),
                     alt.Tooltip("listing_before_text:N", title="before"), alt.Tooltip("state_text:N", title="after"),
                     "entries_before:Q", "entries_after:Q", "evidence:N"]))
    resets = st[st["kind"].isin(RESET_KINDS)]
    if not resets.empty:
        layers.append(alt.Chart(resets).mark_rule(color="#d62728", strokeDash=[4, 2]).encode(
            x=_x("ts", tz), tooltip=["lane:N", "kind:N", alt.Tooltip("ts_text:N", title="at"), "evidence:N"]))
    if not layers:
        return _empty(title)
    return alt.layer(*layers).resolve_scale(color="independent").properties(width=CHART_WIDTH, height=220,
                                                                          title=title)


def nifi_charts(tl, hosts: Sequence[str] | None = None, window: TimeWindow = None,
                tz: str = "UTC", *, runs: pd.DataFrame | None = None,
                states: pd.DataFrame | None = None) -> dict[str, alt.Chart]:
    """The NiFi charts that apply to this timeline, by name (none for a bundle without NiFi state evidence).

    ``runs`` (a :func:`~toolkit.viz.process_run_frame` of the same hosts and window) and ``states`` (a
    :func:`state_change_frame`): frames the caller has queried already; the others are queried here."""
    charts: dict[str, alt.Chart] = {}
    checkpoints = checkpoint_frame(tl, hosts=hosts, window=window)
    if not checkpoints.empty:
        runs = process_run_frame(tl, hosts=hosts, window=window) if runs is None else runs
        charts["nifi_repositories"] = repository_chart(checkpoints, _nifi_runs(runs), tz=tz)
    states = state_change_frame(tl, hosts=hosts, window=window) if states is None else states
    if not states.empty:
        charts["nifi_state"] = state_chart(states, tz=tz)
    return charts


#: Section titles for the report.
TITLES = {"nifi_repositories": "NiFi repositories: checkpoints, restores and restarts",
          "nifi_state": "NiFi component state before and after each change"}


def show_nifi_sections(tl, hosts: Sequence[str] | None = None, window: TimeWindow = None, tz: str = "UTC",
                       display: Callable[..., Any] | None = None, runs: pd.DataFrame | None = None) -> None:
    """Notebook/report helper: each NiFi chart under its heading, the state table next to the state chart
    (``display``: where they go, IPython's ``display`` unless given; ``runs``: as for :func:`nifi_charts`)."""
    import html

    from IPython.display import HTML
    from IPython.display import display as ipython_display

    display = display or ipython_display

    states = state_change_frame(tl, hosts=hosts, window=window)  # drawn, then listed: queried once
    for name, chart in nifi_charts(tl, hosts=hosts, window=window, tz=tz, runs=runs, states=states).items():
        display(HTML(f"<h3>{html.escape(TITLES.get(name, name))}</h3>"))
        display(chart)
        if name == "nifi_state":
            display(state_before_after(states))
