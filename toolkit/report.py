"""Incident reports: notebook helpers, ``make_report`` and the ``stream-incident report`` command.

``make_report(bundle, out_dir)`` runs ``notebooks/incident_report.ipynb`` headless with papermill
(on a kernel that uses *this* interpreter), then writes

* ``out_dir/report.ipynb`` — the executed notebook,
* ``out_dir/report.html`` — the same without code, self-contained: charts are inline SVG
  rendered by vl-convert and every script, stylesheet or font the nbconvert template would fetch
  from a CDN is removed, so it opens offline;
* ``out_dir/findings.json`` — the ranked findings (written by the notebook itself).

The notebooks stay thin: the functions below do the work (validate parameters, run the analysis,
lay out the verdict, the finding sections and the appendix tables).
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone as dt_timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import pandas as pd

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = PACKAGE_ROOT / "notebooks"
REPORT_NOTEBOOK = NOTEBOOKS / "incident_report.ipynb"
PLAYBOOKS = PACKAGE_ROOT / "playbooks"

#: Name of the kernelspec written for this interpreter when ``python3`` points elsewhere.
PRIVATE_KERNEL = "stream-incident-python"

Progress = Callable[[str], None]

#: ``svg``: static inline SVG (the offline HTML report); ``interactive``: Vega-Lite with hover tooltips in Jupyter.
CHART_MODES = ("svg", "interactive")


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------

class ParameterError(ValueError):
    """A notebook or report parameter is unusable; the message is one sentence saying which and why."""


@dataclass(frozen=True)
class ReportParameters:
    """Validated report parameters (paths absolute, times UTC, lists normalised)."""

    bundle: Path
    out_dir: Path
    time_window: tuple[datetime | None, datetime | None] | None = None
    hosts: list[str] | None = None
    tasks: list[str] | None = None
    app_id: str | None = None
    spark_master: str | None = None
    spark_remote: str | None = None
    timezone: str = "UTC"
    charts: str = "svg"

    def as_table(self) -> pd.DataFrame:
        """The parameters as a two-column table for the report."""
        window = ("all" if not self.time_window else
                  f"{_fmt(self.time_window[0]) or '…'} → {_fmt(self.time_window[1]) or '…'}")
        rows = [("bundle", str(self.bundle)), ("out_dir", str(self.out_dir)), ("time_window (UTC)", window),
                ("hosts", ", ".join(self.hosts) if self.hosts else "all"),
                ("tasks", ", ".join(self.tasks) if self.tasks else "all"),
                ("app_id", self.app_id or "any"),
                ("spark", self.spark_remote or self.spark_master or os.environ.get("SPARK_REMOTE")
                 or os.environ.get("SPARK_MASTER") or "local[*] (embedded)"),
                ("chart time zone", self.timezone), ("charts", self.charts)]
        return pd.DataFrame(rows, columns=["parameter", "value"])


def _fmt(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else None


def _names(value: Any, what: str) -> list[str] | None:
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",")]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ParameterError(f"{what} must be a list of non-empty names (or a comma-separated string), not {value!r}.")
    return [v.strip() for v in value]


def _time(value: Any, which: str) -> datetime | None:
    if value is None or value == "":
        return None
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError):
        raise ParameterError(f"time_window {which} {value!r} is not an ISO 8601 time such as 2026-03-07T09:00:00Z.") from None
    if ts.tzinfo is not None:
        ts = ts.tz_convert("UTC").tz_localize(None)
    return ts.to_pydatetime()


def validate_parameters(
    bundle: Any,
    out_dir: Any,
    time_window: Any = None,
    hosts: Any = None,
    tasks: Any = None,
    app_id: Any = None,
    spark_master: Any = None,
    spark_remote: Any = None,
    timezone: Any = "UTC",
    charts: Any = "svg",
) -> ReportParameters:
    """Check the report parameters and return them normalised; raise :class:`ParameterError` otherwise."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if not bundle or not isinstance(bundle, (str, os.PathLike)):
        raise ParameterError("bundle must be the path of a bundle directory, archive or log file.")
    bundle_path = Path(bundle).expanduser().resolve()
    if not bundle_path.exists():
        raise ParameterError(f"bundle {str(bundle)!r} does not exist (looked at {bundle_path}).")
    if not out_dir or not isinstance(out_dir, (str, os.PathLike)):
        raise ParameterError("out_dir must be the path of a directory for the report and its tables.")
    out_path = Path(out_dir).expanduser().resolve()
    if out_path.exists() and not out_path.is_dir():
        raise ParameterError(f"out_dir {str(out_dir)!r} exists and is not a directory.")
    window = None
    if time_window not in (None, "", [], ()):
        if isinstance(time_window, str) or not isinstance(time_window, (list, tuple)) or len(time_window) != 2:
            raise ParameterError(f"time_window must be [start, end] (either may be None), not {time_window!r}.")
        window = (_time(time_window[0], "start"), _time(time_window[1], "end"))
        if window[0] and window[1] and window[0] >= window[1]:
            raise ParameterError(f"time_window start {window[0]} is not before its end {window[1]}.")
        if window == (None, None):
            window = None
    if app_id is not None and (not isinstance(app_id, str) or not app_id.strip()):
        raise ParameterError(f"app_id must be an application id string or None, not {app_id!r}.")
    if spark_master and spark_remote:
        raise ParameterError("give spark_master or spark_remote, not both.")
    if spark_master is not None and not isinstance(spark_master, str):
        raise ParameterError(f"spark_master must be a URL such as local[*] or spark://host:7077, not {spark_master!r}.")
    if spark_remote is not None and (not isinstance(spark_remote, str) or not spark_remote.startswith("sc://")):
        raise ParameterError(f"spark_remote must be a Spark Connect URL starting with sc://, not {spark_remote!r}.")
    try:
        ZoneInfo(str(timezone))
    except (ZoneInfoNotFoundError, ValueError):
        raise ParameterError(f"timezone {timezone!r} is not an IANA zone name such as UTC or Europe/Berlin.") from None
    if charts not in CHART_MODES:
        raise ParameterError(f"charts must be one of {', '.join(CHART_MODES)}, not {charts!r}.")
    return ReportParameters(bundle=bundle_path, out_dir=out_path, time_window=window,
                            hosts=_names(hosts, "hosts"), tasks=_names(tasks, "tasks"),
                            app_id=app_id.strip() if app_id else None, spark_master=spark_master or None,
                            spark_remote=spark_remote or None, timezone=str(timezone), charts=charts)


