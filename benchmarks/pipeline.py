"""The toolkit pipeline as the benchmark runs it, and a worker that times it in one process.

Stages are discovered at run time, so the same benchmark grows with the product:

* if ``toolkit.pipeline.analyse`` exists (the product's one-call pipeline: parse -> events -> state
  -> timeline, each table written to parquet), it is run and split into ``parse``/``events``/
  ``timeline`` by the times of its progress messages; then ``toolkit.detectors.run_detectors``;
* otherwise each stage that exists is called in turn: ``toolkit.ingest.parse_bundle``,
  ``toolkit.events.tag_runs(classify(records))``, ``toolkit.timeline.<build_timeline|build|timeline>``,
  ``toolkit.detectors.<run_detectors|detect|run_all|run>``.

A stage whose entry point is missing or whose signature we cannot satisfy is reported as skipped,
with the reason, instead of failing the benchmark. Lazy DataFrames are forced with Spark's ``noop``
writer, which runs the whole plan without writing anything, so a stage is timed for all its work.

As a worker (``python benchmarks/pipeline.py BUNDLE [BUNDLE ...] --master local[2] --repeat 2``) it
starts a session (its driver JVM's options chosen for the bundles' size, as ``detect`` chooses them), runs
the pipeline ``--repeat`` times per bundle on fresh output folders and prints one JSON line: session start
time, per-run stage times (``runs`` for the first bundle, ``by_bundle`` for all; with ``--cached-runs``,
``cached_by_bundle``: the run that fills a parse cache, then the runs that read it), and the peak memory of
this Python driver process.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import resource
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

T_PROCESS_START = time.perf_counter()  # as early as possible: cold time includes imports

# Names a parse cache switch may take in parse_bundle's signature (the cache is being added).
CACHE_SWITCHES = ("cache", "use_cache", "reuse", "reuse_cache")


@dataclass
class Stage:
    name: str
    run: Callable[[dict], Any] | None  # takes the results so far, returns this stage's result
    skipped: str = ""  # why it is not run


@dataclass
class RunTimes:
    stages: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.stages.values())


def _optional(module: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            return None
        raise  # the module exists but is broken: that is a real failure


def _first_attr(module, names: tuple[str, ...]):
    for name in names:
        fn = getattr(module, name, None)
        if callable(fn):
            return name, fn
    return None, None


def force(result: Any) -> None:
    """Run every lazy DataFrame in ``result`` to completion (nothing is written)."""
    from pyspark.sql import DataFrame

    if isinstance(result, DataFrame):
        result.write.format("noop").mode("overwrite").save()
    elif isinstance(result, dict):
        for value in result.values():
            force(value)
    elif isinstance(result, (list, tuple)):
        for value in result:
            force(value)
    elif hasattr(result, "__dataclass_fields__"):
        for name in result.__dataclass_fields__:
            force(getattr(result, name))


def _call_flexibly(fn: Callable, results: dict, spark) -> Any:
    """Call a later-stage entry point with what it asks for, by parameter name."""
    available = {"spark": spark, **results, "df": results.get("events"), "records": results.get("records")}
    args = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty:
            continue
        if p.name not in available or available[p.name] is None:
            raise TypeError(f"{fn.__module__}.{fn.__name__} needs '{p.name}', which the benchmark cannot supply")
        args.append(available[p.name])
    return fn(*args)


def _cache_kwargs(fn, scratch: Path, use_cache: bool) -> tuple[dict, str | None]:
    """Keyword that turns the parse cache on or off, if ``fn`` has one (None = no cache yet)."""
    params = inspect.signature(fn).parameters
    switch = next((name for name in CACHE_SWITCHES if name in params), None)
    if switch is None or not use_cache:
        return {}, switch  # the caller turns the default cache off: every warm run parses for real
    from toolkit.cache import ParseCache

    return {switch: ParseCache(scratch / "parse-cache")}, switch


def discover_stages(spark, bundle: Path, out_dir_of: Callable[[], Path], scratch: Path,
                    use_cache: bool) -> tuple[list[Stage], str | None]:
    """The stages present in this checkout, each a callable that records its result."""
    pipeline_mod = _optional("toolkit.pipeline")
    analyse = getattr(pipeline_mod, "analyse", None) if pipeline_mod else None
    if analyse is not None:
        return _stages_via_analyse(spark, analyse, bundle, out_dir_of, scratch, use_cache)
    return _stages_one_by_one(spark, bundle, out_dir_of, scratch, use_cache)


# toolkit.pipeline.analyse reports progress; these messages start the next stage.
STAGE_MESSAGES = (("classifying events", "events"), ("reconstructing the timeline", "timeline"))


def _stages_via_analyse(spark, analyse, bundle, out_dir_of, scratch, use_cache):
    """parse -> events -> state -> timeline through the product's own one-call pipeline.

    The stage split comes from the times of its progress messages, so the benchmark does not
    re-implement the pipeline and cannot drift from it.
    """
    cache_kw, switch = _cache_kwargs(analyse, scratch, use_cache)

    def run_analyse(results: dict):
        marks = [(time.perf_counter(), "parse")]

        def progress(message: str) -> None:
            for prefix, stage in STAGE_MESSAGES:
                if message.startswith(prefix):
                    marks.append((time.perf_counter(), stage))

        if switch is not None and not use_cache and "options" in inspect.signature(analyse).parameters:
            # No cache given means none at all: the user's default parse cache must not answer a "parse".
            from toolkit.options import AnalysisOptions

            cache_kw["options"] = AnalysisOptions(use_cache=False)
        results["analysis"] = analyse(spark, bundle, out_dir_of(), progress=progress, **cache_kw)
        marks.append((time.perf_counter(), "end"))
        results["split"] = {stage: t1 - t0 for (t0, stage), (t1, _) in zip(marks, marks[1:])}
        return None  # analyse writes every table to parquet: the work is done

    stages = [Stage("analyse", run_analyse)]
    det_mod = _optional("toolkit.detectors")
    run_detectors = getattr(det_mod, "run_detectors", None) if det_mod else None
    if run_detectors:
        def detect(results: dict):
            results["findings"] = run_detectors(results["analysis"].timeline)
            return None  # detectors return findings (Python objects): their Spark jobs already ran
        stages.append(Stage("detect", detect))
    else:
        stages.append(Stage("detect", None, "toolkit.detectors.run_detectors not present"))
    return stages, switch


def _stages_one_by_one(spark, bundle, out_dir_of, scratch, use_cache):
    """Fallback for checkouts without toolkit.pipeline: call each stage that exists."""
    from toolkit.ingest import parse_bundle

    cache_kw, switch = _cache_kwargs(parse_bundle, scratch, use_cache)

    def parse(results: dict):
        out = out_dir_of()
        bundle_obj, report, records = parse_bundle(spark, bundle, out, **cache_kw)
        results.update(bundle=bundle_obj, report=report, records=records, out=out)
        return None  # parse_bundle already wrote and read back records.parquet

    stages = [Stage("parse", parse)]

    events_mod = _optional("toolkit.events")
    classify = getattr(events_mod, "classify", None) if events_mod else None
    tag_runs = getattr(events_mod, "tag_runs", None) if events_mod else None
    if classify and tag_runs:
        def events(results: dict):
            results["events"] = tag_runs(classify(results["records"]))
            return results["events"]
        stages.append(Stage("events", events))
    else:
        stages.append(Stage("events", None, "toolkit.events.classify not present"))

    for name, module, entry_points in (
        ("timeline", "toolkit.timeline", ("build_timeline", "build", "timeline")),
        ("detect", "toolkit.detectors", ("run_detectors", "detect", "run_all", "run")),
    ):
        mod = _optional(module)
        fn_name, fn = _first_attr(mod, entry_points) if mod else (None, None)
        if fn is None:
            why = f"{module} not present" if mod is None else f"no entry point among {', '.join(entry_points)}"
            stages.append(Stage(name, None, why))
            continue

        def later(results: dict, fn=fn, name=name):
            results[name] = _call_flexibly(fn, results, spark)
            return results[name]
        stages.append(Stage(name, later))
    return stages, switch


def run_once(stages: list[Stage]) -> RunTimes:
    times = RunTimes()
    results: dict = {}
    try:
        return _run_stages(stages, times, results)
    finally:
        # analyse() is one call: replace its total by the per-stage split from its progress messages
        if "analyse" in times.stages and results.get("split"):
            del times.stages["analyse"]
            times.stages = {**results["split"], **times.stages}


def _run_stages(stages: list[Stage], times: RunTimes, results: dict) -> RunTimes:
    for stage in stages:
        if stage.run is None:
            continue
        print(f"  stage {stage.name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            force(stage.run(results))
        except TypeError as exc:  # a later stage whose signature we guessed wrong: skip, say why
            if stage.name in ("timeline", "detect"):
                stage.run, stage.skipped = None, f"cannot call: {exc}"
                continue
            raise
        times.stages[stage.name] = time.perf_counter() - t0
    return times


def peak_rss_mb() -> float:
    """Peak resident memory of this Python process (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time the toolkit pipeline in one process (prints JSON).")
    parser.add_argument("bundle", type=Path, nargs="+", help="one or more bundles, each run --repeat times")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=2, help="runs in the same session (run 1 is cold-ish)")
    parser.add_argument("--scratch", type=Path, required=True, help="folder for per-run output (deleted after)")
    parser.add_argument("--driver-memory", default=None, help="spark.driver.memory, e.g. 4g")
    parser.add_argument("--use-cache", action="store_true", help="let parse_bundle reuse its parse cache")
    parser.add_argument("--cached-runs", type=int, default=0,
                        help="after the --repeat runs, fill a parse cache of this worker's own with one more run, "
                             "then run this many times on it (a re-analysis as a notebook re-run makes it)")
    args = parser.parse_args(argv)

    from toolkit.jvm import input_bytes
    from toolkit.spark import get_spark

    conf = {"spark.driver.memory": args.driver_memory} if args.driver_memory else {}
    t0 = time.perf_counter()
    # The driver starts as `detect`'s and a notebook's do: its JVM options follow the size of what it reads.
    spark = get_spark(master=args.master, conf=conf, input_bytes=input_bytes(args.bundle))
    session_s = time.perf_counter() - t0

    by_bundle: dict[str, list[dict]] = {}
    cached_by_bundle: dict[str, list[dict]] = {}  # the run that fills the cache first, then the cached runs
    stage_sets = []
    for n, bundle in enumerate(args.bundle):
        run_dir = args.scratch / f"bundle-{n}"
        counter = {"run": 0}

        def fresh_out(run_dir=run_dir, counter=counter) -> Path:
            out = run_dir / f"run-{counter['run']}"
            shutil.rmtree(out, ignore_errors=True)
            return out

        stages, cache_switch = discover_stages(spark, bundle, fresh_out, run_dir, args.use_cache)
        stage_sets.append(stages)
        runs = []
        for counter["run"] in range(1, args.repeat + 1):
            runs.append(run_once(stages).stages)
            shutil.rmtree(run_dir / f"run-{counter['run']}", ignore_errors=True)
        by_bundle[bundle.name] = runs
        if args.cached_runs:
            cached_dir = args.scratch / f"bundle-{n}-cached"
            stages, _ = discover_stages(spark, bundle, fresh_out, cached_dir, True)
            cached = []
            for counter["run"] in range(args.repeat + 1, args.repeat + args.cached_runs + 2):
                cached.append(run_once(stages).stages)
                shutil.rmtree(run_dir / f"run-{counter['run']}", ignore_errors=True)
            shutil.rmtree(cached_dir, ignore_errors=True)
            cached_by_bundle[bundle.name] = cached
    print(json.dumps({
        "master": args.master,
        "spark_version": spark.version,
        "import_s": t0 - T_PROCESS_START,
        "session_s": session_s,
        "runs": next(iter(by_bundle.values())),
        "by_bundle": by_bundle,
        "cached_by_bundle": cached_by_bundle,
        "skipped": {s.name: s.skipped for s in stage_sets[0] if s.run is None},
        "cache_switch": cache_switch,
        "driver_peak_rss_mb": peak_rss_mb(),
    }), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
