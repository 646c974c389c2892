"""Where does the toolkit's time go? Cumulative timings of the parse plan's intermediate steps.

Each step is the previous one plus one more piece of ``toolkit.layouts``, run to completion with
Spark's ``noop`` writer (nothing written), so the difference between two rows is the cost of the
piece added. The steps rebuild the plan from the module's own helpers; if ``toolkit/layouts.py``
changes shape, a step that cannot be rebuilt is reported as skipped rather than guessed.

    python benchmarks/profile_parse.py BUNDLE [--master local[2]] [--repeat 1]

Also prints how many times the physical plan of ``records`` scans the text files (each scan is a
full read and, above the numbering, a full regex pass), and, with ``--jstack``, a poor man's profile:
the JVM's executor threads are sampled with ``jstack`` every second and their top frames counted
(which Java methods the time is spent in: regex matching, string translate, URL decoding, ...).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


class JstackSampler(threading.Thread):
    """Counts the top two frames of Spark executor threads, one jstack every ``interval`` seconds."""

    def __init__(self, jvm_pid: int, interval: float = 1.0):
        super().__init__(daemon=True)
        self.jvm_pid, self.interval = jvm_pid, interval
        self.frames: collections.Counter[str] = collections.Counter()
        self.samples = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.interval):
            try:
                dump = subprocess.run(["jstack", str(self.jvm_pid)], capture_output=True, text=True,
                                      timeout=20).stdout
            except (OSError, subprocess.TimeoutExpired):
                continue
            self.samples += 1
            for thread in dump.split("\n\n"):
                if '"Executor task launch' not in thread:
                    continue
                frames = re.findall(r"^\tat ([\w$.<>]+)\(", thread, re.M)[:1]
                for frame in frames:
                    self.frames[_frame_group(frame)] += 1


def _frame_group(frame: str) -> str:
    """Group a Java frame into what it means for the toolkit (else keep class.method)."""
    groups = (("java.util.regex.", "java.util.regex (regexp_replace/rlike/regexp_extract)"),
              ("UTF8String.translate", "UTF8String.translate (F.translate FIELD_SEP)"),
              ("StringTranslate", "UTF8String.translate (F.translate FIELD_SEP)"),
              ("UTF8String.split", "UTF8String.split (field split)"),
              ("janino", "code generation (janino)"),
              ("parquet", "parquet write/read"),
              ("LineRecordReader", "text reading"), ("HadoopFileLinesReader", "text reading"),
              ("UnsafeExternalSorter", "sort (window / sort-merge join)"),
              ("UnsafeInMemorySorter", "sort (window / sort-merge join)"),
              ("DateTimeFormatter", "timestamp parsing"), ("DateFormatter", "timestamp parsing"),
              ("java.time.", "timestamp parsing"))
    for needle, name in groups:
        if needle in frame:
            return name
    return frame.rsplit(".", 2)[-2] + "." + frame.rsplit(".", 1)[-1]


def jvm_pid_of_this_driver() -> int | None:
    try:
        import psutil
    except ImportError:
        return None
    return next((c.pid for c in psutil.Process(os.getpid()).children(recursive=True) if c.name() == "java"), None)


def noop(df) -> None:
    df.write.format("noop").mode("overwrite").save()


def text_scans(df) -> int:
    """Number of text-file scans the executed physical plan runs (benchmark-only use of JVM internals); the
    plan of a kept (persisted) table is printed under its ``InMemoryRelation`` but read from the cache."""
    try:
        plan = df._jdf.queryExecution().executedPlan().toString()
    except Exception:  # Spark Connect: no JVM handle
        return -1
    scans, kept_depth = 0, None
    for line in plan.splitlines():
        depth = len(line) - len(line.lstrip(" :+-"))
        if kept_depth is not None and depth > kept_depth:
            continue
        kept_depth = depth if "InMemoryRelation" in line else None
        scans += bool(re.search(r"FileScan text|Scan text", line))
    return scans


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=1, help="time each step this many times, keep the best")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--jstack", action="store_true", help="sample executor stacks (needs jstack and psutil)")
    args = parser.parse_args(argv)

    from toolkit import layouts as L
    from toolkit.bundle import open_bundle
    from toolkit.ingest import parse_bundle
    from toolkit.spark import get_spark

    spark = get_spark(master=args.master)
    sampler = None
    if args.jstack:
        pid = jvm_pid_of_this_driver()
        if pid and shutil.which("jstack"):
            sampler = JstackSampler(pid)
            sampler.start()
        else:
            print("--jstack: no JVM pid (psutil missing?) or no jstack on PATH; skipping", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="profile-parse-"))
    bundle = open_bundle(args.bundle, work / "work")
    cat = L.load_layouts()
    readable = [f for f in bundle.logs if f.size]
    detections = {f.source: L.detect_file(f.local_path, cat) for f in readable}
    paths = [str(f.local_path.resolve()) for f in readable]
    files = L._file_table(spark, bundle, readable, detections)
    used = [lay for lay in cat.layouts if any(d.layout == lay.id for d in detections.values())]

    chains = sorted({d.wrappers for d in detections.values()})

    def read_text():
        return spark.read.text(paths)

    def numbered():
        return L._numbered_lines(spark, paths)[0]

    parts: dict[str, object] = {}

    def per_line():
        # _parse_all persists its per-line table and counts continuation lines; time it unpersisted.
        _, _, table = L._parse_all(spark, cat, files, paths, used, chains)
        table.unpersist()
        return table

    def records():
        # A plan of its own, its per-line table persisted and computed (as in parse_bundle) before the
        # timing: unpersisted, each of the table's six readers would parse the text again, and this step
        # took 14 times as long as the whole parse_bundle on 0.25 GB.
        records, _, table = L._parse_all(spark, cat, files, paths, used, chains)
        parts["per_line_table"] = table
        return records

    steps = [
        ("read text (one scan)", read_text),
        ("+ line numbering (split offsets collected, then joined)", numbered),
        ("+ per-line parse (layout regex, JSON, timestamps, wrappers)", per_line),
        ("records from the kept per-line table: fold continuations, join, unparsed lines, redaction", records),
    ]
    results = []
    for name, build in steps:
        try:
            df = build()
        except Exception as exc:  # the module changed shape: say so, do not guess
            results.append({"step": name, "skipped": f"{type(exc).__name__}: {exc}"[:200]})
            continue
        best = min(_timed(lambda: noop(df)) for _ in range(args.repeat))
        results.append({"step": name, "seconds": best, "text_scans": text_scans(df)})
        print(f"  {best:8.1f} s  {name}", file=sys.stderr, flush=True)

    if "per_line_table" in parts:
        parts["per_line_table"].unpersist()
    out = work / "out"
    t = _timed(lambda: parse_bundle(spark, bundle, out))
    results.append({"step": "parse_bundle: + parquet write, state tables, summarize", "seconds": t})
    print(f"  {t:8.1f} s  parse_bundle", file=sys.stderr, flush=True)
    try:
        from toolkit.events import classify

        recs = spark.read.parquet(str((out / "records.parquet").resolve()))
        t = _timed(lambda: noop(classify(recs)))
        results.append({"step": "events.classify on records.parquet", "seconds": t})
        print(f"  {t:8.1f} s  events.classify", file=sys.stderr, flush=True)
    except ImportError:
        pass

    shutil.rmtree(work, ignore_errors=True)
    if sampler:
        sampler.done.set()
        sampler.join()
    spark.stop()
    if args.json:
        print(json.dumps(results))
    else:
        prev = None
        for r in results:
            if "skipped" in r:
                print(f"{'skipped':>9}  {r['step']}: {r['skipped']}")
                continue
            inc = "" if prev is None or r["step"][0] != "+" else f"(+{r['seconds'] - prev:.1f})"
            scans = f" [{r['text_scans']} text scans]" if r.get("text_scans", -1) >= 0 else ""
            print(f"{r['seconds']:8.1f} s {inc:>9}  {r['step']}{scans}")
            prev = r["seconds"]
    if sampler and sampler.frames:
        total = sum(sampler.frames.values())
        print(f"\nexecutor top frames ({sampler.samples} jstack samples, {total} thread samples):")
        for frame, n in sampler.frames.most_common(15):
            print(f"  {100 * n / total:5.1f}%  {frame}")
    return 0


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    sys.exit(main())