# --------------------------------------------------------------------------------------------
# Analysis inside a notebook
# --------------------------------------------------------------------------------------------

@dataclass
class Investigation:
    """One analysed bundle with its findings and the scope (hosts, tasks, window) charts are drawn for."""

    params: ReportParameters
    analysis: Any  # toolkit.pipeline.Analysis
    findings: list
    hosts: list[str] | None
    tasks: list[str] | None
    started: datetime
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def timeline(self):
        return self.analysis.timeline

    @property
    def window(self):
        return self.params.time_window


def investigate(params: ReportParameters, progress: Progress | None = None) -> Investigation:
    """Start Spark, analyse the bundle (the parse cache makes a re-run cheap) and run the detectors."""
    from toolkit.cache import ParseCache
    from toolkit.detectors import run_detectors
    from toolkit.pipeline import analyse
    from toolkit.spark import get_spark

    started = datetime.now(dt_timezone.utc)
    t0 = time.monotonic()
    spark = get_spark(master=params.spark_master, remote=params.spark_remote)
    analysis = analyse(spark, params.bundle, params.out_dir, cache=ParseCache(), progress=progress)
    findings = run_detectors(analysis.timeline)
    notes: list[str] = []
    hosts = params.hosts
    if params.app_id:
        # app_id narrows the hosts to those whose processes ran that application.
        rows = (analysis.timeline.process_runs.where(f"app_id = '{params.app_id.replace(chr(39), '')}'")
                .select("host").distinct().limit(1000).collect())
        app_hosts = sorted(r["host"] for r in rows)
        if not app_hosts:
            notes.append(f"No process of app_id {params.app_id!r} was found; charts show every host.")
        else:
            hosts = [h for h in (hosts or app_hosts) if h in app_hosts]
    if hosts or params.tasks:
        findings = [f for f in findings if _in_scope(f, hosts, params.tasks)]
    return Investigation(params=params, analysis=analysis, findings=findings, hosts=hosts, tasks=params.tasks,
                         started=started, seconds=time.monotonic() - t0, notes=notes)


