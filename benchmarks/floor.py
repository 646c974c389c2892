"""The least any Spark command can take on a bundle, beside ``grep`` and the script, in one run.

    python benchmarks/floor.py BUNDLE                  # local[1] and local[2], three rounds each
    python benchmarks/floor.py BUNDLE --masters 'local[2]' --scans 2
    python benchmarks/floor.py BUNDLE --detect         # and the toolkit's cold detect, in the same run
    python benchmarks/floor.py BUNDLE --worker --masters 'local[2]' --scans 0   # the floor alone, one process

Two floor jobs, in a session started the way the toolkit starts one (``toolkit.spark.get_spark``):

* the line count: read every byte of every log file once and count the lines. Every analysis does at
  least this; it is the JVM's first job, so "process start to the end of the first count" is the least
  a cold Spark command can take on these files;
* the filter job: the script's work on Spark. Keep the lines that contain one of the script's literal
  phrases (``contains``, the cheapest test Spark has), take a timestamp from each kept line with the
  script's regex, and aggregate. It writes nothing, parses no layout, accounts for no line and runs no
  detector, so the toolkit's ``detect`` can only be slower.

Each master runs in a fresh process, timed from its own start (Python start, imports and JVM start
included), then runs ``--scans`` rounds of the filter job and the count (the later rounds are warm).
Beside it, on the same files in the same run: ``grep -c -F`` with the phrases and ``baseline.py`` (the
script) with each prefilter. If the cold line count is above 1.5x the fastest script, no design on Spark
meets a "cold command within 1.5x of the script" target on this machine; the ``local[2]``/``local[1]``
ratios are what this machine gives a trivially parallel Spark job.

Prints a Markdown table and one JSON line; never fails on a number.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

T_PROCESS_START = time.perf_counter()  # as early as possible: the cold figure includes imports

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from baseline import PARSE, PHRASES, log_files  # noqa: E402  (benchmarks/ is not a package)

# The script's timestamp regex, in Java's syntax (the same groups).
TIMESTAMP = PARSE.pattern.decode()


def count_scan(spark, files: list[Path]) -> dict:
    """Read every byte of ``files`` once and count the lines: the least work any analysis of them does."""
    started = time.perf_counter()
    lines = spark.read.text([str(f) for f in files]).count()
    return {"seconds": time.perf_counter() - started, "lines": lines}


def filter_scan(spark, files: list[Path]) -> dict:
    """The script's work on Spark: keep the lines with a phrase (``contains``), one regex on those, aggregate."""
    from pyspark.sql import functions as F

    started = time.perf_counter()
    lines = spark.read.text([str(f) for f in files])
    keep = None
    for phrase in PHRASES:
        test = F.col("value").contains(phrase)
        keep = test if keep is None else keep | test
    kept = lines.where(keep).select(F.regexp_extract("value", TIMESTAMP, 0).alias("ts"))
    row = kept.agg(F.count(F.lit(1)).alias("kept"), F.max("ts").alias("latest")).first()
    return {"seconds": time.perf_counter() - started, "kept": row["kept"], "latest": row["latest"]}


def worker(bundle: Path, master: str, scans: int) -> dict:
    """In a fresh process: session start, a line count (the first job of the JVM), then ``scans`` rounds of
    the filter job and the count. Seconds from this process's start where it says so."""
    from toolkit import jvm
    from toolkit.spark import get_spark

    files = log_files(bundle)
    session_started = time.perf_counter()
    spark = get_spark(master, app_name="stream-incident-floor", input_bytes=jvm.input_bytes(files))
    session_s = time.perf_counter() - session_started
    first_count = count_scan(spark, files)
    to_first_count_end_s = time.perf_counter() - T_PROCESS_START
    filters, counts = [], []
    for _ in range(scans):
        filters.append(filter_scan(spark, files))
        counts.append(count_scan(spark, files))
    spark.stop()
    return {"master": master, "session_s": session_s, "to_first_count_end_s": to_first_count_end_s,
            "first_count_s": first_count["seconds"], "lines": first_count["lines"],
            "filter_s": [r["seconds"] for r in filters], "count_s": [r["seconds"] for r in counts],
            "kept": filters[0]["kept"] if filters else None, "latest": filters[0]["latest"] if filters else None}


