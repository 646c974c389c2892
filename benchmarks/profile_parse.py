"""Where does the toolkit's time go? The parse and classification of one bundle, step by step.

Each step runs to completion on its own (Spark's ``noop`` writer where nothing needs writing), in one
session, in the order the pipeline runs them:

1. reading the text (one scan, nothing else), the floor every step above pays;
2. the parse's first pass (:mod:`toolkit.layouts.records`: each line's layout head tested, counts per split
   and chunk, the lines the layout does not fit kept);
3. the whole parse with its ``records.parquet`` write (``toolkit.ingest.parse_bundle``);
4. the tables derived from the records (``toolkit.events.derive``: events, configuration, run bounds), each
   written with ``noop``.

    python benchmarks/profile_parse.py BUNDLE [--master local[2]] [--jstack]

With ``--jstack``, a poor man's profile per step: the JVM's executor threads are sampled with ``jstack`` every
second and their top frames counted (regex matching, parquet, sorting, text reading, code generation...).
If the modules change shape, a step that cannot be rebuilt is reported as skipped rather than guessed.
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--jstack", action="store_true", help="sample executor stacks (needs jstack and psutil)")
    args = parser.parse_args(argv)

    from toolkit.bundle import open_bundle
    from toolkit.ingest import parse_bundle
    from toolkit.layouts import load_layouts
    from toolkit.layouts.detection import detect_file
    from toolkit.layouts.reading import file_key
    from toolkit.schemas import STORED_RECORD_SCHEMA
    from toolkit.spark import get_spark

    spark = get_spark(master=args.master)
    pid = jvm_pid_of_this_driver() if args.jstack else None
    if args.jstack and not (pid and shutil.which("jstack")):
        print("--jstack: no JVM pid (psutil missing?) or no jstack on PATH; skipping", file=sys.stderr)
        pid = None
    work = Path(tempfile.mkdtemp(prefix="profile-parse-"))
    bundle = open_bundle(args.bundle, work / "work")
    cat = load_layouts()
    readable = [f for f in bundle.logs if f.size]
    detections = {f.source: detect_file(f.local_path, cat) for f in readable}
    out = work / "out"

    def read_text():
        noop(spark.read.text([file_key(f) for f in readable]))

    def first_pass():
        from toolkit.layouts.records import _first_pass
        _first_pass(spark, readable, detections, cat).release()

    def parse():
        parse_bundle(spark, bundle, out)

    def derived():
        from toolkit.events.derive import derive_tables
        records = spark.read.schema(STORED_RECORD_SCHEMA).parquet(str((out / "records.parquet").resolve()))
        tables = derive_tables(records, shapes=False)
        try:
            for name, df in tables.tables.items():
                t = _timed(lambda: noop(df))
                print(f"  {t:8.1f} s    {name}", file=sys.stderr, flush=True)
        finally:
            tables.release()

    steps = [("read text (one scan)", read_text), ("parse: first pass", first_pass),
             ("parse: whole, records.parquet written", parse),
             ("derived tables: events, config, run bounds (noop)", derived)]
    results = []
    for name, step in steps:
        sampler = JstackSampler(pid) if pid else None
        if sampler:
            sampler.start()
        try:
            seconds = _timed(step)
        except Exception as exc:  # the modules changed shape: say so, do not guess
            results.append({"step": name, "skipped": f"{type(exc).__name__}: {exc}"[:200]})
            continue
        finally:
            if sampler:
                sampler.done.set()
                sampler.join()
        frames = dict(sampler.frames.most_common(12)) if sampler else {}
        results.append({"step": name, "seconds": round(seconds, 2), "frames": frames})
        print(f"  {seconds:8.1f} s  {name}", file=sys.stderr, flush=True)

    shutil.rmtree(work, ignore_errors=True)
    spark.stop()
    if args.json:
        print(json.dumps(results))
        return 0
    for r in results:
        if "skipped" in r:
            print(f"{'skipped':>9}  {r['step']}: {r['skipped']}")
            continue
        print(f"{r['seconds']:8.1f} s  {r['step']}")
        total = sum(r["frames"].values())
        for frame, n in r["frames"].items():
            print(f"            {100 * n / total:5.1f}%  {frame}")
    return 0


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    sys.exit(main())