def _in_scope(finding, hosts: list[str] | None, tasks: list[str] | None) -> bool:
    if hosts and finding.hosts and not set(finding.hosts) & set(hosts):
        return False
    if tasks and finding.tasks and not set(finding.tasks) & set(tasks):
        return False
    return True


def save_findings(inv: Investigation) -> Path:
    """Write ``out_dir/findings.json`` (the ranked findings plus the bundle and parameters)."""
    from toolkit.detectors import findings_to_json

    path = inv.params.out_dir / "findings.json"
    data = findings_to_json(inv.findings, bundle=str(inv.params.bundle),
                            generated_at=inv.started.isoformat(timespec="seconds"))
    path.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------
# Report building blocks (HTML fragments; escaped, no external links)
# --------------------------------------------------------------------------------------------

_SEVERITY_COLOUR = {"critical": "#b00020", "warning": "#b35900", "info": "#35638a", "error": "#6a1b9a"}


def playbook_link(finding) -> str:
    """A link to the playbook file when the package has it (file path, works offline), else its id."""
    rel = getattr(finding, "playbook", "") or f"playbooks/{finding.detector}.md"
    local = PACKAGE_ROOT / rel
    if local.exists():
        return f'<a href="{html.escape(local.as_uri())}">{html.escape(rel)}</a>'
    return f"<code>{html.escape(rel)}</code>"


def _impact_text(finding) -> str:
    impact = getattr(finding, "impact", None)
    if impact is None:
        return ""
    return impact.summary if hasattr(impact, "summary") else str(impact.get("summary", ""))


def verdict_html(findings: Sequence, bundle_name: str) -> str:
    """The first screen: the top finding as a headline, then every finding ranked in one line each."""
    head = f"<h1 style='margin-bottom:0.2em'>Incident report: {html.escape(bundle_name)}</h1>"
    if not findings:
        return head + ("<div style='border-left:6px solid #2e7d32;padding:0.6em 1em;background:#f1f8f1'>"
                       "<h2 style='margin:0'>Verdict: no known incident pattern found</h2>"
                       "<p>No detector matched. Check the ingest problems below (unparsed or missing logs can hide "
                       "an incident) and the timeline charts.</p></div>")
    # A failed detector (status "error") is listed, never the verdict.
    top = next((f for f in findings if f.severity != "error"), findings[0])
    colour = _SEVERITY_COLOUR.get(top.severity, "#333")
    parts = [head,
             f"<div style='border-left:8px solid {colour};padding:0.6em 1em;background:#fdf3f3'>",
             f"<div style='font-size:0.9em;color:{colour};font-weight:bold;text-transform:uppercase'>"
             f"Verdict · {html.escape(top.severity)} · {html.escape(top.confidence)}</div>",
             f"<h2 style='margin:0.2em 0'>{html.escape(top.title)}</h2>",
             f"<p style='font-size:1.05em'>{html.escape(top.explanation)}</p>"]
    impact = _impact_text(top)
    if impact:
        parts.append(f"<p><b>Impact:</b> {html.escape(impact)}</p>")
    where = ", ".join(filter(None, [("hosts " + ", ".join(top.hosts)) if top.hosts else "",
                                    ("tasks " + ", ".join(top.tasks)) if top.tasks else ""]))
    if where:
        parts.append(f"<p><b>Where:</b> {html.escape(where)}</p>")
    if top.known_bugs:
        parts.append(f"<p><b>Known bugs:</b> {html.escape('; '.join(top.known_bugs))}</p>")
    parts.append(f"<p><b>Playbook:</b> {playbook_link(top)} · detector <code>{html.escape(top.detector)}</code></p></div>")
    parts.append("<h3>All findings, ranked</h3><ol>")
    for f in findings:
        c = _SEVERITY_COLOUR.get(f.severity, "#333")
        parts.append(f"<li><span style='color:{c};font-weight:bold'>{html.escape(f.severity)}</span> · "
                     f"{html.escape(f.confidence)} · {html.escape(f.title)} — {playbook_link(f)}</li>")
    parts.append("</ol>")
    return "".join(parts)


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


