"""The report's sections: HTML fragments, tables and the ``show_*`` notebook helpers.

Every ``show_*`` helper draws its section inside :func:`section`: an exception there (a chart
fed bad input, a query failing) shows one line saying which section failed and why, and the
rest of the report is still drawn. Charts are drawn one by one under the same guard, each in
its place: the timeline charts' data is queried two at a time, and charts are turned into SVG on
a thread of their own (:class:`OrderedDisplay`), but everything is shown in the order given.
"""

from __future__ import annotations

import contextlib
import functools
import html
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import markupsafe
import pandas as pd

from toolkit import utc
from toolkit.detectors.verdict import decide_verdict
from toolkit.report.investigation import ReportView
from toolkit.shipped import shipped_file

#: Folder of the playbooks on this machine (installed copies, else the repository's).
PLAYBOOKS = shipped_file("playbooks/README.md").parent

_SEVERITY_COLOUR = {"critical": "#b00020", "warning": "#b35900", "info": "#35638a", "error": "#6a1b9a"}


def _playbook_file(finding) -> tuple[str, Path | None]:
    rel = getattr(finding, "playbook", "") or f"playbooks/{finding.detector}.md"
    try:
        return rel, shipped_file(rel)
    except ValueError:  # a finding read back from JSON may name anything
        return rel, None


def playbook_link(finding, base: Path | None = None) -> str:
    """A link to the playbook, relative to ``base`` (default: the working directory, where the notebook
    or the report lives), so JupyterLab opens it in a tab and a browser opens it from disk."""
    import os

    rel, local = _playbook_file(finding)
    if local is None or not local.exists():
        return f"<code>{html.escape(rel)}</code>"
    try:
        href = Path(os.path.relpath(local, base or Path.cwd())).as_posix()
    except ValueError:  # another drive on Windows
        href = local.as_uri()
    return f'<a href="{html.escape(href)}" target="_blank">{html.escape(rel)}</a>'


def playbook_html(finding) -> str:
    """The playbook itself, folded under the finding (readable where links cannot be followed)."""
    import mistune

    rel, local = _playbook_file(finding)
    if local is None or not local.exists():
        return ""
    # The playbooks are this package's own Markdown; mistune escapes raw HTML in them.
    body = mistune.html(local.read_text(encoding="utf-8"))
    return (f"<details class='playbook'><summary><b>Playbook</b> <code>{html.escape(rel)}</code> (click to read it "
            f"here)</summary><div style='border-left:3px solid #ccc;padding-left:1em'>{body}</div></details>")


def _impact_text(finding) -> str:
    impact = getattr(finding, "impact", None)
    if impact is None:
        return ""
    return impact.summary if hasattr(impact, "summary") else str(impact.get("summary", ""))


@functools.cache
def _templates() -> Any:
    """The report's Jinja2 templates (``toolkit/report/templates``), escaping every value they are given."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("toolkit.report", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    # playbook_link builds its own (escaped) markup: a link when the playbook is on this machine, else the path.
    env.globals.update(playbook_link=lambda f: markupsafe.Markup(playbook_link(f)), impact_text=_impact_text,
                       colours=_SEVERITY_COLOUR)
    return env


def verdict_html(findings: Sequence, bundle_name: str, readability: dict[str, Any] | None = None,
                 outside: Sequence = (), scope: str = "") -> str:
    """The first screen: the top finding as a headline, then every finding ranked in one line each.

    ``readability`` (:meth:`toolkit.ingest.IngestReport.readability`): a bundle with nothing the detectors could
    read gets a verdict that says so (never the green "no known incident pattern found"); with findings, a note.
    ``outside``: the findings the report's scope (``scope``: its hosts and tasks, in words) leaves out; with none
    inside, the verdict says where they are instead of an all-clear. The verdict is decided by
    :func:`toolkit.detectors.verdict.decide_verdict`, as ``detect``'s text is; this renders it."""
    verdict = decide_verdict(findings, bundle_name, readability, outside=outside, scope=scope)
    return _templates().get_template("verdict.html").render(verdict=verdict)


