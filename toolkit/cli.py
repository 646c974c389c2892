"""``stream-incident`` command line.

Exit codes (also in the README):

* 0 — the command finished;
* 1 — the run failed unexpectedly (a bug: the traceback is printed);
* 2 — bad arguments or unusable input (missing bundle, invalid bundle.toml), one sentence on stderr;
* 3 — no Spark session could be started (unreachable master or Connect endpoint).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SPARK = 0, 1, 2, 3


class UsageError(Exception):
    """Bad arguments or input, reported as one sentence with exit code 2."""


def _progress(enabled: bool) -> Callable[[str], None]:
    start = time.monotonic()

    def say(message: str) -> None:
        if enabled:
            print(f"[{time.monotonic() - start:6.1f}s] {message}", file=sys.stderr, flush=True)

    return say


def _add_spark_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--master", help="Spark master URL (default: $SPARK_MASTER or local[*])")
    g.add_argument("--remote", help="Spark Connect URL, e.g. sc://host:15002 (default: $SPARK_REMOTE)")


def _spark(args: argparse.Namespace):
    from toolkit.spark import get_spark

    return get_spark(master=args.master, remote=args.remote)


def _table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)] if rows else [len(h) for h in headers]
    fmt = "  ".join(f"{{:{'>' if i and h in NUMERIC else '<'}{w}}}" for i, (h, w) in enumerate(zip(headers, widths)))
    lines = [fmt.format(*headers), fmt.format(*["-" * w for w in widths])]
    lines += [fmt.format(*[str(x) for x in r]) for r in rows]
    return "\n".join(lines)


NUMERIC = {"lines", "records", "cont.", "unparsed", "count"}


def _open_bundle(args: argparse.Namespace, say: Callable[[str], None]):
    """Open the bundle before Spark starts, so a wrong path fails in a second, not a minute."""
    from toolkit.bundle import BundleError, open_bundle

    say("discovering files")
    work = args.work_dir or Path(args.out) / "work"
    try:
        return open_bundle(args.bundle, work, timezone=args.timezone)
    except BundleError as exc:
        raise UsageError(str(exc)) from exc


def cmd_parse(args: argparse.Namespace) -> int:
    from toolkit.cache import ParseCache
    from toolkit.ingest import parse_bundle

    say = _progress(not args.quiet)
    bundle = _open_bundle(args, say)
    spark = _spark(args)
    say("Spark session ready")
    cache = None if args.no_cache else ParseCache(args.cache_dir)
    _, report, _ = parse_bundle(spark, bundle, args.out, progress=say, cache=cache)
    rows = [[f.path, f.host, f.layout or "(unknown)", f.lines, f.records, f.continuation, f.unparsed]
            for f in report.files]
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
    print(f"\nWrote {Path(args.out) / 'records.parquet'} and {Path(args.out) / 'ingest.json'}")
    return EXIT_OK if t["unaccounted_files"] == 0 else EXIT_FAILED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stream-incident",
        description="Reconstruct and diagnose Kafka Streams / NiFi state and checkpoint incidents.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("parse", help="parse a bundle's logs into records (records.parquet, ingest.json)")
    p.add_argument("bundle", nargs="+", help="bundle directory, archive, or loose log files")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--timezone", help="IANA zone for hosts without one in bundle.toml (default UTC)")
    p.add_argument("--work-dir", help="where archives are extracted (default: OUT/work)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--no-cache", action="store_true", help="parse every file again, ignoring the parse cache")
    p.add_argument("--cache-dir", help="parse cache location (default: $STREAM_INCIDENT_CACHE or ~/.cache/stream-incident)")
    _add_spark_args(p)
    p.set_defaults(func=cmd_parse)

    # Commands with their own argument parsers (usable without Spark, some as single files).
    for name, help_text, target in (
        ("capture-state", "capture a Kafka Streams state.dir listing + metadata into a .tar.gz (run on the host)",
         "toolkit.state.capture"),
        ("samples", "regenerate the sample incident bundles, or write a large one with --scale",
         "toolkit.samples"),
    ):
        p = sub.add_parser(name, help=help_text, add_help=False, prefix_chars="\0")
        p.add_argument("args", nargs=argparse.REMAINDER)
        p.set_defaults(func=_forward(target))

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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``stream-incident`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from toolkit.spark import SparkUnavailable

    try:
        return args.func(args)
    except UsageError as exc:
        print(f"stream-incident: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SparkUnavailable as exc:
        print(f"stream-incident: {exc}", file=sys.stderr)
        return EXIT_SPARK
    except KeyboardInterrupt:
        print("stream-incident: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
