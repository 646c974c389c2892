"""Scenario generator: sample incident bundles (``sample_logs/``) and large benchmark bundles.

A scenario is a short script of what happens on which host (starts, rebalances, restorations, crashes, clean
stops, lock contention, cleaner runs, NiFi processor starts, DynamoDB table operations). The renderer turns
it into a bundle with the exact log templates, prefixes and thread names of the chosen product version, in
the chosen layout, plus state captures, AWS captures, ``bundle.toml``, ``README.md`` and ``EXPECTED.json``.
Output is deterministic for a seed.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from .bundles import SHIPPED, scale_scenario
from .render import Evidence, HostSpec, RenderResult, Scenario, render

__all__ = ["Evidence", "HostSpec", "RenderResult", "Scenario", "SHIPPED", "main", "render", "write_samples",
           "write_scale"]


def write_samples(out_dir: Path, names: list[str] | None = None) -> list[Path]:
    """Regenerate the shipped bundles (all, or ``names``) under ``out_dir``; returns the bundle folders."""
    out_dir = Path(out_dir)
    unknown = sorted(set(names or []) - set(SHIPPED))
    if unknown:
        raise ValueError(f"unknown sample bundle(s): {', '.join(unknown)}; known: {', '.join(SHIPPED)}")
    written = []
    for name in names or list(SHIPPED):
        target = out_dir / name
        if target.exists():
            shutil.rmtree(target)  # a bundle folder is entirely generated: no stale files
        written.append(render(SHIPPED[name](), out_dir).root)
    return written


def write_scale(out_dir: Path, scale: int, seed: int = 7, fetch_responses_per_sec: float = 40.0) -> Path:
    """Write a benchmark bundle: the KAFKA-20685 story on 8 pods plus ``scale`` minutes of steady state.

    Three layouts, DEBUG commit and fetch-session noise (~12 MB per minute of steady state at the default
    fetch rate, ~97 % of lines no template matches), streamed to disk. Write it outside git (e.g.
    ``benchmarks/data/``).
    """
    if scale < 1:
        raise ValueError("scale must be >= 1")
    sc = scale_scenario(scale, seed, fetch_responses_per_sec)
    target = Path(out_dir) / sc.name
    if target.exists():
        shutil.rmtree(target)
    return render(sc, Path(out_dir), evidence=False).root


def main(argv: list[str] | None = None) -> int:
    """``samples --out DIR [--scale N] [--only NAME]``."""
    parser = argparse.ArgumentParser(prog="stream-incident samples", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="output directory (e.g. sample_logs)")
    parser.add_argument("--scale", type=int, help="write one large benchmark bundle with N minutes of steady state instead")
    parser.add_argument("--seed", type=int, default=7, help="seed of the benchmark bundle")
    parser.add_argument("--only", action="append", metavar="NAME", help="only this shipped bundle (repeatable)")
    args = parser.parse_args(argv[1:] if argv and argv[0] == "samples" else argv)
    if args.scale:
        print(write_scale(args.out, args.scale, args.seed))
    else:
        for path in write_samples(args.out, args.only):
            print(path)
    return 0