def findings_table(findings: Sequence) -> pd.DataFrame:
    """Ranked findings as a table (rank, severity, confidence, detector, title, hosts, tasks, time, playbook)."""
    rows = [{"rank": i, "severity": f.severity, "confidence": f.confidence, "detector": f.detector, "title": f.title,
             "hosts": ", ".join(f.hosts), "tasks": ", ".join(f.tasks), "ts (UTC)": _fmt_any(f.ts),
             "playbook": f.playbook} for i, f in enumerate(findings, 1)]
    return pd.DataFrame(rows, columns=["rank", "severity", "confidence", "detector", "title", "hosts", "tasks",
                                       "ts (UTC)", "playbook"])


def _fmt_any(value: Any) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    return str(pd.Timestamp(value).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3])


def provenance_table(inv: ReportView) -> pd.DataFrame:
    """Where the report comes from: toolkit version, bundle, line totals, Spark, time taken."""
    from toolkit import __version__

    totals = inv.analysis.ingest.totals
    rows = [("toolkit version", __version__), ("generated at (UTC)", inv.started.strftime("%Y-%m-%d %H:%M:%S")),
            ("analysis time", f"{inv.seconds:.0f} s"),
            ("files / lines", f"{totals['files']} files, {totals['lines']} lines "
                              f"({totals['records']} records, {totals['unparsed']} unparsed)"),
            ("hosts in bundle", ", ".join(inv.analysis.ingest.log_hosts) or "none"),
            ("ingest problems", str(totals["problems"])),
            ("state evidence items", str(len(inv.analysis.ingest.evidence)))]
    return pd.concat([pd.DataFrame(rows, columns=["parameter", "value"]), inv.params.as_table()], ignore_index=True)


def ingest_problems_table(ingest) -> pd.DataFrame:
    """Everything the ingest stage could not read cleanly, one row per problem of ``ingest.problems``: bundle
    problems and each file's (unknown layout, unparsed lines, bad bytes), so the table has as many rows as
    the provenance's count says."""
    rows = [{"source": p.source, "problem": p.problem, "detail": getattr(p, "detail", "") or ""} for p in ingest.problems]
    return pd.DataFrame(rows, columns=["source", "problem", "detail"])


def evidence_table(finding) -> pd.DataFrame:
    """The lines and facts a finding rests on: location, kind, time and text."""
    rows = [{"where": e.location() if hasattr(e, "location") else f"{e.source}:{e.line_no}", "kind": e.kind,
             "ts (UTC)": _fmt_any(e.ts), "text": e.text} for e in finding.evidence]
    return pd.DataFrame(rows, columns=["where", "kind", "ts (UTC)", "text"])


def finding_html(rank: int, finding) -> str:
    """The header of one finding's section: explanation, impact, known bugs, missing evidence, playbook."""
    c = _SEVERITY_COLOUR.get(finding.severity, "#333")
    parts = [f"<h2>{rank}. {html.escape(finding.title)}</h2>",
             f"<p><span style='color:{c};font-weight:bold'>{html.escape(finding.severity)}</span> · confidence "
             f"<b>{html.escape(finding.confidence)}</b> · detector <code>{html.escape(finding.detector)}</code> · "
             f"playbook {playbook_link(finding)}</p>",
             f"<p>{html.escape(finding.explanation)}</p>"]
    impact = _impact_text(finding)
    if impact:
        parts.append(f"<p><b>Impact:</b> {html.escape(impact)}</p>")
    if finding.known_bugs:
        parts.append("<p><b>Known bugs:</b></p><ul>" + "".join(f"<li>{html.escape(b)}</li>" for b in finding.known_bugs)
                     + "</ul>")
    if finding.missing_evidence:
        parts.append("<p><b>Missing evidence</b> (collect this to confirm):</p><ul>"
                     + "".join(f"<li>{html.escape(m)}</li>" for m in finding.missing_evidence) + "</ul>")
    return "".join(parts)




# --------------------------------------------------------------------------------------------
# Sections that cannot sink the report
# --------------------------------------------------------------------------------------------

Display = Callable[..., Any]


def _display() -> Display:
    from IPython.display import display

    return display