def provenance_table(inv: Investigation) -> pd.DataFrame:
    """Where the report comes from: toolkit version, bundle, line totals, Spark, time taken."""
    from toolkit import __version__

    totals = inv.analysis.ingest.totals
    rows = [("toolkit version", __version__), ("generated at (UTC)", inv.started.strftime("%Y-%m-%d %H:%M:%S")),
            ("analysis time", f"{inv.seconds:.0f} s"),
            ("files / lines", f"{totals['files']} files, {totals['lines']} lines "
                              f"({totals['records']} records, {totals['unparsed']} unparsed)"),
            ("hosts in bundle", ", ".join(sorted({f.host for f in inv.analysis.ingest.files})) or "none"),
            ("ingest problems", str(totals["problems"])),
            ("state evidence items", str(len(inv.analysis.ingest.evidence)))]
    return pd.concat([pd.DataFrame(rows, columns=["parameter", "value"]), inv.params.as_table()], ignore_index=True)


def ingest_problems_table(ingest) -> pd.DataFrame:
    """Everything the ingest stage could not read cleanly: bundle problems, file problems, unparsed lines."""
    rows = [{"source": p.source, "problem": p.problem, "detail": getattr(p, "detail", "") or ""} for p in ingest.problems]
    for f in ingest.files:
        rows += [{"source": f.path, "problem": p, "detail": ""} for p in f.problems]
        if f.unparsed:
            example = f.unparsed_examples[0] if f.unparsed_examples else {}
            rows.append({"source": f.path, "problem": f"{f.unparsed} of {f.lines} lines unparsed",
                         "detail": f"line {example.get('line_no')}: {str(example.get('text', ''))[:160]}" if example else ""})
        if not f.layout:
            rows.append({"source": f.path, "problem": "no layout recognised", "detail": ""})
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


def show_verdict(inv: Investigation) -> None:
    """Display the verdict block (notebook helper)."""
    from IPython.display import HTML, display

    display(HTML(verdict_html(inv.findings, inv.params.bundle.name)))
    for note in inv.notes:
        display(HTML(f"<p><i>{html.escape(note)}</i></p>"))


def show_findings(inv: Investigation) -> None:
    """One section per finding: its header, evidence table and the charts of its tasks (notebook helper)."""
    from IPython.display import HTML, display

    from toolkit import viz

    if not inv.findings:
        display(HTML("<p>No findings.</p>"))
    for rank, f in enumerate(inv.findings, 1):
        display(HTML(finding_html(rank, f)))
        display(evidence_table(f).style.hide(axis="index"))
        tasks = f.tasks or inv.tasks
        hosts = f.hosts or inv.hosts
        if tasks:
            frame = viz.task_event_frame(inv.timeline, tasks=tasks, hosts=hosts, window=inv.window)
            if not frame.empty:
                display(viz.task_lane_chart(frame, viz.finding_frame([f]), tz=inv.params.timezone,
                                            title=f"Tasks {', '.join(tasks)}: what happened, in order"))
            offsets = viz.offset_frame(inv.timeline, tasks=tasks, hosts=hosts)
            if not offsets.empty:
                display(viz.offset_chart(offsets, tz=inv.params.timezone))


