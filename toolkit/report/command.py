"""``make_report`` and the ``stream-incident report`` command.

``make_report(bundle, out_dir)`` runs ``notebooks/incident_report.ipynb`` headless with papermill
(on a kernel that uses *this* interpreter), then writes

* ``out_dir/report.ipynb`` — the executed notebook,
* ``out_dir/report.html`` — the same without code, self-contained and offline: interactive charts
  (tooltips naming the evidence line, zoom on time, host filter) with their JavaScript inline and
  a static SVG for browsers without JavaScript;
* ``out_dir/findings.json`` — the ranked findings (written by the notebook itself);
* ``out_dir/logs/`` — Spark's log and the kernel's console output (``--verbose`` shows them).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Sequence

from toolkit.bundle import mark_output_dir
from toolkit.options import AnalysisOptions, add_command_arguments, options_from_args
from toolkit.progress import Progress, console_progress
from toolkit.report.channel import EXIT_USAGE, KernelChannel
from toolkit.report.export import export_html, prepare_export
from toolkit.report.investigation import LOG_DIR
from toolkit.report.parameters import ParameterError, _fmt, validate_parameters
from toolkit.report.runner import ReportError, ReportFiles, execute_notebook, load_notebook_engine
from toolkit.shipped import notebook_file

REPORT_NOTEBOOK = notebook_file("incident_report.ipynb")


def make_report(
    bundle: str | Path | Sequence[str | Path],
    out_dir: str | Path,
    *,
    time_window: Sequence[str | datetime | None] | None = None,
    hosts: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    app_id: str | None = None,
    spark_master: str | None = None,
    spark_remote: str | None = None,
    timezone: str = "UTC",
    view: str = "incident",
    progress: Progress | None = None,
    notebook: Path | None = None,
    verbose: bool = False,
    options: AnalysisOptions | None = None,
) -> ReportFiles:
    """Analyse ``bundle`` (one path, or several read as one bundle) and write ``report.html``, ``report.ipynb``
    and ``findings.json`` into ``out_dir``. ``timezone`` is the zone of the chart axes (``--chart-timezone``).

    ``options`` are the analysis options every entry point shares (default: ``AnalysisOptions()``);
    the other arguments only choose what the report shows.

    Raises :class:`ParameterError` for unusable parameters and :class:`ReportError` when the
    notebook fails (the partly executed ``report.ipynb`` shows where).
    """
    say = progress or (lambda _m: None)
    analysis = (options or AnalysisOptions()).as_parameters()
    params = validate_parameters(bundle, out_dir, time_window, hosts, tasks, app_id, spark_master, spark_remote,
                                 timezone, "html", view, **analysis)
    out = mark_output_dir(params.out_dir)  # before the notebook opens the bundle, which may hold it
    source = Path(notebook) if notebook else REPORT_NOTEBOOK
    if not source.exists():
        raise ReportError(f"the report notebook {source} is missing from this installation.")
    window = [_fmt(t) for t in params.time_window] if params.time_window else None
    parameters = {"bundle": params.bundle_parameter(), "out_dir": str(out), "time_window": window,
                  "hosts": params.hosts, "tasks": params.tasks, "app_id": params.app_id,
                  "spark_master": params.spark_master, "spark_remote": params.spark_remote,
                  "timezone": params.timezone, "charts": "html", "view": params.view,
                  **params.options.as_parameters()}
    load_notebook_engine()  # before the export thread: both import the Jupyter client
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="export") as ahead:
        ahead.submit(prepare_export)  # the kernel works meanwhile; the export then starts ready
        channel = KernelChannel(folder=out / LOG_DIR, verbose=verbose)
        executed = execute_notebook(source, out / "report.ipynb", parameters, cwd=out, progress=say,
                                    log_dir=out / LOG_DIR, verbose=verbose, channel=channel)
        outcome = channel.read()
    started = time.monotonic()
    html_path = export_html(executed, out / "report.html", title=f"Incident report: {params.bundle_name}")
    say(f"wrote report.html ({html_path.stat().st_size / 1e6:.1f} MB, charts and their JavaScript inline) "
        f"in {time.monotonic() - started:.1f} s")
    findings = out / "findings.json"
    if not findings.exists():
        raise ReportError(f"the notebook ran but did not write {findings}.")
    return ReportFiles(html=html_path, notebook=executed, findings=findings, outcome=outcome)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add the ``report`` arguments to ``parser`` (a sub-parser of ``stream-incident``) or a new one."""
    p = parser or argparse.ArgumentParser(prog="stream-incident report",
                                          description="Analyse a bundle and write a self-contained HTML report.")
    add_command_arguments(p, out_help="output directory (report.html, report.ipynb, findings.json, tables)",
                          out_required=True, detectors=True)
    view = p.add_argument_group("view", "what the charts show (the analysis itself is the same)")
    view.add_argument("--from", dest="start", metavar="TIME",
                      help="zoom the charts: start time, ISO 8601 (UTC unless given)")
    view.add_argument("--to", dest="end", metavar="TIME", help="zoom the charts: end time, ISO 8601")
    view.add_argument("--all", dest="view", action="store_const", const="all", default="incident",
                      help="charts open on the whole log instead of the incident (findings and crashes with context)")
    view.add_argument("--host", dest="hosts", action="append", metavar="HOST", help="only this host (repeatable)")
    view.add_argument("--task", dest="tasks", action="append", metavar="TASK", help="only this task id (repeatable)")
    view.add_argument("--app-id", help="only hosts running this application id")
    # --timezone is the logs' zone on every analysis command; the charts' zone has a name of its own.
    view.add_argument("--chart-timezone", default="UTC", metavar="ZONE",
                      help="time zone of the chart axes (default UTC); the logs' zone is --timezone/--log-timezone")
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``stream-incident report``; exit codes as the CLI's: 0 ok, 1 failed, 2 bad input (also a bundle with
    no log line and no state evidence: the report is written, its verdict says so), 3 no Spark."""
    from toolkit.jvm import warm_up_hint
    from toolkit.spark import resolve_target

    say = console_progress(enabled=not args.quiet)
    verbose = bool(getattr(args, "verbose", False))
    window = [args.start, args.end] if (args.start or args.end) else None
    try:
        files = make_report(args.bundle, args.out, time_window=window, hosts=args.hosts, tasks=args.tasks,
                            app_id=args.app_id, spark_master=args.master, spark_remote=args.remote,
                            timezone=args.chart_timezone, view=getattr(args, "view", "incident"), progress=say,
                            verbose=verbose, options=options_from_args(args))
    except ParameterError as exc:
        print(f"stream-incident: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ReportError as exc:
        print(f"stream-incident: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"Wrote {files.html}\n      {files.notebook}\n      {files.findings}\n"
          f"      {files.html.parent / LOG_DIR}/ (Spark and kernel logs)")
    outcome = files.outcome
    if outcome is not None and outcome.ingest_status == "empty":
        # unusable input, as for every command; the report's verdict says so too
        print(f"stream-incident: {outcome.ingest_message} ({', '.join(args.bundle)}); the report's verdict says so",
              file=sys.stderr)
        return EXIT_USAGE
    hint = None if resolve_target(args.master, args.remote)[0] == "remote" else warm_up_hint()
    if hint:
        say(hint)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m toolkit.report BUNDLE --out DIR`` (same as ``stream-incident report``)."""
    return run(build_parser().parse_args(argv))
