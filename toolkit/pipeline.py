"""The whole pipeline in one call: bundle -> records -> events -> state -> timeline.

Each stage's table is written to ``out_dir`` as parquet and read back, so later stages (and
notebooks, detectors, charts) work from compact columnar files instead of recomputing the parse.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pyspark.sql import DataFrame, SparkSession

from toolkit.bundle import Bundle
from toolkit.cache import ParseCache
from toolkit.ingest import STATE_TABLES, IngestReport, parse_bundle
from toolkit.timeline import StateFacts, Timeline, build_timeline

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

    schema_of = {
        "state_files": state_schemas.STATE_FILES_SCHEMA, "checkpoints": state_schemas.CHECKPOINTS_SCHEMA,
        "dynamo_tables": state_schemas.DYNAMO_TABLES_SCHEMA, "dynamo_items": state_schemas.DYNAMO_ITEMS_SCHEMA,
        "cloudtrail": state_schemas.CLOUDTRAIL_SCHEMA, "nifi_state": state_schemas.NIFI_STATE_SCHEMA,
    }
    tables = {}
    for name in STATE_TABLES:
        path = out / "state" / f"{name}.parquet"
        tables[name] = (spark.read.parquet(str(path.resolve())) if path.exists()
                        else spark.createDataFrame([], schema_of[name]))
    return StateFacts(**tables)


#: Bump when events/config/unknown_shapes change for the same records (cached copies become stale).
EVENTS_FORMAT = 1
DERIVED_TABLES = ("events", "config", "unknown_shapes")


def classify_records(spark: SparkSession, records: DataFrame, out: Path,
                     progress: Progress | None = None, cache: ParseCache | None = None) -> tuple[DataFrame, DataFrame]:
    """Write ``events.parquet`` (classified, run-tagged), ``config.parquet`` and ``unknown_shapes.parquet``.

    With the parse cache of the run that produced ``records``, a bundle whose files are all unchanged
    since an earlier run gets these tables copied from the cache instead of classified again.
    """
    from toolkit.cache import templates_digest
    from toolkit.events import classify, extract_config, tag_runs, unknown_shapes

    say = progress or (lambda _m: None)
    paths = {name: str((out / f"{name}.parquet").resolve()) for name in DERIVED_TABLES}
    kept = (cache.derived_dir(cache.last_file_keys, f"{EVENTS_FORMAT}|{templates_digest()}")
            if cache is not None and cache.last_file_keys else None)
    if kept is not None and (kept / "complete").is_file():
        say("events unchanged since an earlier run (cache)")
        for name in DERIVED_TABLES:
            shutil.rmtree(paths[name], ignore_errors=True)
            shutil.copytree(kept / f"{name}.parquet", paths[name])
    else:
        say("classifying events")
        tag_runs(classify(records)).write.mode("overwrite").parquet(paths["events"])
        extract_config(records).write.mode("overwrite").parquet(paths["config"])
        unknown_shapes(records).write.mode("overwrite").parquet(paths["unknown_shapes"])
        if kept is not None:
            _keep_derived(kept, paths)
    return spark.read.parquet(paths["events"]), spark.read.parquet(paths["config"])


def _keep_derived(kept: Path, paths: dict[str, str]) -> None:
    """Copy the derived tables into the cache; the ``complete`` marker goes last."""
    shutil.rmtree(kept, ignore_errors=True)
    kept.mkdir(parents=True)
    for name, path in paths.items():
        shutil.copytree(path, kept / f"{name}.parquet")
    (kept / "complete").write_text("")


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
    events, config = classify_records(spark, records, out, progress=say, cache=cache)
    say("reconstructing the timeline")
    timeline = build_timeline(events, _state_facts(spark, out), config)
    if write_timeline:
        timeline.write(out)
        timeline = _reload(spark, timeline, out)
    return Analysis(bundle=opened, ingest=report, records=records, events=events, timeline=timeline, out_dir=out)


def _reload(spark: SparkSession, timeline: Timeline, out: Path) -> Timeline:
    """Swap each derived table for its parquet copy (later queries skip the window functions)."""
    tables = {name: spark.read.parquet(str((out / f"{name}.parquet").resolve())) for name in timeline.tables()}
    return Timeline(events=timeline.events, config=timeline.config, state=timeline.state, notes=timeline.notes,
                    **tables)