def failure_html(what: str, exc: BaseException) -> str:
    """One line saying which part of the report could not be drawn and why."""
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    at = f" ({Path(where.filename).name}:{where.lineno})" if where else ""
    return (f"<p class='section-error' style='color:#b00020'>⚠ {html.escape(what)} could not be drawn: "
            f"{html.escape(type(exc).__name__)}: {html.escape(str(exc).splitlines()[0] if str(exc) else '')}"
            f"{html.escape(at)}</p>")


@contextlib.contextmanager
def section(what: str, display: Display | None = None) -> Iterator[None]:
    """Run the drawing of one section or chart; on failure show one line and carry on."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - one bad chart must not lose the rest of the report
        from IPython.display import HTML

        (display or _display())(HTML(failure_html(what, exc)))


def show_chart(chart: Any, display: Display | None = None) -> None:
    """Display one chart with the renderer chosen by ``viz.use_charts`` (SVG, inline Vega or widget)."""
    (display or _display())(chart)


class _Rendered:
    """A chart's finished output: IPython shows it as it would have shown the chart."""

    def __init__(self, bundle: Any, text: str) -> None:
        self._bundle, self._text = bundle, text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        return self._bundle

    def __repr__(self) -> str:
        return self._text


def _chart_label(chart: Any) -> str:
    """How a failure line names a chart: by its title when it has one."""
    title = getattr(chart, "title", None)
    text = title if isinstance(title, str) else getattr(title, "text", None)
    if isinstance(text, (list, tuple)):
        text = " ".join(map(str, text))
    return f"the chart \u201c{text}\u201d" if isinstance(text, str) and text.strip() else "a chart"


class OrderedDisplay:
    """A ``display`` that draws charts on a background thread while the caller goes on, and shows
    everything in the order it was given once :meth:`flush` runs.

    Turning a chart into SVG (vl-convert) takes about as long as the Spark queries behind the next
    chart, and the two use different cores. Only renderers that return plain output (the report's
    inline HTML and SVG) are drawn ahead; a widget is shown as usual, in its place in the order.
    A chart that fails to draw shows one line, as :func:`section` would.
    """

    def __init__(self, display: Display | None = None) -> None:
        from toolkit import viz

        self._display = display or _display()
        self._ahead = viz.renders_offline()
        self._pool: ThreadPoolExecutor | None = None  # started with the first chart drawn ahead
        self._queue: list[Any] = []

    def __call__(self, obj: Any, *args: Any, **kwargs: Any) -> None:
        import altair as alt

        if self._ahead and isinstance(obj, alt.TopLevelMixin) and not args and not kwargs:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chart")
            drawn = self._pool.submit(lambda: _Rendered(obj._repr_mimebundle_(), repr(obj)))
            self._queue.append((drawn, _chart_label(obj)))
        else:
            self._queue.append((obj, args, kwargs))

    def flush(self) -> None:
        """Show what was given so far, in order (waiting for charts still being drawn)."""
        from IPython.display import HTML

        queue, self._queue = self._queue, []
        for item in queue:
            if isinstance(item[0], Future):
                drawn, label = item
                try:
                    self._display(drawn.result())
                except Exception as exc:  # noqa: BLE001 - as section(): one bad chart must not lose the rest
                    self._display(HTML(failure_html(label, exc)))
            else:
                obj, args, kwargs = item
                self._display(obj, *args, **kwargs)

    def close(self) -> None:
        """Flush, then stop the drawing thread."""
        try:
            self.flush()
        finally:
            if self._pool is not None:
                self._pool.shutdown(cancel_futures=True)


@contextlib.contextmanager
def ordered_display(display: Display | None = None) -> Iterator[OrderedDisplay]:
    """An :class:`OrderedDisplay` for one notebook cell's sections, flushed when the block ends."""
    ordered = OrderedDisplay(display)
    try:
        yield ordered
    finally:
        ordered.close()


def show_verdict(inv: ReportView) -> None:
    """Display the verdict block (notebook helper)."""
    from IPython.display import HTML

    display = _display()
    with section("the verdict", display):
        display(HTML(verdict_html(inv.findings, inv.params.bundle_name, inv.analysis.ingest.readability(),
                                  outside=inv.outside, scope=inv.scope_text())))
        for note in inv.notes:
            display(HTML(f"<p><i>{html.escape(note)}</i></p>"))


