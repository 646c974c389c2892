"""``stream-incident detect BUNDLE``: run the pipeline and the detectors, print ranked findings.

``--format text`` (default) is for people: findings by severity, with evidence as ``file:line  text``,
missing evidence, impact and the playbook. ``--format json`` prints the object documented in
``docs/findings-schema.md``. With ``--out DIR`` the pipeline's tables and ``findings.json`` are
written there, and Spark's own log into its ``logs/`` (otherwise the tables go into a temporary folder that is
removed). The bundle, analysis, Spark and output options are those of every analysis command
(:func:`toolkit.options.add_command_arguments`).

Exit codes (the same as the other commands, plus one):

* 0 — finished (findings or not);
* 1 — the run failed unexpectedly;
* 2 — bad arguments or unusable input (missing bundle, invalid ``bundle.toml`` or ``--timezone``, unknown ``--only``);
* 3 — no Spark session could be started;
* 4 — ``--fail-on`` matched: a finding at that severity or worse was reported;
* 5 — ``--fail-on`` was given and a detector failed (a finding of status ``error``): its root cause
  was not checked, so the run cannot be called clean at any level;
* 6 — ``--fail-on`` was given and the bundle's log lines were all unparsed (no layout read any): no log event
  was checked, so the run cannot be called clean either.

A bundle with no log line and no state evidence is unusable input (2). When nothing could be read, the text
output says so before anything else, and ``findings.json`` carries it in ``ingest``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from toolkit.commands import UsageError, bundle_label, open_command_bundle, run_command, spark_from_args
from toolkit.detectors.base import ERROR, SEVERITIES, Finding
from toolkit.detectors.verdict import decide_verdict, verdict_text
from toolkit.ingest import EMPTY, UNREADABLE
from toolkit.options import add_command_arguments, options_from_args

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SPARK, EXIT_FINDINGS, EXIT_DETECTOR_ERROR, EXIT_UNREADABLE = (
    0, 1, 2, 3, 4, 5, 6)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add the ``detect`` arguments to ``parser`` (a sub-parser of ``stream-incident``) and return it."""
    parser = parser or argparse.ArgumentParser(prog="stream-incident detect")
    parser.description = "Run the root-cause detectors on an incident bundle and print ranked findings."
    add_command_arguments(parser, out_help="write the pipeline tables and findings.json into this folder",
                          out_required=False, detectors=True)
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output for people or machines")
    parser.add_argument("--fail-on", choices=("critical", "warning"),
                        help="exit with code 4 when a finding of this severity (or worse) is reported, "
                             "with code 5 when a detector failed, with code 6 when no log line could be read")
    parser.set_defaults(func=run)
    return parser


def _say(args: argparse.Namespace, start: float, message: str) -> None:
    if not getattr(args, "quiet", False):
        print(f"[{time.monotonic() - start:6.1f}s] {message}", file=sys.stderr, flush=True)


def _investigate(args: argparse.Namespace) -> tuple[list[Finding], dict[str, Any]]:
    """``toolkit.pipeline.run`` with the options of the command line; the findings and their JSON object.

    The bundle is opened, and ``--only`` checked, before Spark starts, by the code every command shares:
    unusable input raises :class:`toolkit.commands.UsageError`."""
    from toolkit.detectors import registered_detectors
    from toolkit.pipeline import run as run_pipeline
    from toolkit.jvm import warm_up_hint
    from toolkit.spark import is_connect

    start = time.monotonic()
    say = lambda message: _say(args, start, message)  # noqa: E731
    options = options_from_args(args)
    unknown = [d for d in options.detectors or () if d not in registered_detectors()]
    if unknown:
        raise UsageError(f"unknown detector(s) for --only: {', '.join(unknown)}; known: "
                         f"{', '.join(registered_detectors())}")
    with tempfile.TemporaryDirectory(prefix="stream-incident-detect-") as scratch:
        out = Path(args.out) if args.out else Path(scratch)
        bundle = open_command_bundle(args.bundle, out, args.work_dir, args.log_timezone, say,
                                     options.export_cache_dir())
        # Spark's log goes to OUT/logs/ with --out, as for every command (without it, the scratch folder is removed).
        spark = spark_from_args(args)
        say("Spark session ready")
        inv = run_pipeline(spark, bundle, out, options, progress=say)
    hint = None if is_connect(spark) else warm_up_hint()
    if hint:
        say(hint)
    return inv.findings, inv.findings_document()


def format_text(findings: Sequence[Finding], bundle: str = "", ingest: dict[str, Any] | None = None) -> str:
    """Ranked findings for a terminal: headline, explanation, evidence excerpts, gaps, impact, playbook.

    ``ingest`` (``findings.json``'s, :meth:`toolkit.ingest.IngestReport.readability`): when the bundle held
    nothing the detectors could read, that comes first, so no finding is not taken for a clean bill. The verdict
    is decided by :func:`toolkit.detectors.verdict.decide_verdict`, as the report's is."""
    return verdict_text(decide_verdict(findings, bundle, ingest))


def _matches_fail_on(findings: Sequence[Finding], fail_on: str | None) -> bool:
    if not fail_on:
        return False
    worst_allowed = SEVERITIES.index(fail_on)
    return any(f.severity in SEVERITIES and SEVERITIES.index(f.severity) <= worst_allowed for f in findings)


def exit_code(findings: Sequence[Finding], fail_on: str | None, ingest: dict[str, Any] | None = None) -> int:
    """With ``fail_on``: ``EXIT_DETECTOR_ERROR`` when a detector failed, ``EXIT_FINDINGS`` when a finding reaches
    ``fail_on``, ``EXIT_UNREADABLE`` when no log line could be read (``ingest``'s status ``unreadable``), else
    ``EXIT_OK``; always ``EXIT_OK`` without it."""
    if fail_on and any(f.severity == ERROR for f in findings):
        return EXIT_DETECTOR_ERROR
    if _matches_fail_on(findings, fail_on):
        return EXIT_FINDINGS
    if fail_on and ingest and ingest.get("status") == UNREADABLE:
        return EXIT_UNREADABLE
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    """Run ``detect``; returns the exit code (see the module docstring). Unusable input and an unreachable
    Spark raise the errors :func:`toolkit.commands.run_command` turns into exit codes 2 and 3, as for every command."""
    from toolkit.pipeline import findings_text

    findings, document = _investigate(args)
    ingest = document.get("ingest")
    if args.format == "json":
        print(findings_text(document), end="")
    else:
        print(format_text(findings, bundle_label(args.bundle), ingest))
    if ingest and ingest.get("status") == EMPTY:  # the bundle is opened before: only a file read as empty gets here
        raise UsageError(f"{ingest['message']} ({bundle_label(args.bundle)})")
    return exit_code(findings, args.fail_on, ingest)


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point (``python -m toolkit.detect BUNDLE``)."""
    return run_command(run, build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