def measure(bundle: Path, masters: list[str], scans: int, prefilters: tuple[str, ...], detect: bool) -> dict:
    """grep, the script, the floor jobs and (with ``detect``) the toolkit's cold ``detect`` on ``bundle``."""
    import datasets
    from run import (NO_REMOTE, PYTHON, SCRATCH, check, last_json, no_server_env, run_detect_cold, run_grep,
                     run_script, watch)

    size, lines = datasets.measure(bundle)
    files = log_files(bundle)
    res: dict = {"bundle": str(bundle), "bytes": size, "lines": lines, "files": len(files)}
    print(f"{bundle}: {size / 1e9:.3f} GB, {lines:,} lines, {len(files)} files", file=sys.stderr, flush=True)
    res["grep"] = run_grep(files)
    res["script"] = run_script(bundle, prefilters)
    res["floor"] = {}
    for master in masters:
        w = watch([PYTHON, __file__, str(bundle), "--worker", "--masters", master, "--scans", str(scans)],
                  env=no_server_env(), label=f"floor {master}", unset=NO_REMOTE)
        check(w, f"floor worker ({master})")
        run = last_json(w.stdout)
        run.update(process_s=w.seconds, cpu_s=w.cpu_s, jvm_peak_mb=w.jvm_peak_mb)
        res["floor"][master] = run
    if detect:
        res["detect"] = run_detect_cold(bundle, SCRATCH / "floor", twice=False)
    return res


def after_first(seconds: list[float]) -> float | None:
    """The median of a session's later rounds (None when it ran one)."""
    return statistics.median(seconds[1:]) if len(seconds) > 1 else None


def markdown(res: dict) -> str:
    script = res["script"]
    fastest = script["wall_s"]

    def row(name: str, seconds: float | None) -> str:
        return f"| {name} | {seconds:.2f} | {seconds / fastest:.2f}x |"

    rows = [f"Bundle `{res['bundle']}`: {res['bytes'] / 1e9:.3f} GB, {res['lines']:,} lines, {res['files']} files.",
            "", "| contender | seconds | against the fastest script |", "|---|---|---|",
            row("`grep -c -F` with the phrases", res["grep"]["wall_s"])]
    rows += [row(f"script, `{name}` prefilter", run["wall_s"]) for name, run in script["by_prefilter"].items()]
    for master, run in res["floor"].items():
        rows += [row(f"floor `{master}`: process start to the end of its first line count", run["to_first_count_end_s"]),
                 row(f"floor `{master}`: session start, within that", run["session_s"]),
                 row(f"floor `{master}`: first line count, within that", run["first_count_s"]),
                 row(f"floor `{master}`: first filter job (after the count)", run["filter_s"][0])]
        if (warm := after_first(run["filter_s"])) is not None:
            rows.append(row(f"floor `{master}`: filter job, warm (median of {len(run['filter_s']) - 1})", warm))
        rows.append(row(f"floor `{master}`: line count, warm (median of {len(run['count_s'])})",
                        statistics.median(run["count_s"])))
    if "detect" in res:
        rows.append(row("toolkit: `stream-incident detect`, cold (`local[*]`, empty parse cache)", res["detect"]["wall_s"]))
    rows += ["", f"Budget of a cold command at 1.5x the fastest script (`{script['fastest']}`): {1.5 * fastest:.2f} s."]
    one, two = res["floor"].get("local[1]"), res["floor"].get("local[2]")
    if one and two:
        line = f"Floor `local[2]` against `local[1]`: first filter job {one['filter_s'][0] / two['filter_s'][0]:.2f}x"
        if after_first(one["filter_s"]) and after_first(two["filter_s"]):
            line += f", warm filter jobs {after_first(one['filter_s']) / after_first(two['filter_s']):.2f}x"
        rows.append(line + f", warm line counts {statistics.median(one['count_s']) / statistics.median(two['count_s']):.2f}x.")
    found = script["by_prefilter"][script["fastest"]]["events"]
    kept = sorted({run["kept"] for run in res["floor"].values()})
    counted = sorted({run["lines"] for run in res["floor"].values()})
    rows.append(f"Lines kept by the filter job: {', '.join(f'{k:,}' for k in kept)} (the script found {found:,}); "
                f"lines counted: {', '.join(f'{n:,}' for n in counted)} (the bundle has {res['lines']:,}).")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--masters", default="local[1],local[2]", help="comma-separated local masters")
    parser.add_argument("--scans", type=int, default=3, help="rounds of the filter job and the line count after the first count")
    parser.add_argument("--prefilters", default="grep,python", help="the script's prefilters to run")
    parser.add_argument("--detect", action="store_true", help="also time the toolkit's cold detect on the bundle")
    parser.add_argument("--worker", action="store_true",
                        help="run the first master in this process and print its JSON (with --scans 0: the session and "
                             "the first line count only, a cold command's floor to time from outside)")
    args = parser.parse_args(argv)
    if not args.bundle.exists():
        parser.error(f"{args.bundle} does not exist")
    if args.scans < 0 or (args.scans == 0 and not args.worker):
        parser.error("--scans must be at least 1 (0 only with --worker: the first line count alone)")
    masters = [m.strip() for m in args.masters.split(",") if m.strip()]
    if args.worker:
        print(json.dumps(worker(args.bundle, masters[0], args.scans)))
        return 0
    res = measure(args.bundle, masters, args.scans, tuple(p.strip() for p in args.prefilters.split(",")), args.detect)
    print(markdown(res))
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
