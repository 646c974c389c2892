"""What every ``stream-incident`` command shares: the exit codes 0 to 3, :class:`UsageError` (bad arguments or
unusable input: one sentence, exit code 2), opening a command's bundle before Spark starts, its Spark session, and
:func:`run_command`, which turns the errors every command shares into one sentence and an exit code.

The command line (:mod:`toolkit.cli`) and its commands with parsers of their own (:mod:`toolkit.detect`) both
use it; the exit codes are listed in :mod:`toolkit.cli` and docs/commands/exit-codes.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Sequence

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SPARK = 0, 1, 2, 3


class UsageError(Exception):
    """Bad arguments or input, reported as one sentence with exit code 2."""


def open_command_bundle(bundle: str | Path | Sequence[str | Path], out: str | Path, work_dir: str | Path | None,
                        log_timezone: str | None, say: Callable[[str], None], export_cache: Path | None = None):
    """Open a command's bundle before Spark starts, so a wrong path, ``bundle.toml`` or ``--timezone`` fails
    in a second, not a minute: an unusable bundle raises :class:`UsageError` (exit code 2, one sentence).

    Every command that analyses a bundle opens it here (``parse``, ``timeline``, ``catalogue``, ``detect``);
    archives are extracted into ``work_dir`` (default ``OUT/work``); log-platform exports rewritten by an earlier
    run are taken from ``export_cache`` (:meth:`toolkit.options.AnalysisOptions.export_cache_dir`).
    """
    from toolkit.bundle import BundleError, open_bundle

    if Path(out).exists() and not Path(out).is_dir():
        raise UsageError(f"output directory {out} is a file")
    say("discovering files")
    try:
        opened = open_bundle(bundle, work_dir or Path(out) / "work", timezone=log_timezone, out_dir=out,
                             export_cache=export_cache)
    except BundleError as exc:
        raise UsageError(str(exc)) from exc
    empty = nothing_to_read(opened)
    if empty:
        raise UsageError(empty)
    return opened


def spark_from_args(args: argparse.Namespace, out: str | Path | None = None):
    """The Spark session of an analysis command (``--master``, ``--remote``, ``--verbose``).

    Spark's own log goes to ``OUT/logs/spark.log`` when the command writes to an output folder (``out``,
    default ``--out``), else to :func:`toolkit.spark.default_log_file`; ``--verbose`` also shows it on the
    console. The bundle's size (``args.bundle``, one or more paths) sizes the session."""
    from toolkit.jvm import input_bytes
    from toolkit.spark import get_spark

    out = out or getattr(args, "out", None)
    log_file = Path(out) / "logs" / "spark.log" if out else None
    bundle = getattr(args, "bundle", None)
    size = input_bytes(bundle if isinstance(bundle, list) else [bundle]) if bundle else None
    # Without --verbose the environment's switch (STREAM_INCIDENT_VERBOSE) still applies.
    return get_spark(master=args.master, remote=args.remote, log_file=log_file, input_bytes=size,
                     verbose=True if getattr(args, "verbose", False) else None)


def bundle_label(bundle: str | Path | Sequence[str | Path]) -> str:
    """A command's bundle paths in one line of output: the path itself when there is one."""
    paths = [bundle] if isinstance(bundle, (str, Path)) else list(bundle)
    return ", ".join(str(p) for p in paths)


def nothing_to_read(bundle) -> str | None:
    """One sentence when an opened bundle holds no log line and no state evidence (unusable input: exit 2),
    naming what could not be read; None when there is something to analyse."""
    if bundle.evidence or any(f.size for f in bundle.logs):
        return None
    where = ", ".join(str(p) for p in bundle.inputs) or str(bundle.root)
    sentence = (f"no log file and no state evidence found in {where}" if not bundle.logs else
                f"no log line found in {where}: its {len(bundle.logs)} log file{'s are' if len(bundle.logs) != 1 else ' is'}"
                " empty and it holds no state evidence")
    if bundle.problems:
        first = bundle.problems[0]
        sentence += (f" ({len(bundle.problems)} not read, e.g. {first.source}: {first.problem})")
    return sentence


def run_command(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run one command and turn the errors every command shares into one sentence and an exit code:
    :class:`UsageError` (bad arguments or unusable input) and
    :class:`toolkit.catalogue.CatalogueError` (a user catalogue with problems) 2, no Spark session 3, interrupted 130."""
    from toolkit.catalogue import CatalogueError
    from toolkit.spark import SparkUnavailable

    try:
        return func(args)
    except (UsageError, CatalogueError) as exc:  # a user catalogue (--catalogue) with problems is unusable input
        print(f"stream-incident: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SparkUnavailable as exc:
        print(f"stream-incident: {exc}", file=sys.stderr)
        return EXIT_SPARK
    except KeyboardInterrupt:
        print("stream-incident: interrupted", file=sys.stderr)
        return 130