def show_timeline(inv: Investigation) -> None:
    """Every timeline chart that applies to this bundle (notebook helper)."""
    from IPython.display import HTML, display

    from toolkit import viz

    charts = viz.timeline_charts(inv.timeline, hosts=inv.hosts, tasks=inv.tasks, window=inv.window,
                                 findings=inv.findings, tz=inv.params.timezone, records=inv.analysis.records)
    titles = {"threads": "Threads, rebalance generations and process ends", "tasks": "Tasks",
              "offsets": "Offsets", "rebalances": "Rebalance activity", "migration": "NiFi table migration",
              "ingest": "Ingest overview"}
    for name, chart in charts.items():
        display(HTML(f"<h3>{html.escape(titles.get(name, name))}</h3>"))
        display(chart)
    from toolkit import viz_nifi  # NiFi repositories and component state, when the bundle has them

    viz_nifi.show_nifi_sections(inv.timeline, hosts=inv.hosts, window=inv.window, tz=inv.params.timezone)


def appendix_tables(inv: Investigation, limit: int = 200) -> dict[str, pd.DataFrame]:
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
        out[name] = getattr(tl, name.replace(" ", "_")).select(*cols).orderBy(*order).limit(limit).toPandas()
    return out


def show_appendix(inv: Investigation) -> None:
    """Display the appendix tables (notebook helper)."""
    from IPython.display import HTML, display

    for name, table in appendix_tables(inv).items():
        display(HTML(f"<h3>{html.escape(name.capitalize())}</h3>"))
        display(table.style.hide(axis="index") if not table.empty else HTML("<p>(empty)</p>"))


# --------------------------------------------------------------------------------------------
# Running the notebook and exporting HTML
# --------------------------------------------------------------------------------------------

class ReportError(RuntimeError):
    """The report notebook failed or its HTML is not self-contained; the message says where to look.

    ``exit_code`` follows the CLI's convention: 2 unusable input (the bundle could not be opened),
    3 no Spark session, 1 anything else.
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


#: Exceptions raised inside the notebook that mean bad input or no Spark rather than a bug.
_EXIT_CODE_OF = {"BundleError": 2, "ParameterError": 2, "SparkUnavailable": 3}


@dataclass(frozen=True)
class ReportFiles:
    """What ``make_report`` wrote."""

    html: Path
    notebook: Path
    findings: Path


def _same_interpreter(argv0: str) -> bool:
    # jupyter_client swaps a bare "python"/"python3" for sys.executable; anything else must be us.
    if argv0 in {"python", f"python{sys.version_info[0]}", f"python{sys.version_info[0]}.{sys.version_info[1]}"}:
        return True
    return os.path.abspath(argv0) == os.path.abspath(sys.executable)


@contextlib.contextmanager
def kernel_for_this_interpreter(scratch: Path) -> Iterator[str]:
    """Yield a kernel name whose kernel runs this interpreter (same venv, same toolkit).

    ``python3`` (shipped with ipykernel in the venv) is used when it resolves to this interpreter;
    otherwise (a user-level ``python3`` spec of another Python shadows it) a private kernelspec is
    written under ``scratch`` and put first on ``JUPYTER_PATH`` for the duration. Nothing is
    installed anywhere.
    """
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec("python3")
        usable = bool(spec.argv) and _same_interpreter(spec.argv[0])
    except NoSuchKernel:
        usable = False
    saved = {k: os.environ.get(k) for k in ("JUPYTER_PATH", "PYTHONPATH")}
    # The kernel must import the same toolkit even when it is not installed (a source checkout).
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), saved["PYTHONPATH"]]))
    try:
        if usable:
            yield "python3"
            return
        kernel_dir = scratch / "jupyter" / "kernels" / PRIVATE_KERNEL
        kernel_dir.mkdir(parents=True, exist_ok=True)
        (kernel_dir / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "stream-incident (this Python)", "language": "python"}), encoding="utf-8")
        os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(scratch / "jupyter"), saved["JUPYTER_PATH"]]))
        yield PRIVATE_KERNEL
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def execute_notebook(notebook: Path, output: Path, parameters: dict[str, Any], cwd: Path,
                     progress: Progress | None = None, timeout_s: int = 1800) -> Path:
    """Run a notebook headless with papermill on this interpreter's kernel; raise ReportError on failure."""
    import papermill as pm

    say = progress or (lambda _m: None)
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="stream-incident-kernel-") as scratch, \
            kernel_for_this_interpreter(Path(scratch)) as kernel:
        say(f"running {notebook.name} on kernel {kernel} (Spark analysis, detectors, charts)")
        try:
            pm.execute_notebook(str(notebook), str(output), parameters=parameters, kernel_name=kernel,
                                cwd=str(cwd), progress_bar=False, log_output=False, execution_timeout=timeout_s)
        except pm.PapermillExecutionError as exc:
            if exc.ename in _EXIT_CODE_OF:
                raise ReportError(str(exc.evalue), _EXIT_CODE_OF[exc.ename]) from exc
            raise ReportError(f"the notebook failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue} "
                              f"(see {output})") from exc
    return output


