"""The whole pipeline in one call: bundle -> records -> events -> state -> timeline.

Each stage's table is written to ``out_dir`` as parquet and read back, so later stages (and
notebooks, detectors, charts) work from compact columnar files instead of recomputing the parse.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from pyspark.sql import DataFrame, SparkSession

from toolkit.bundle import Bundle
from toolkit.cache import ParseCache
from toolkit.ingest import STATE_TABLES, IngestReport, parse_bundle
from toolkit.timeline import StateFacts, Timeline, build_timeline
from toolkit.timeline.build import config_with_runs
from toolkit.timeline.schemas import TABLES as TIMELINE_TABLES

Progress = Callable[[str], None]


@dataclass
class Analysis:
    """Everything known about one bundle."""

    bundle: Bundle
    ingest: IngestReport
    records: DataFrame
    events: DataFrame
    timeline: Timeline
    out_dir: Path


def _state_facts(spark: SparkSession, out: Path) -> StateFacts:
    from toolkit.state import schemas as state_schemas

    schema_of = state_schemas.STATE_SCHEMAS
    tables = {}
    for name in STATE_TABLES:
        path = out / "state" / f"{name}.parquet"
        tables[name] = (spark.read.parquet(str(path.resolve())) if path.exists()
                        else spark.createDataFrame([], schema_of[name]))
    return StateFacts(**tables)


DERIVED_TABLES = ("events", "config", "unknown_shapes", "run_bounds")


def classify_records(spark: SparkSession, records: DataFrame, out: Path, progress: Progress | None = None,
                     cache: ParseCache | None = None, file_keys: list[str] | None = None
                     ) -> tuple[DataFrame, DataFrame]:
    """Write ``events.parquet`` (classified, run-tagged), ``config.parquet``, ``unknown_shapes.parquet`` and
    ``run_bounds.parquet`` (first and last line of each process run among all records).

    With the parse cache and the cache keys of the files behind ``records``, a bundle whose files
    are all unchanged since an earlier run gets these tables copied from the cache instead.
    """
    from toolkit.events import classify, extract_config, run_bounds, tag_runs, unknown_shapes

    say = progress or (lambda _m: None)
    paths = _table_paths(out, DERIVED_TABLES)
    kept = cache.derived_dir(file_keys, "events") if cache is not None and file_keys else None
    if kept is not None and cache.restore_derived(kept, paths):
        say("events unchanged since an earlier run (cache)")
    else:
        say("classifying events")
        tag_runs(classify(records)).write.mode("overwrite").parquet(paths["events"])
        extract_config(records).write.mode("overwrite").parquet(paths["config"])
        unknown_shapes(records).write.mode("overwrite").parquet(paths["unknown_shapes"])
        run_bounds(records).write.mode("overwrite").parquet(paths["run_bounds"])
        if kept is not None:
            cache.store_derived(kept, paths)
    return spark.read.parquet(paths["events"]), spark.read.parquet(paths["config"])


def analyse(
    spark: SparkSession,
    bundle: Bundle | Path | str | list,
    out_dir: Path | str,
    *,
    timezone: str | None = None,
    work_dir: Path | str | None = None,
    cache: ParseCache | None = None,
    progress: Progress | None = None,
    write_timeline: bool = True,
    redact: bool = True,
) -> Analysis:
    """Parse, classify and reconstruct the timeline of a bundle; tables land in ``out_dir``."""
    say = progress or (lambda _m: None)
    out = Path(out_dir)
    opened, report, records = parse_bundle(spark, bundle, out, timezone=timezone, work_dir=work_dir,
                                           progress=say, cache=cache, redact=redact)
    events, config = classify_records(spark, records, out, progress=say, cache=cache, file_keys=report.file_keys)
    state = _state_facts(spark, out)
    timeline = None
    if write_timeline:
        timeline = _cached_timeline(spark, events, state, config, out, cache, report, say)
    if timeline is None:
        say("reconstructing the timeline")
        bounds_path = out / "run_bounds.parquet"
        bounds = spark.read.parquet(str(bounds_path.resolve())) if bounds_path.exists() else None
        timeline = build_timeline(events, state, config, bounds)
        if write_timeline:
            timeline.write(out)
            timeline = _reload(spark, timeline, out)
            if cache is not None and report.file_keys:
                cache.store_derived(_timeline_key(cache, report), _table_paths(out, TIMELINE_TABLES))
    return Analysis(bundle=opened, ingest=report, records=records, events=events, timeline=timeline, out_dir=out)


def _table_paths(out: Path, names: Iterable[str]) -> dict[str, str]:
    return {name: str((out / f"{name}.parquet").resolve()) for name in names}


def _timeline_key(cache: ParseCache, report: IngestReport) -> Path:
    return cache.derived_dir([*report.file_keys, f"state:{report.state_digest}"], "timeline")


def _cached_timeline(spark: SparkSession, events: DataFrame, state: StateFacts, config: DataFrame, out: Path,
                     cache: ParseCache | None, report: IngestReport, say: Progress) -> Timeline | None:
    """The timeline tables of an earlier run on the same files and state facts, copied into ``out``."""
    if cache is None or not report.file_keys:
        return None
    paths = _table_paths(out, TIMELINE_TABLES)
    if not cache.restore_derived(_timeline_key(cache, report), paths):
        return None
    say("timeline unchanged since an earlier run (cache)")
    tables = {name: spark.read.parquet(path) for name, path in paths.items()}
    return Timeline(events=events, config=config_with_runs(events, config), state=state, **tables)


def _reload(spark: SparkSession, timeline: Timeline, out: Path) -> Timeline:
    """Swap each derived table for its parquet copy (later queries skip the window functions)."""
    tables = {name: spark.read.parquet(path) for name, path in _table_paths(out, timeline.tables()).items()}
    return Timeline(events=timeline.events, config=timeline.config, state=timeline.state, notes=timeline.notes,
                    **tables)
