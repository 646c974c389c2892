"""Timeline tables -> bounded pandas frames -> Altair charts.

Two halves, kept apart on purpose:

* ``*_frame(timeline, ...)`` helpers (:mod:`toolkit.viz.frames`) run a small Spark aggregation or a
  ``limit``-ed selection and return a **bounded** pandas frame (never raw lines). Each row that rests on a
  log line carries ``evidence`` (``source:line_no  text``) so a tooltip shows the exact line.
* ``*_chart(frame, ...)`` functions (:mod:`toolkit.viz.charts`, drawn with :mod:`toolkit.viz.panels`) take
  those frames and return Altair charts. They never touch Spark, so they are unit-tested on small hand-made
  frames.

:mod:`toolkit.viz.focus` finds where the charts open (the incident window), :mod:`toolkit.viz.builders`
draws every chart of a timeline by name, and :mod:`toolkit.viz.runtime` renders them (static SVG, inline
Vega for the offline HTML report, or a JupyterLab widget).

This package's face: every public name of those modules is importable from ``toolkit.viz``.
"""

from toolkit.viz.frames import (
    DEFAULT_LIMIT,
    EVIDENCE_CHARS,
    PROCESS_RUN_LIMIT,
    ScopedFrames,
    TimeWindow,
    finding_frame,
    generation_frame,
    ingest_frame,
    migration_frame,
    offset_frame,
    process_run_frame,
    rebalance_frame,
    task_event_frame,
    thread_state_frame,
)
from toolkit.viz.focus import (
    FOCUS_BREAK,
    FOCUS_BREAK_SHARE,
    FOCUS_MARGIN,
    FOCUS_MIN_MARGIN,
    MAX_FOCUS_RANGES,
    finding_window,
    incident_window,
)
from toolkit.viz.panels import (
    CHART_WIDTH,
    Focus,
    HOST_FILTER,
    LABEL_LEVELS,
    LABEL_PRIORITY,
    LANE_HEIGHT,
    MAX_CHART_ROWS,
    bounded,
)
from toolkit.viz.charts import (
    ACTIVE_STEP,
    CATEGORY_COLOURS,
    CATEGORY_SHAPES,
    MIGRATION_STEP_COLOURS,
    NO_TABLE,
    WRITE_STEP_MARKERS,
    ingest_chart,
    migration_chart,
    migration_summary,
    offset_chart,
    rebalance_chart,
    swimlane_chart,
    task_lane_chart,
)
from toolkit.viz.builders import (
    ChartBuilder,
    task_lanes_for,
    timeline_chart_builders,
    timeline_charts,
)
from toolkit.viz.runtime import (
    HTML_CHART_MARKER,
    HTML_RENDERER,
    renders_offline,
    spec_html,
    to_svg,
    use_charts,
    use_inline_svg,
    use_offline_widgets,
    vega_runtime_html,
)

__all__ = [
    "ACTIVE_STEP",
    "CATEGORY_COLOURS",
    "CATEGORY_SHAPES",
    "CHART_WIDTH",
    "ChartBuilder",
    "DEFAULT_LIMIT",
    "EVIDENCE_CHARS",
    "FOCUS_BREAK",
    "FOCUS_BREAK_SHARE",
    "FOCUS_MARGIN",
    "FOCUS_MIN_MARGIN",
    "Focus",
    "HOST_FILTER",
    "HTML_CHART_MARKER",
    "HTML_RENDERER",
    "LABEL_LEVELS",
    "LABEL_PRIORITY",
    "LANE_HEIGHT",
    "MAX_CHART_ROWS",
    "MAX_FOCUS_RANGES",
    "MIGRATION_STEP_COLOURS",
    "NO_TABLE",
    "PROCESS_RUN_LIMIT",
    "ScopedFrames",
    "TimeWindow",
    "WRITE_STEP_MARKERS",
    "bounded",
    "finding_frame",
    "finding_window",
    "generation_frame",
    "incident_window",
    "ingest_chart",
    "ingest_frame",
    "migration_chart",
    "migration_frame",
    "migration_summary",
    "offset_chart",
    "offset_frame",
    "process_run_frame",
    "rebalance_chart",
    "rebalance_frame",
    "renders_offline",
    "spec_html",
    "swimlane_chart",
    "task_event_frame",
    "task_lane_chart",
    "task_lanes_for",
    "thread_state_frame",
    "timeline_chart_builders",
    "timeline_charts",
    "to_svg",
    "use_charts",
    "use_inline_svg",
    "use_offline_widgets",
    "vega_runtime_html",
]
