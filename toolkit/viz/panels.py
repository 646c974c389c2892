"""What every time chart is drawn with: wall-clock time axes, the panels of a broken time axis, the
host filter, the row bound and the placing of point labels.

Times: Spark hands back naive UTC timestamps (the session time zone is UTC). Charts show wall-clock
time in a chosen zone (``tz``) on a ``utc`` scale, so the rendering machine's own zone never shifts
them (vl-convert and browsers otherwise parse naive ISO strings as local time).

Frames above :data:`MAX_CHART_ROWS` are aggregated per lane and time bucket before drawing
(:func:`bounded`) instead of hitting Altair's max-rows error.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Sequence

import altair as alt
import pandas as pd


#: Altair refuses to embed more than 5000 rows by default; stay under it by aggregating.
MAX_CHART_ROWS = 4000

CHART_WIDTH = 760


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
