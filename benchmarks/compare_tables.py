"""Same answers before and after a change: every table and finding of every shipped input, compared.

``snapshot`` runs the whole pipeline (parse, classify, timeline, detectors; parse cache off) on every shipped
sample (``sample_logs/*``), every hand-built bundle (``tests/bundles/*``) and every folder of the real-log
corpus (``tests/real_logs/*``), in one Spark session, and keeps each table as a sorted pandas frame plus
``findings.json``. ``diff`` compares two snapshots table by table and row by row and prints what differs.

    python benchmarks/compare_tables.py snapshot /tmp/before            # on the old code
    python benchmarks/compare_tables.py snapshot /tmp/after             # on the new code
    python benchmarks/compare_tables.py diff /tmp/before /tmp/after [--ignore records.candidate]

Exit status of ``diff``: 0 when every table and finding is equal, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
#: Columns that say where or when the run happened, not what it found.
VOLATILE_FINDING_KEYS = ("generated", "bundle", "seconds", "started")


def inputs(only: list[str] | None = None) -> dict[str, Path]:
    """Every shipped input, by a stable name."""
    found = {}
    for group, root in (("sample", REPO / "sample_logs"), ("bundle", REPO / "tests" / "bundles"),
                        ("real", REPO / "tests" / "real_logs")):
        for path in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("_")):
            name = f"{group}:{path.name}"
            if not only or any(o in name for o in only):
                found[name] = path
    return found


def _frame(spark, path: Path) -> pd.DataFrame:
    df = spark.read.parquet(str(path))
    frame = df.toPandas()
    for column in frame.columns:
        if frame[column].dtype == object and frame[column].map(lambda v: isinstance(v, (list, dict)) or hasattr(v, "asDict")).any():
            frame[column] = frame[column].map(lambda v: json.dumps(_plain(v), sort_keys=True, default=str))
    frame = frame[sorted(frame.columns)]
    return frame.sort_values(list(frame.columns), kind="stable", ignore_index=True, na_position="first",
                             key=lambda s: s.astype(str))


def _plain(value):
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _findings(path: Path) -> list:
    document = json.loads(path.read_text(encoding="utf-8"))
    for key in VOLATILE_FINDING_KEYS:
        document.pop(key, None)
    return document.get("findings", [])


def snapshot(target: Path, only: list[str] | None = None) -> int:
    from toolkit.options import AnalysisOptions
    from toolkit.pipeline import run
    from toolkit.spark import get_spark

    spark = get_spark("local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    target.mkdir(parents=True, exist_ok=True)
    for name, path in inputs(only).items():
        t0 = time.monotonic()
        keep = target / name.replace(":", "__")
        shutil.rmtree(keep, ignore_errors=True)
        keep.mkdir(parents=True)
        with tempfile.TemporaryDirectory() as out:
            try:
                run(spark, path, out, AnalysisOptions(use_cache=False))
            except Exception as exc:  # keep going: the failure itself is a result to compare
                (keep / "error.txt").write_text(f"{type(exc).__name__}: {exc}"[:2000], encoding="utf-8")
                print(f"{name}: failed: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                continue
            tables = [p for p in Path(out).rglob("*.parquet") if p.is_dir() and "work" not in p.parts]
            for table in tables:
                rel = table.relative_to(out).as_posix().removesuffix(".parquet").replace("/", ".")
                _frame(spark, table).to_pickle(keep / f"{rel}.pkl")
            (keep / "findings.json").write_text(json.dumps(_findings(Path(out) / "findings.json"), indent=1,
                                                           sort_keys=True, default=str), encoding="utf-8")
        print(f"{name}: {len(tables)} tables in {time.monotonic() - t0:.1f} s", flush=True)
    return 0


def _compare_frames(a: pd.DataFrame, b: pd.DataFrame, ignore: set[str]) -> str | None:
    a = a[[c for c in a.columns if c not in ignore]]
    b = b[[c for c in b.columns if c not in ignore]]
    if list(a.columns) != list(b.columns):
        return f"columns differ: only before {sorted(set(a.columns) - set(b.columns))}, " \
               f"only after {sorted(set(b.columns) - set(a.columns))}"
    left = a.astype(str).apply(tuple, axis=1).value_counts()
    right = b.astype(str).apply(tuple, axis=1).value_counts()
    gone = left.subtract(right, fill_value=0)
    gone = gone[gone > 0]
    new = right.subtract(left, fill_value=0)
    new = new[new > 0]
    if gone.empty and new.empty:
        return None
    cols = list(a.columns)
    lines = [f"{len(a)} rows before, {len(b)} after; {int(gone.sum())} only before, {int(new.sum())} only after"]
    for label, rows in (("-", gone), ("+", new)):
        for row in list(rows.index)[:3]:
            lines.append(f"    {label} " + ", ".join(f"{c}={v}" for c, v in zip(cols, row) if v not in ("None", "nan", "NaT"))[:400])
    return "\n".join(lines)


def diff(before: Path, after: Path, ignore: list[str]) -> int:
    differences = 0
    names = sorted({p.name for p in before.iterdir() if p.is_dir()} | {p.name for p in after.iterdir() if p.is_dir()})
    for name in names:
        a, b = before / name, after / name
        files = sorted({p.name for p in a.glob("*")} | {p.name for p in b.glob("*")}) if a.exists() and b.exists() else []
        if not files:
            print(f"{name}: only in {'before' if a.exists() else 'after'}")
            differences += 1
            continue
        for file in files:
            if not (a / file).exists() or not (b / file).exists():
                print(f"{name} {file}: only {'after' if (b / file).exists() else 'before'}")
                differences += 1
                continue
            table = file.rsplit(".", 1)[0]
            if file.endswith(".pkl"):
                skip = {i.split(".", 1)[1] for i in ignore if i.split(".", 1)[0] in (table, "*")}
                found = _compare_frames(pd.read_pickle(a / file), pd.read_pickle(b / file), skip)
            else:
                found = None if (a / file).read_text() == (b / file).read_text() else "text differs"
            if found:
                differences += 1
                print(f"{name} {table}: {found}")
    print(f"{differences} difference(s) in {len(names)} inputs")
    return 1 if differences else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    snap = sub.add_parser("snapshot", help="run the pipeline on every shipped input and keep its tables")
    snap.add_argument("target", type=Path)
    snap.add_argument("--only", action="append", help="inputs whose name contains this (repeatable)")
    cmp_ = sub.add_parser("diff", help="compare two snapshots")
    cmp_.add_argument("before", type=Path)
    cmp_.add_argument("after", type=Path)
    cmp_.add_argument("--ignore", action="append", default=[], metavar="TABLE.COLUMN",
                      help="leave a column out of the comparison (TABLE may be *)")
    args = parser.parse_args(argv)
    if args.command == "snapshot":
        return snapshot(args.target, args.only)
    return diff(args.before, args.after, args.ignore)


if __name__ == "__main__":
    sys.exit(main())
