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
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Sequence

from toolkit.bundle import mark_output_dir
from toolkit.options import AnalysisOptions, add_analysis_arguments, options_from_args
from toolkit.progress import Progress, console_progress
from toolkit.report.export import export_html, prepare_export
from toolkit.report.investigation import LOG_DIR
from toolkit.report.parameters import ParameterError, _fmt, validate_parameters
from toolkit.report.runner import ReportError, ReportFiles, execute_notebook, load_notebook_engine
from toolkit.shipped import notebook_file

REPORT_NOTEBOOK = notebook_file("incident_report.ipynb")


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
    view: str = "incident",
    progress: Progress | None = None,
    notebook: Path | None = None,
    verbose: bool = False,
    options: AnalysisOptions | None = None,
) -> ReportFiles:
    """Analyse ``bundle`` and write ``report.html``, ``report.ipynb`` and ``findings.json`` into ``out_dir``.

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
    parameters = {"bundle": str(params.bundle), "out_dir": str(out), "time_window": window,
                  "hosts": params.hosts, "tasks": params.tasks, "app_id": params.app_id,
                  "spark_master": params.spark_master, "spark_remote": params.spark_remote,
                  "timezone": params.timezone, "charts": "html", "view": params.view,
                  **params.options.as_parameters()}
    load_notebook_engine()  # before the export thread: both import the Jupyter client
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="export") as ahead:
        ahead.submit(prepare_export)  # the kernel works meanwhile; the export then starts ready
        executed = execute_notebook(source, out / "report.ipynb", parameters, cwd=out, progress=say,
                                    log_dir=out / LOG_DIR, verbose=verbose)
    started = time.monotonic()
    html_path = export_html(executed, out / "report.html", title=f"Incident report: {params.bundle.name}")
    say(f"wrote report.html ({html_path.stat().st_size / 1e6:.1f} MB, charts and their JavaScript inline) "
        f"in {time.monotonic() - started:.1f} s")
    findings = out / "findings.json"
    if not findings.exists():
        raise ReportError(f"the notebook ran but did not write {findings}.")
    return ReportFiles(html=html_path, notebook=executed, findings=findings)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add the ``report`` arguments to ``parser`` (a sub-parser of ``stream-incident``) or a new one."""
    p = parser or argparse.ArgumentParser(prog="stream-incident report",
                                          description="Analyse a bundle and write a self-contained HTML report.")
    p.add_argument("bundle", help="bundle directory, archive, or log file")
    p.add_argument("--out", required=True, help="output directory (report.html, report.ipynb, findings.json, tables)")
    p.add_argument("--from", dest="start", metavar="TIME", help="zoom the charts: start time, ISO 8601 (UTC unless given)")
    p.add_argument("--to", dest="end", metavar="TIME", help="zoom the charts: end time, ISO 8601")
    p.add_argument("--all", dest="view", action="store_const", const="all", default="incident",
                   help="charts open on the whole log instead of the incident (findings and crashes with context)")
    p.add_argument("--host", dest="hosts", action="append", metavar="HOST", help="only this host (repeatable)")
    p.add_argument("--task", dest="tasks", action="append", metavar="TASK", help="only this task id (repeatable)")
    p.add_argument("--app-id", help="only hosts running this application id")
    p.add_argument("--timezone", default="UTC", help="time zone for chart axes (default UTC)")
    add_analysis_arguments(p, timezone_flags=())
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--verbose", action="store_true",
                   help="also show Spark's and the kernel's own log on the console (default: OUT/logs/ only)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--master", help="Spark master URL (default: $SPARK_MASTER or local[*])")
    g.add_argument("--remote", help="Spark Connect URL, e.g. sc://host:15002 (default: $SPARK_REMOTE)")
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``stream-incident report``; exit codes as the CLI's: 0 ok, 1 failed, 2 bad input (also a bundle with
    no log line and no state evidence: the report is written, its verdict says so), 3 no Spark."""
    from toolkit.jvm import warm_up_hint
    from toolkit.spark import VERBOSE_ENV, resolve_target

    say = console_progress(enabled=not args.quiet)
    verbose = bool(getattr(args, "verbose", False))
    if verbose:
        os.environ[VERBOSE_ENV] = "1"
    window = [args.start, args.end] if (args.start or args.end) else None
    try:
        files = make_report(args.bundle, args.out, time_window=window, hosts=args.hosts, tasks=args.tasks,
                            app_id=args.app_id, spark_master=args.master, spark_remote=args.remote,
                            timezone=args.timezone, view=getattr(args, "view", "incident"), progress=say,
                            verbose=verbose, options=options_from_args(args))
    except ParameterError as exc:
        print(f"stream-incident: {exc}", file=sys.stderr)
        return 2
    except ReportError as exc:
        print(f"stream-incident: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"Wrote {files.html}\n      {files.notebook}\n      {files.findings}\n"
          f"      {files.html.parent / LOG_DIR}/ (Spark and kernel logs)")
    ingest = json.loads(files.findings.read_text(encoding="utf-8")).get("ingest") or {}
    if ingest.get("status") == "empty":  # unusable input, as for every command; the report's verdict says so too
        print(f"stream-incident: {ingest['message']} ({args.bundle}); the report's verdict says so", file=sys.stderr)
        return 2
    hint = None if resolve_target(args.master, args.remote)[0] == "remote" else warm_up_hint()
    if hint:
        say(hint)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m toolkit.report BUNDLE --out DIR`` (same as ``stream-incident report``)."""
    return run(build_parser().parse_args(argv))
