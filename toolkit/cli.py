"""``stream-incident`` command line.

Exit codes (also in docs/commands/exit-codes.md):

* 0 — the command finished;
* 1 — the run failed unexpectedly (a bug: the traceback is printed);
* 2 — bad arguments or unusable input (missing bundle, invalid bundle.toml, unknown --timezone or --only
  detector, a bundle with no log line and no state evidence, a user catalogue with problems), one sentence on
  stderr (:func:`run_command`, shared by every command; ``catalogue --check`` prints one line per problem);
* 3 — no Spark session could be started (unreachable master or Connect endpoint), or ``warm-up`` could not build the class archive;
* 4 — ``detect --fail-on SEVERITY`` found a finding at least that severe;
* 5 — ``detect --fail-on SEVERITY`` was given and a detector failed (its root cause was not checked);
* 6 — ``detect --fail-on SEVERITY`` was given and not one log line could be read (every line unparsed).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable, Sequence

# The shared pieces stay importable from the command line module too.
from toolkit.commands import (  # noqa: F401
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SPARK,
    EXIT_USAGE,
    UsageError,
    nothing_to_read,
    open_command_bundle,
    run_command,
    spark_from_args,
)
from toolkit.options import add_command_arguments, options_from_args


def _progress(enabled: bool) -> Callable[[str], None]:
    from toolkit.progress import console_progress

    return console_progress(enabled)


def _table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)] if rows else [len(h) for h in headers]
    fmt = "  ".join(f"{{:{'>' if i and h in NUMERIC else '<'}{w}}}" for i, (h, w) in enumerate(zip(headers, widths)))
    lines = [fmt.format(*headers), fmt.format(*["-" * w for w in widths])]
    lines += [fmt.format(*[str(x) for x in r]) for r in rows]
    return "\n".join(lines)


NUMERIC = {"lines", "records", "cont.", "unparsed", "count"}


def _open_bundle(args: argparse.Namespace, say: Callable[[str], None]):
    return open_command_bundle(args.bundle, args.out, args.work_dir, args.log_timezone, say,
                               options_from_args(args).export_cache_dir())


def _hosts_cell(hosts: list[str], shown: int = 3) -> str:
    """A file's hosts in one table cell: a prefixed file (kubectl --prefix, compose) may carry dozens."""
    more = f" +{len(hosts) - shown}" if len(hosts) > shown else ""
    return ", ".join(hosts[:shown]) + more


def cmd_parse(args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    from toolkit.pipeline import parse

    say = _progress(not args.quiet)
    bundle = _open_bundle(args, say)
    spark = spark_from_args(args)
    say("Spark session ready")
    parsed = parse(spark, bundle, args.out, options_from_args(args), progress=say)
    report, events = parsed.ingest, parsed.events
    by_event = events.groupBy("event").count().orderBy(F.desc("count")).limit(12).collect()
    shapes = spark.read.parquet(str((Path(args.out) / "unknown_shapes.parquet").resolve())).limit(5).collect()
    rows = [[f.path, _hosts_cell(f.hosts or [f.host]), f.layout or "(unknown)", f.lines, f.records, f.continuation,
             f.unparsed] for f in report.files]
    print(_table(rows, ["file", "host", "layout", "lines", "records", "cont.", "unparsed"]))
    t = report.totals
    print(f"\n{t['files']} files, {t['lines']} lines: {t['records']} records, "
          f"{t['continuation']} continuation lines, {t['unparsed']} unparsed; "
          f"{len(report.evidence)} state/evidence items; {t['problems']} problems.")
    for f in report.files:
        for ex in f.unparsed_examples:
            print(f"  unparsed {f.path}:{ex['line_no']}: {ex['text'][:160]}")
    for p in report.problems:
        print(f"  problem  {p.source}: {p.problem}{' — ' + p.detail if p.detail else ''}")
    if by_event:
        print("\nmost frequent events: " + ", ".join(f"{r['event']} {r['count']}" for r in by_event))
    for r in shapes:
        print(f"  unclassified shape ×{r['count']} ({r['logger'] or 'no logger'}): {r['shape'][:140]}")
    print(f"\nWrote records, events, config and unknown_shapes (.parquet) and ingest.json to {args.out}/")
    return EXIT_OK if t["unaccounted_files"] == 0 else EXIT_FAILED


#: ``--out`` of the commands that always write their tables.
OUT_HELP = "output directory"


def analyse_from_args(args: argparse.Namespace, out: str | Path | None = None):
    """Open the bundle, start Spark and run ``pipeline.analyse`` with the options of the command line; the tables
    go to ``out`` (default ``--out``)."""
    from toolkit.pipeline import analyse

    out = out or args.out
    say = _progress(not args.quiet)
    bundle = open_command_bundle(args.bundle, out, args.work_dir, args.log_timezone, say,
                                 options_from_args(args).export_cache_dir())
    spark = spark_from_args(args)
    say("Spark session ready")
    return analyse(spark, bundle, out, options_from_args(args), progress=say)


def cmd_timeline(args: argparse.Namespace) -> int:
    analysis = analyse_from_args(args)
    summary = analysis.timeline.summary()
    rows = [[r.table, r.rows, r.first or "", r.last or ""] for r in summary.itertuples()]
    print(_table(rows, ["table", "count", "first", "last"]))
    from toolkit import utc

    runs = utc.collect(analysis.timeline.process_runs.orderBy("host", "run_no").limit(50))
    if runs:
        print()
        print(_table([[r.host, r.run_no, r.start, r.end, r.end_kind, r.guarantee or "", r.version or ""] for r in runs],
                     ["host", "run", "start", "end", "ended", "guarantee", "version"]))
    skew = analysis.timeline.clock_skew.where("host != reference_host").collect()
    for r in skew:
        print(f"clock skew: {r.host} is {r.offset_ms:+d} ms against {r.reference_host} "
              f"({r.samples} samples, spread {r.spread_ms} ms, {r.confidence} confidence)")
    print(f"\nWrote the timeline tables to {args.out}/")
    return EXIT_OK


def check_catalogue_files(files: Sequence[str]) -> int:
    """``catalogue --check FILE...``: check user catalogue files as one catalogue (schema, regexes, samples, ids);
    each problem on stderr, naming its file and entry. Exit code 0 when they are usable, 2 otherwise."""
    from toolkit.catalogue.user import check_files

    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        raise UsageError(f"no such catalogue file: {', '.join(missing)}")
    problems = check_files(files)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"stream-incident: {len(problems)} problem{'s' if len(problems) != 1 else ''} in "
              f"{len(files)} catalogue file{'s' if len(files) != 1 else ''}", file=sys.stderr)
        return EXIT_USAGE
    for f in files:
        print(f"{f}: ok")
    return EXIT_OK