#: Elements and CSS that would make a browser fetch something from the network.
_EXTERNAL_SCRIPT = re.compile(r"<script\b[^>]*\bsrc\s*=\s*[\"']?(?:https?:)?//[^>]*>\s*</script>", re.I)
_EXTERNAL_LINK = re.compile(r"<link\b[^>]*\bhref\s*=\s*[\"']?(?:https?:)?//[^>]*>", re.I)
_EXTERNAL_IMPORT = re.compile(r"@import\s+(?:url\()?\s*[\"']?(?:https?:)?//[^;]*;", re.I)
_EXTERNAL_URL = re.compile(r"url\(\s*[\"']?(?:https?:)?//[^)]*\)", re.I)
_MATHJAX_CONFIG = re.compile(r"<script\b[^>]*type=\"text/x-mathjax-config\"[^>]*>.*?</script>", re.I | re.S)

#: What the offline check looks for: any src/href/@import/url( pointing at http(s) or a protocol-relative URL.
EXTERNAL_REFERENCE = re.compile(
    r"""(?:\bsrc\s*=\s*["']?|\bhref\s*=\s*["']?|@import\s+["']?|url\(\s*["']?)(?:https?:)?//""", re.I)


def strip_external_resources(page: str) -> str:
    """Remove CDN scripts (require.js, MathJax, widget manager), stylesheets, fonts and imports."""
    for pattern in (_EXTERNAL_SCRIPT, _EXTERNAL_LINK, _EXTERNAL_IMPORT, _MATHJAX_CONFIG):
        page = pattern.sub("", page)
    return _EXTERNAL_URL.sub("none", page)


def external_references(page: str) -> list[str]:
    """Every network reference left in an HTML page (empty for a self-contained page)."""
    return [page[max(m.start() - 40, 0):m.end() + 60] for m in EXTERNAL_REFERENCE.finditer(page)]


