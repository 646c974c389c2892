"""Every timeline chart by name: each queries its frames and draws them (frames, focus and charts together)."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import altair as alt
from pyspark.sql import DataFrame

from toolkit.viz.charts import (
    ingest_chart,
    migration_chart,
    offset_chart,
    rebalance_chart,
    swimlane_chart,
    task_lane_chart,
)
from toolkit.viz.focus import incident_window
from toolkit.viz.frames import (
    ScopedFrames,
    TimeWindow,
    finding_frame,
    generation_frame,
    ingest_frame,
    migration_frame,
    process_run_frame,
    rebalance_frame,
    task_event_frame,
    thread_state_frame,
)
from toolkit.viz.panels import Focus


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