def focus_of(inv: ReportView):
    """The time range charts open on: ``time_window`` when given, else the incident (``view="incident"``),
    else None (the whole log). Computed once per investigation."""
    from toolkit import viz

    cached = getattr(inv, "_focus", False)
    if cached is not False:
        return cached
    focus = _window_focus(inv)
    if inv.params.time_window is None and inv.params.view == "incident":
        focus = viz.incident_window(inv.findings, inv.frames.process_runs())
    inv._focus = focus  # type: ignore[attr-defined]
    return focus


def _window_focus(inv: ReportView) -> list[tuple] | None:
    """A ``time_window`` with both ends, as the charts' focus: the axis shows that range, not the whole extent of
    the intervals that overlap it. An open end leaves the axis to the data."""
    window = inv.params.time_window
    if window and window[0] is not None and window[1] is not None:
        return [(pd.Timestamp(window[0]), pd.Timestamp(window[1]))]
    return None


def show_findings(inv: ReportView) -> None:
    """One section per finding: its header, evidence table, playbook and the charts of its tasks. Charts are
    drawn while the next one's data is queried (:class:`OrderedDisplay`)."""
    with ordered_display() as display:
        _draw_findings(inv, display)


def _draw_findings(inv: ReportView, display: Display) -> None:
    from IPython.display import HTML

    from toolkit import viz

    if not inv.findings:
        display(HTML("<p>No findings.</p>"))
    tz = inv.params.timezone
    for rank, f in enumerate(inv.findings, 1):
        inv.say(f"drawing finding {rank} of {len(inv.findings)}: {f.detector}")
        with section(f"finding {rank} ({f.detector})", display):
            display(HTML(finding_html(rank, f)))
            display(_table_style(evidence_table(f)))
            display(HTML(playbook_html(f)))
        tasks = f.tasks or inv.tasks
        hosts = f.hosts or inv.hosts
        if not tasks:
            continue
        focus = (viz.incident_window([f], inv.frames.process_runs(hosts))
                 if inv.params.time_window is None and inv.params.view == "incident" else _window_focus(inv))
        with section(f"the task chart of finding {rank}", display):
            frame = inv.frames.task_events(tasks, hosts)
            if not frame.empty:
                show_chart(viz.task_lane_chart(frame, viz.finding_frame([f]), tz=tz, focus=focus,
                                               title=f"Tasks {', '.join(tasks)}: what happened, in order"), display)
        with section(f"the offsets chart of finding {rank}", display):
            offsets = inv.frames.offsets(tasks, hosts)
            if not offsets.empty:
                show_chart(viz.offset_chart(offsets, tz=tz), display)


#: Timeline charts whose data is queried at the same time.
CHART_QUERY_THREADS = 2

#: Section titles of the timeline charts, by the names ``viz.timeline_charts`` gives them.
TIMELINE_TITLES = {"threads": "Threads, rebalance generations and process ends", "tasks": "Tasks",
                   "offsets": "Offsets: checkpoints, restorations and replayed ranges per task",
                   "rebalances": "Rebalance activity", "migration": "NiFi table migration",
                   "ingest": "Ingest overview"}


def show_timeline(inv: ReportView) -> None:
    """Every timeline chart that applies to this bundle, each drawn on its own (notebook helper). Charts are
    drawn while the next one's data is queried (:class:`OrderedDisplay`)."""
    with ordered_display() as display:
        _draw_timeline(inv, display)


