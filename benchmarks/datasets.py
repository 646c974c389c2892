"""Benchmark bundles: sizes in GB of uncompressed log text -> ``toolkit.samples.write_scale`` bundles.

``write_scale(out_dir, scale)`` writes a fixed story (about 12 minutes of 8 pods) plus ``scale`` minutes
of steady state, about 12 MB per minute. Rather than trusting those numbers, we calibrate once: write two small bundles, fit
``bytes = base + per_unit * scale`` and keep the fit in ``benchmarks/data/calibration.json``. The
generator is deterministic for a seed, so the fit is exact enough to hit a size within a fraction
of a percent.

A finished bundle gets a ``scale-N.done`` marker (with its byte and line counts) beside it, so an
interrupted generation is redone and a finished one is reused by every later run.

GB here means 10**9 bytes of log text (``*.log`` and ``*.gz`` uncompressed), the unit MB/s uses too.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from toolkit.samples import write_scale

DATA_DIR = Path(__file__).resolve().parent / "data"
SEED = 7
GENERATOR = 2  # bump when write_scale's output changes: old fits and bundles are then regenerated
GB = 10**9
LOG_SUFFIXES = (".log", ".gz", ".txt", ".out")


@dataclass(frozen=True)
class Dataset:
    """One generated bundle and what it weighs."""

    path: Path
    scale: int
    bytes: int  # uncompressed log text
    lines: int

    @property
    def gb(self) -> float:
        return self.bytes / GB


def log_files(bundle: Path) -> list[Path]:
    """The log files of a bundle (what every contender reads), in a stable order."""
    return sorted(p for p in bundle.rglob("*") if p.is_file() and p.name.endswith(LOG_SUFFIXES)
                  and not p.name.endswith(".tar.gz"))


def measure(bundle: Path) -> tuple[int, int]:
    """(uncompressed bytes, lines) of the bundle's log files."""
    total_bytes = total_lines = 0
    for path in log_files(bundle):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as fh:
            while chunk := fh.read(1 << 22):
                total_bytes += len(chunk)
                total_lines += chunk.count(b"\n")
    return total_bytes, total_lines


def calibrate(data_dir: Path = DATA_DIR) -> tuple[float, float]:
    """(base bytes, bytes per unit of scale), measured once on two small bundles and cached."""
    cache = data_dir / "calibration.json"
    if cache.exists():
        fit = json.loads(cache.read_text())
        if fit.get("seed") == SEED and fit.get("generator") == GENERATOR:
            return fit["base"], fit["per_unit"]
    data_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=data_dir) as tmp:
        small, large = 1, 4
        b_small, _ = measure(write_scale(Path(tmp), small, SEED))
        b_large, _ = measure(write_scale(Path(tmp), large, SEED))
    per_unit = (b_large - b_small) / (large - small)
    base = b_small - per_unit * small
    cache.write_text(json.dumps({"seed": SEED, "generator": GENERATOR, "base": base, "per_unit": per_unit}, indent=2))
    return base, per_unit


def scale_for(gb: float, data_dir: Path = DATA_DIR) -> int:
    base, per_unit = calibrate(data_dir)
    return max(1, round((gb * GB - base) / per_unit))


def ensure(gb: float, data_dir: Path = DATA_DIR, say=print) -> Dataset:
    """The bundle for ``gb`` GB of logs: reused when already complete, otherwise generated."""
    scale = scale_for(gb, data_dir)
    bundle = data_dir / f"scale-{scale}"
    marker = data_dir / f"scale-{scale}.done"
    info = json.loads(marker.read_text()) if marker.exists() else {}
    if bundle.is_dir() and info.get("generator") == GENERATOR:
        return Dataset(bundle, scale, info["bytes"], info["lines"])
    free = shutil.disk_usage(data_dir).free
    needed = (gb * GB) * 1.1 + 2 * GB  # the bundle plus room for parquet output and Spark spill
    if free < needed:
        raise SystemExit(f"not enough disk for a {gb} GB bundle: {free / GB:.1f} GB free, "
                         f"about {needed / GB:.1f} GB needed (check df -h {data_dir})")
    say(f"generating {gb} GB bundle (write_scale scale={scale}) into {bundle} ...")
    t0 = time.perf_counter()
    write_scale(data_dir, scale, SEED)
    size, lines = measure(bundle)
    marker.write_text(json.dumps({"generator": GENERATOR, "bytes": size, "lines": lines, "seconds": time.perf_counter() - t0}))
    say(f"  {size / GB:.3f} GB, {lines:,} lines in {time.perf_counter() - t0:.0f} s")
    return Dataset(bundle, scale, size, lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate (or reuse) benchmark bundles ahead of a run.")
    parser.add_argument("--sizes", default="0.5,1,2,4", help="comma-separated sizes in GB of log text")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    for gb in (float(s) for s in args.sizes.split(",")):
        ds = ensure(gb, args.data_dir)
        print(f"{gb:>5} GB -> {ds.path} ({ds.bytes / GB:.3f} GB, {ds.lines:,} lines)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