def export_html(notebook: Path, html_path: Path, title: str | None = None) -> Path:
    """Executed notebook -> self-contained HTML without code (no stderr noise, no network references)."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(notebook), as_version=4)
    for cell in nb.cells:
        # Spark and JVM warnings land on stderr; the reader needs results, not the engine's chatter.
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
            for o in cell.outputs:
                # nbconvert would wrap SVG in <img src="data:..."> ; inline <svg> keeps chart text selectable
                # and searchable. The SVG is our own vl-convert output, not user-supplied markup.
                data = o.get("data", {})
                if "image/svg+xml" in data and "text/html" not in data:
                    data["text/html"] = f'<div class="chart">{data.pop("image/svg+xml")}</div>'
    nb.metadata.pop("widgets", None)
    exporter = HTMLExporter(template_name="lab")
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    resources = {"metadata": {"name": title or notebook.stem}}
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    body = strip_external_resources(body)
    left = external_references(body)
    if left:
        raise ReportError(f"the HTML still references the network: {left[0]!r}")
    html_path.write_text(body, encoding="utf-8")
    return html_path


def make_report(
    bundle: str | Path,
    out_dir: str | Path,
    *,
    time_window: Sequence[str | datetime | None] | None = None,
    hosts: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    app_id: str | None = None,
    spark_master: str | None = None,
    spark_remote: str | None = None,
    timezone: str = "UTC",
    progress: Progress | None = None,
    notebook: Path | None = None,
) -> ReportFiles:
    """Analyse ``bundle`` and write ``report.html``, ``report.ipynb`` and ``findings.json`` into ``out_dir``.

    Raises :class:`ParameterError` for unusable parameters and :class:`ReportError` when the
    notebook fails (the partly executed ``report.ipynb`` shows where).
    """
    say = progress or (lambda _m: None)
    params = validate_parameters(bundle, out_dir, time_window, hosts, tasks, app_id, spark_master, spark_remote,
                                 timezone)
    out = params.out_dir
    out.mkdir(parents=True, exist_ok=True)
    source = Path(notebook) if notebook else REPORT_NOTEBOOK
    if not source.exists():
        raise ReportError(f"the report notebook {source} is missing from this installation.")
    window = [_fmt(t) for t in params.time_window] if params.time_window else None
    parameters = {"bundle": str(params.bundle), "out_dir": str(out), "time_window": window,
                  "hosts": params.hosts, "tasks": params.tasks, "app_id": params.app_id,
                  "spark_master": params.spark_master, "spark_remote": params.spark_remote,
                  "timezone": params.timezone, "charts": "svg"}
    executed = execute_notebook(source, out / "report.ipynb", parameters, cwd=out, progress=say)
    say("exporting report.html (charts inline, no network references)")
    html_path = export_html(executed, out / "report.html", title=f"Incident report: {params.bundle.name}")
    findings = out / "findings.json"
    if not findings.exists():
        raise ReportError(f"the notebook ran but did not write {findings}.")
    return ReportFiles(html=html_path, notebook=executed, findings=findings)


# --------------------------------------------------------------------------------------------
# Command line: stream-incident report BUNDLE --out DIR
# --------------------------------------------------------------------------------------------

def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add the ``report`` arguments to ``parser`` (a sub-parser of ``stream-incident``) or a new one."""
    p = parser or argparse.ArgumentParser(prog="stream-incident report",
                                          description="Analyse a bundle and write a self-contained HTML report.")
    p.add_argument("bundle", help="bundle directory, archive, or log file")
    p.add_argument("--out", required=True, help="output directory (report.html, report.ipynb, findings.json, tables)")
    p.add_argument("--from", dest="start", metavar="TIME", help="zoom the charts: start time, ISO 8601 (UTC unless given)")
    p.add_argument("--to", dest="end", metavar="TIME", help="zoom the charts: end time, ISO 8601")
    p.add_argument("--host", dest="hosts", action="append", metavar="HOST", help="only this host (repeatable)")
    p.add_argument("--task", dest="tasks", action="append", metavar="TASK", help="only this task id (repeatable)")
    p.add_argument("--app-id", help="only hosts running this application id")
    p.add_argument("--timezone", default="UTC", help="time zone for chart axes (default UTC)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--master", help="Spark master URL (default: $SPARK_MASTER or local[*])")
    g.add_argument("--remote", help="Spark Connect URL, e.g. sc://host:15002 (default: $SPARK_REMOTE)")
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``stream-incident report``; exit codes as the CLI's: 0 ok, 1 failed, 2 bad input, 3 no Spark."""
    start = time.monotonic()

    def say(message: str) -> None:
        if not args.quiet:
            print(f"[{time.monotonic() - start:6.1f}s] {message}", file=sys.stderr, flush=True)

    window = [args.start, args.end] if (args.start or args.end) else None
    try:
        files = make_report(args.bundle, args.out, time_window=window, hosts=args.hosts, tasks=args.tasks,
                            app_id=args.app_id, spark_master=args.master, spark_remote=args.remote,
                            timezone=args.timezone, progress=say)
    except ParameterError as exc:
        print(f"stream-incident: {exc}", file=sys.stderr)
        return 2
    except ReportError as exc:
        print(f"stream-incident: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"Wrote {files.html}\n      {files.notebook}\n      {files.findings}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m toolkit.report BUNDLE --out DIR`` (same as ``stream-incident report``)."""
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())


# --------------------------------------------------------------------------------------------
# Interactive exploration (notebooks/explore.ipynb)
# --------------------------------------------------------------------------------------------

class Explorer:
    """Linked charts and an evidence table over one investigation, redrawn from widget choices.

    The chart frames are collected once (bounded) and filtered in pandas on every redraw, so a
    click costs milliseconds; only the evidence table asks Spark again (with a ``limit``).
    """

    def __init__(self, inv: Investigation, limit: int = 4000) -> None:
        from pyspark.sql import functions as F

        from toolkit import viz

        self.inv = inv
        tl = inv.timeline
        self.task_events = viz.task_event_frame(tl, limit=limit)
        self.states = viz.thread_state_frame(tl, limit=limit)
        self.runs = viz.process_run_frame(tl)
        self.generations = viz.generation_frame(tl)
        self.findings = viz.finding_frame(inv.findings)
        kinds = (tl.events.where(F.col("event").isNotNull()).groupBy("event").count()
                 .orderBy(F.desc("count")).limit(300).toPandas())
        self.event_kinds: list[str] = sorted(kinds["event"])
        self.hosts: list[str] = sorted({f.host for f in inv.analysis.ingest.files})
        self.tasks: list[str] = sorted(self.task_events["task_id"].dropna().unique()) if not self.task_events.empty else []
        times = pd.concat([pd.to_datetime(self.task_events.get("start", pd.Series(dtype="datetime64[ns]"))),
                           pd.to_datetime(self.states.get("start", pd.Series(dtype="datetime64[ns]")))]).dropna()
        self.span = (times.min(), times.max()) if not times.empty else (None, None)

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
            ev = ev.where(F.col("ts") >= F.lit(pd.Timestamp(window[0]).to_pydatetime()))
        if window and window[1] is not None:
            ev = ev.where(F.col("ts") <= F.lit(pd.Timestamp(window[1]).to_pydatetime()))
        pdf = (ev.select("ts", "host", "event", "task_id", "source", "line_no", "message")
               .orderBy("ts", "source", "line_no").limit(limit).toPandas())
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
        top = viz.swimlane_chart(cut(self.states, "start"), self.generations, cut(self.runs, "start"), tz=tz)
        bottom = viz.task_lane_chart(cut(self.task_events, "start"), self.findings, tz=tz)
        return alt.vconcat(top, bottom).resolve_scale(x="shared", color="independent", shape="independent")

    def draw(self, hosts: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
             kinds: Sequence[str] | None = None, window: tuple | None = None) -> None:
        """Display the charts and the evidence table for a selection (also works without widgets)."""
        from IPython.display import display

        display(self.charts(hosts, tasks, window))
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