def _draw_timeline(inv: ReportView, display: Display) -> None:
    from IPython.display import HTML

    from toolkit import viz

    inv.say("drawing the timeline charts")
    with section("the time range of the charts", display):
        focus = focus_of(inv)
        if focus:
            spans = "; ".join(f"{_fmt_any(a)} → {_fmt_any(b)}" for a, b in focus)
            display(HTML(f"<p class='focus-note'><i>Charts open on the incident: {html.escape(spans)} UTC (findings "
                         "and process crashes or stops, with context; a long quiet stretch breaks the time axis). "
                         "Scroll or drag a chart to move and zoom in time, or re-run with <code>view=\"all\"</code> "
                         "(<code>--all</code>) for the whole log.</i></p>"))
    builders = viz.timeline_chart_builders(inv.timeline, hosts=inv.hosts, tasks=inv.tasks, window=inv.window,
                                           findings=inv.findings, tz=inv.params.timezone,
                                           records=inv.analysis.records, focus=focus_of(inv), frames=inv.frames)
    # A chart's queries are small and spend their time in the driver's planning: two charts at a time
    # keep both cores of a laptop busy. They are still shown in order, each failure in its own place.
    with ThreadPoolExecutor(max_workers=CHART_QUERY_THREADS, thread_name_prefix="chart-data") as pool:
        built = {name: pool.submit(build) for name, build in builders.items()}
        for name, future in built.items():
            title = TIMELINE_TITLES.get(name, name)
            with section(f"the chart {title!r}", display):
                chart = future.result()
                if chart is not None:
                    display(HTML(f"<h3>{html.escape(title)}</h3>"))
                    show_chart(chart, display)
    with section("the NiFi repository and state charts", display):
        from toolkit import viz_nifi  # NiFi repositories and component state, when the bundle has them

        viz_nifi.show_nifi_sections(inv.timeline, hosts=inv.hosts, window=inv.window, tz=inv.params.timezone,
                                    display=display, runs=inv.frames.process_runs() if inv.window is None else None)


def appendix_tables(inv: ReportView, limit: int = 200) -> dict[str, pd.DataFrame]:
    """Small tables for the appendix: table sizes, process runs, clock skew, restorations, checkpoints."""
    tl = inv.timeline
    out = {"timeline tables": tl.summary()}
    for name, cols, order in (
        ("process runs", ["host", "run_no", "product", "version", "guarantee", "start", "end", "end_kind"], ["host", "start"]),
        ("clock skew", ["host", "reference_host", "offset_ms", "samples", "confidence", "method"], ["host"]),
        ("restorations", ["host", "task_id", "store", "topic", "partition", "start", "end", "start_offset", "end_offset",
                          "records", "from_scratch", "completed"], ["start"]),
        ("checkpoints", ["host", "task_id", "topic", "partition", "ts", "kind", "offset", "origin", "source", "line_no"],
         ["ts"]),
    ):
        out[name] = utc.to_pandas(getattr(tl, name.replace(" ", "_")).select(*cols).orderBy(*order).limit(limit))
    return out


def _whole_numbers(table: pd.DataFrame) -> pd.DataFrame:
    """Columns of whole numbers that a missing value made float (``line_no`` 230.000000) as integers again."""
    out = table.copy()
    for name in out.columns:
        values = out[name]
        if pd.api.types.is_float_dtype(values) and ((values.dropna() % 1) == 0).all():
            out[name] = values.astype("Int64")
    return out


def _table_style(table: pd.DataFrame):
    """A report table as shown: no index, text left-aligned, nothing printed for a missing value."""
    return (_whole_numbers(table).style.hide(axis="index").format(na_rep="")
            .set_properties(**{"text-align": "left"}))


def show_appendix(inv: ReportView) -> None:
    """Display the appendix tables (notebook helper)."""
    from IPython.display import HTML

    display = _display()
    inv.say("drawing the appendix")
    with section("the appendix", display):
        for name, table in appendix_tables(inv).items():
            display(HTML(f"<h3>{html.escape(name.capitalize())}</h3>"))
            display(_table_style(table) if not table.empty else HTML("<p>(empty)</p>"))


def show_provenance(inv: ReportView) -> None:
    """Display where the report comes from (notebook helper)."""
    display = _display()
    with section("the provenance table", display):
        display(provenance_table(inv).style.hide(axis="index"))


def show_ingest_problems(inv: ReportView) -> None:
    """Display what the ingest stage could not read cleanly (notebook helper)."""
    from IPython.display import HTML

    display = _display()
    with section("the ingest problems", display):
        ingest = inv.analysis.ingest
        problems = ingest_problems_table(ingest)
        unread = ingest.readability()["message"]
        if unread:  # said above the table: an empty table would otherwise read as "all is well"
            display(HTML(f"<p><b>{html.escape(unread[0].upper() + unread[1:])}.</b></p>"))
        if not problems.empty:
            display(problems.style.hide(axis="index"))
        elif not unread:
            display(HTML("<p>None: every line was read.</p>"))
