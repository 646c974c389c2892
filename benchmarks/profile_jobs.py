"""Count the Spark jobs each pipeline step runs on a bundle, and time the steps (a profiling aid).

    python benchmarks/profile_jobs.py sample_logs/kafka-eos-stale-checkpoint --runs 2 [--cache]

Every progress message of ``toolkit.pipeline.analyse`` opens a new job group (through the
SparkContext, which only this script may touch: toolkit code runs on Spark Connect too), then
``run_detectors`` runs in its own group. For each run it prints, per step, the wall seconds and the
number of Spark jobs and stages; ``--jobs`` also lists every job's description (the call site), which
tells which line of the toolkit started it. Run 1 pays JIT warm-up; later runs show the steady state.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--cache", action="store_true", help="use a parse cache (fresh for this script)")
    parser.add_argument("--jobs", action="store_true", help="list each job's call site")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    from toolkit.cache import ParseCache
    from toolkit.options import AnalysisOptions
    from toolkit.detectors import run_detectors
    from toolkit.pipeline import analyse
    from toolkit.spark import get_spark

    spark = get_spark(master=args.master)
    sc = spark.sparkContext
    print(f"session ready in {time.perf_counter() - t0:.1f} s", flush=True)
    tracker = sc.statusTracker()

    def cpu_seconds() -> float:
        """CPU of this process and its JVM: on a shared machine steadier than wall seconds."""
        try:
            import psutil
        except ImportError:
            return float("nan")
        me = psutil.Process()
        return sum(sum(p.cpu_times()[:2]) for p in [me, *me.children(recursive=True)])

    scratch = Path(tempfile.mkdtemp(prefix="profile-jobs-"))
    cache = ParseCache(scratch / "cache") if args.cache else None
    try:
        for run in range(1, args.runs + 1):
            marks: list[tuple[str, float]] = []

            ungrouped: list[set[int]] = []

            def step(name: str) -> None:
                # Jobs started in other threads (concurrent table writes) carry no group: they
                # count for the step during which they appeared.
                group = f"run{run}:{len(marks):02d}:{name[:60]}"
                marks.append((group, time.perf_counter(), cpu_seconds()))
                ungrouped.append(set(tracker.getJobIdsForGroup(None)))
                sc.setJobGroup(group, group)

            step("start")
            # Without --cache the user's default parse cache must not answer either.
            options = AnalysisOptions(use_cache=cache is not None)
            analysis = analyse(spark, args.bundle, scratch / f"out-{run}", options, cache=cache, progress=step)
            step("detectors")
            findings = run_detectors(analysis.timeline)
            step("end")
            total_jobs = total_stages = 0
            print(f"\nrun {run}: {len(findings)} findings")
            print(f"{'step':<70} {'s':>7} {'CPU s':>7} {'jobs':>5} {'stages':>6}")
            for i, ((group, t_start, c_start), (_next, t_end, c_end)) in enumerate(zip(marks, marks[1:])):
                jobs = [*tracker.getJobIdsForGroup(group), *(ungrouped[i + 1] - ungrouped[i])]
                stages = sum(len(tracker.getJobInfo(j).stageIds) for j in jobs if tracker.getJobInfo(j))
                total_jobs += len(jobs)
                total_stages += stages
                print(f"{group:<70} {t_end - t_start:7.2f} {c_end - c_start:7.2f} {len(jobs):5d} {stages:6d}")
                if args.jobs:
                    sites = Counter()
                    for j in jobs:
                        info = tracker.getJobInfo(j)
                        stage = tracker.getStageInfo(info.stageIds[-1]) if info and info.stageIds else None
                        sites[stage.name if stage else "?"] += 1
                    for site, n in sites.most_common():
                        print(f"      {n:4d} x {site}")
            print(f"{'total':<70} {marks[-1][1] - marks[0][1]:7.2f} {marks[-1][2] - marks[0][2]:7.2f} "
                  f"{total_jobs:5d} {total_stages:6d}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