def cmd_catalogue(args: argparse.Namespace) -> int:
    import pandas as pd

    from toolkit.events import catalogue_table, template_hits

    if args.check:
        return check_catalogue_files(args.check)
    hits = None
    with tempfile.TemporaryDirectory(prefix="stream-incident-catalogue-") as scratch:
        if args.bundle:
            # Without --out the bundle's tables are only needed for the counts (and Spark logs where detect's does).
            analysis = analyse_from_args(args, args.out or scratch)
            hits = template_hits(analysis.events)
        else:
            from toolkit.catalogue.user import activate

            activate(options_from_args(args).user_catalogue())  # the user catalogue's templates are listed too
        table = catalogue_table(hits)
    if hits is not None and "hits" in table.columns:
        table = table.sort_values("hits", ascending=False)
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_colwidth", 70):
        cols = [c for c in ("id", "product", "level", "event", "versions", "hits") if c in table.columns]
        print(table[cols].to_string(index=False))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stream-incident",
        description="Reconstruct and diagnose Kafka Streams / NiFi state and checkpoint incidents.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("parse", help="parse a bundle: records, events, config and state tables + ingest.json")
    add_command_arguments(p, out_help=OUT_HELP, out_required=True, detectors=False)
    p.set_defaults(func=cmd_parse)

    p = sub.add_parser("timeline", help="reconstruct the timeline tables (runs, tasks, locks, checkpoints, restores...)")
    add_command_arguments(p, out_help=OUT_HELP, out_required=True, detectors=False)
    p.set_defaults(func=cmd_timeline)

    p = sub.add_parser("catalogue", help="list the log templates the toolkit knows, with hit counts on a bundle")
    # The bundle is optional here (without one, the templates are listed with no counts): --bundle, not positional.
    add_command_arguments(p, out_help="output directory for the bundle's tables (with --bundle)", out_required=False,
                          detectors=False, bundle_positional=False)
    p.add_argument("--check", nargs="+", metavar="FILE",
                   help="check user catalogue files ([[template]] and [[layout]] entries) and exit: schema, "
                        "regexes, every sample classified by its own entry, ids; exit code 2 on problems")
    p.set_defaults(func=cmd_catalogue)

    # Commands with their own argument parsers (usable without Spark, some as single files).
    for name, help_text, target in (
        ("capture-state", "capture a Kafka Streams state.dir (or NiFi state, --product nifi) listing + metadata into a .tar.gz",
         "toolkit.state.capture"),
        ("samples", "regenerate the sample incident bundles, or write a large one with --scale",
         "toolkit.samples"),
    ):
        p = sub.add_parser(name, help=help_text, add_help=False, prefix_chars="\0")
        p.add_argument("args", nargs=argparse.REMAINDER)
        p.set_defaults(func=_forward(target))

    from toolkit import detect

    p = sub.add_parser("detect", help="run the root-cause detectors and print ranked findings (text or JSON)")
    detect.build_parser(p)
    p.set_defaults(func=detect.run)

    from toolkit import report

    p = sub.add_parser("report", help="analyse a bundle and write a self-contained HTML incident report")
    report.build_parser(p)
    p.set_defaults(func=report.run)

    from toolkit import serve

    p = sub.add_parser("serve", help="start, stop or show a warm local Spark Connect server the other commands use")
    serve.build_parser(p)
    p.set_defaults(func=serve.run)

    from toolkit import cache_admin

    p = sub.add_parser("cache", help="show the parse cache's size, or prune what recent runs did not use")
    cache_admin.build_parser(p)
    p.set_defaults(func=cache_admin.run)

    from toolkit import warmup

    p = sub.add_parser("warm-up", help="build this machine's class archive once, so later cold commands start faster")
    warmup.build_parser(p)
    p.set_defaults(func=warmup.run)

    from toolkit.knowledge import collect

    p = sub.add_parser("collect-guide", help="print what evidence to collect and which loggers to raise")
    collect.build_parser(p)
    p.set_defaults(func=collect.run)
    return parser


def _forward(module: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        import importlib

        return importlib.import_module(module).main(args.args)

    return run


def use_running_server(args: argparse.Namespace) -> None:
    """Point a Spark command at the ``serve`` server when one runs and nothing else names a Spark."""
    if args.command == "serve" or not hasattr(args, "remote") or args.master or args.remote:
        return
    if os.environ.get("SPARK_REMOTE") or os.environ.get("SPARK_MASTER"):
        return
    from toolkit import serve

    url = serve.running_url()
    if url:
        args.remote = url
        if not getattr(args, "quiet", False):
            print(f"using the running Spark Connect server at {url} ('stream-incident serve stop' to stop it)",
                  file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``stream-incident`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    use_running_server(args)
    return run_command(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
