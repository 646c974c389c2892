"""Interactive exploration (``notebooks/explore.ipynb``): selectors that redraw linked charts and evidence."""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from toolkit import utc
from toolkit.report.investigation import ReportView


class Explorer:
    """Linked charts and an evidence table over one investigation, redrawn from widget choices.

    The chart frames are collected once (bounded) and filtered in pandas on every redraw, so a
    click costs milliseconds; only the evidence table asks Spark again (with a ``limit``).
    """

    def __init__(self, inv: ReportView, limit: int = 4000) -> None:
        from pyspark.sql import functions as F

        from toolkit import viz

        self.inv = inv
        tl = inv.timeline
        self.task_events = viz.task_event_frame(tl, limit=limit)
        self.states = viz.thread_state_frame(tl, limit=limit)
        self.runs = viz.process_run_frame(tl)
        self.generations = viz.generation_frame(tl)
        self.findings = viz.finding_frame(inv.findings)
        kinds = utc.to_pandas(tl.events.where(F.col("event").isNotNull()).groupBy("event").count()
                              .orderBy(F.desc("count")).limit(300))
        self.event_kinds: list[str] = sorted(kinds["event"])
        self.hosts: list[str] = inv.analysis.ingest.log_hosts
        self.tasks: list[str] = sorted(self.task_events["task_id"].dropna().unique()) if not self.task_events.empty else []
        times = pd.concat([pd.to_datetime(self.task_events.get("start", pd.Series(dtype="datetime64[ns]"))),
                           pd.to_datetime(self.states.get("start", pd.Series(dtype="datetime64[ns]")))]).dropna()
        self.span = (times.min(), times.max()) if not times.empty else (None, None)
        self.focus = viz.incident_window(inv.findings, self.runs)

    def evidence(self, hosts: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
                 kinds: Sequence[str] | None = None, window: tuple | None = None, limit: int = 200) -> pd.DataFrame:
        """Classified log lines for the selection, oldest first (at most ``limit``)."""
        from pyspark.sql import functions as F

        ev = self.inv.timeline.events.where(F.col("event").isNotNull())
        if hosts:
            ev = ev.where(F.col("host").isin(list(hosts)))
        if tasks:
            ev = ev.where(F.col("task_id").isin(list(tasks)))
        if kinds:
            ev = ev.where(F.col("event").isin(list(kinds)))
        if window and window[0] is not None:
            ev = ev.where(F.col("ts") >= utc.lit(pd.Timestamp(window[0]).to_pydatetime()))
        if window and window[1] is not None:
            ev = ev.where(F.col("ts") <= utc.lit(pd.Timestamp(window[1]).to_pydatetime()))
        pdf = utc.to_pandas(ev.select("ts", "host", "event", "task_id", "source", "line_no", "message")
                              .orderBy("ts", "source", "line_no").limit(limit))
        pdf.insert(0, "where", pdf["source"] + ":" + pdf["line_no"].astype(str))
        return pdf.drop(columns=["source", "line_no"])

    def charts(self, hosts: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
               window: tuple | None = None):
        """Thread swimlanes over task lanes on one shared time axis."""
        import altair as alt

        from toolkit import viz

        def cut(frame: pd.DataFrame, time_col: str) -> pd.DataFrame:
            if frame.empty:
                return frame
            keep = pd.Series(True, index=frame.index)
            if hosts and "host" in frame:
                keep &= frame["host"].isin(list(hosts))
            if tasks and "task_id" in frame:
                keep &= frame["task_id"].isin(list(tasks))
            if window and window[0] is not None:
                keep &= pd.to_datetime(frame.get("end", frame[time_col])).fillna(pd.Timestamp.max) >= pd.Timestamp(window[0])
            if window and window[1] is not None:
                keep &= pd.to_datetime(frame[time_col]) <= pd.Timestamp(window[1])
            return frame[keep]

        tz = self.inv.params.timezone
        # The window selector decides the range; without one the charts open on the incident.
        focus = None if window else self.focus
        top = viz.swimlane_chart(cut(self.states, "start"), self.generations, cut(self.runs, "start"), tz=tz,
                                 focus=focus, interactive=False)
        bottom = viz.task_lane_chart(cut(self.task_events, "start"), self.findings, tz=tz, focus=focus,
                                     interactive=False)
        return alt.vconcat(top, bottom).resolve_scale(color="independent", shape="independent")

    def draw(self, hosts: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
             kinds: Sequence[str] | None = None, window: tuple | None = None) -> None:
        """Display the charts and the evidence table for a selection (also works without widgets)."""
        from IPython.display import display

        from toolkit.report.sections import section

        with section("the charts", display):
            display(self.charts(hosts, tasks, window))
        with section("the evidence table", display):
            display(self.evidence(hosts, tasks, kinds, window))

    def widget(self):
        """Selectors for hosts, tasks, event kinds and a time window; every change redraws the output."""
        import ipywidgets as w

        hosts = w.SelectMultiple(options=self.hosts, description="hosts", rows=min(6, max(len(self.hosts), 1)))
        tasks = w.SelectMultiple(options=self.tasks, description="tasks", rows=min(6, max(len(self.tasks), 1)))
        kinds = w.SelectMultiple(options=self.event_kinds, description="events", rows=6)
        controls = [hosts, tasks, kinds]
        window = None
        if self.span[0] is not None and self.span[0] < self.span[1]:
            steps = pd.date_range(self.span[0], self.span[1], periods=60)
            window = w.SelectionRangeSlider(options=[(t.strftime("%H:%M:%S"), t) for t in steps],
                                            index=(0, len(steps) - 1), description="time (UTC)",
                                            layout=w.Layout(width="900px"))
            controls.append(window)
        out = w.Output()

        def redraw(_change: Any = None) -> None:
            with out:
                out.clear_output(wait=True)
                self.draw(list(hosts.value) or None, list(tasks.value) or None, list(kinds.value) or None,
                          window.value if window is not None else None)

        for c in controls:
            c.observe(redraw, names="value")
        redraw()
        return w.VBox([w.HBox([hosts, tasks, kinds]), *( [window] if window is not None else []), out])
