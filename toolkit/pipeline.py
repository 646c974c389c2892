"""The spine: bundle -> records -> events -> state -> timeline -> findings.

:func:`run` is the one entry every command, notebook and the Explorer calls (with one
:class:`~toolkit.options.AnalysisOptions`); it returns an :class:`Investigation` and writes
``out_dir/findings.json``. :func:`analyse` is the part before the detectors.

Each stage's table is written to ``out_dir`` as parquet once, and later stages (and notebooks,
detectors, charts) read the files instead of recomputing the parse. Tables are read back with
their schema given, so reading plans without a Spark job; with the parse cache, unchanged inputs
bring their tables from the cache as hard links instead of being written again.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone as dt_timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from toolkit import utc
from toolkit.bundle import Bundle
from toolkit.cache import ParseCache
from toolkit.cache_admin import trim_if_due
from toolkit.catalogue.user import activate as activate_catalogue
from toolkit.detectors import DetectorResults, findings_to_json, run_detectors
from toolkit.detectors.base import ERROR, Finding
from toolkit.detectors.runner import EVIDENCE_UNREAD
from toolkit.events.derive import DERIVED_TABLES, SHAPES_TABLE, derive_tables
from toolkit.ingest import IngestReport, parse_bundle, write_tables
from toolkit.jvm import input_bytes, is_small, plan_for_input
from toolkit.options import AnalysisOptions
from toolkit.spark import release
from toolkit.state.schemas import STATE_SCHEMAS
from toolkit.tables import check_table
from toolkit.timeline import StateFacts, Timeline, build_timeline
from toolkit.timeline.build import config_with_runs
from toolkit.timeline.schemas import TABLES as TIMELINE_TABLES

Progress = Callable[[str], None]


FINDINGS_FILE = "findings.json"


@dataclass
class Analysis:
    """Everything known about one bundle."""

    bundle: Bundle
    ingest: IngestReport
    records: DataFrame
    events: DataFrame
    timeline: Timeline
    out_dir: Path


def _state_facts(spark: SparkSession, out: Path, small: bool = False) -> StateFacts:
    tables = {}
    for name, schema in STATE_SCHEMAS.items():
        path = out / "state" / f"{name}.parquet"
        tables[name] = (_read(spark, str(path.resolve()), schema, small) if path.exists()
                        else utc.create_frame(spark, [], schema))
    return StateFacts(**tables)


#: Records of an input up to this size are classified in one task as well: their per-line template
#: dispatch is then cheaper than a stage's overhead. Larger small inputs keep their task threads busy on it.
ONE_TASK_CLASSIFY_BYTES = 4 * 2**20


def _one_partition(df: DataFrame, small: bool) -> DataFrame:
    """A small input's table as a single partition (unchanged otherwise).

    Every window, aggregate and join over a single partition is already laid out as it needs, so a
    query on a small bundle runs as one stage instead of a shuffle per operator: on a sample the time
    goes to per-stage overhead, not to rows. Large inputs keep their partitions for the task threads.
    """
    return df.coalesce(1) if small else df


def classify_records(spark: SparkSession, records: DataFrame, out: Path, progress: Progress | None = None,
                     cache: ParseCache | None = None, file_keys: list[str] | None = None, *, shapes: bool = True,
                     small: bool = False, tiny: bool = False) -> tuple[DataFrame, DataFrame, DataFrame]:
    """Write ``events.parquet`` (classified, run-tagged), ``config.parquet`` and ``run_bounds.parquet`` (first
    and last line of each process run among all records), and with ``shapes`` ``unknown_shapes.parquet``.

    With the parse cache and the cache keys of the files behind ``records``, a bundle whose files
    are all unchanged since an earlier run gets these tables from the cache instead (unknown shapes are
    kept apart: a ``detect`` run does not derive them, a later ``parse`` of the same bundle does).
    ``small``: the input is small (:func:`toolkit.jvm.is_small`), its tables are queried as one partition;
    ``tiny``: at most :data:`ONE_TASK_CLASSIFY_BYTES`, its records are classified as one partition too.
    Returns the events, configuration and run-bounds tables, read back with their known schemas.
    """
    say = progress or (lambda _m: None)
    paths = _table_paths(out, DERIVED_TABLES)
    shape_path = _table_paths(out, [SHAPES_TABLE]) if shapes else {}
    kept = cache.derived_dir(file_keys, "events") if cache is not None and file_keys else None
    kept_shapes = cache.derived_dir(file_keys, SHAPES_TABLE) if kept is not None and shapes else None
    schemas = cache.restore_derived(kept, paths) if kept is not None else None
    if shapes and (kept_shapes is None or not cache.restore_derived(kept_shapes, shape_path)):
        schemas = None  # derived together below: the template dispatch is shared
    if schemas:
        say("events unchanged since an earlier run (cache)")
    else:
        say("classifying events")
        derived = derive_tables(_one_partition(records, tiny), shapes=shapes, exact_bounds=small)
        try:
            write_tables(derived.tables, {**paths, **shape_path})
        finally:
            derived.release()
        schemas = {name: df.schema for name, df in derived.tables.items()}
        for name, schema in schemas.items():  # the schemas are known already: checking them costs no job
            check_table(schema, name)
        if kept is not None:
            cache.store_derived(kept, paths, schemas)
        if kept_shapes is not None:
            cache.store_derived(kept_shapes, shape_path, schemas)
    return tuple(_read(spark, paths[name], schemas[name], small) for name in ("events", "config", "run_bounds"))


def _held(df: DataFrame, small: bool) -> DataFrame:
    """A small input's table read once into memory (unchanged otherwise).

    The timeline and the detectors query these tables dozens of times; on a small bundle each query's cost
    is mostly planning and opening files, which a table in memory with a one-node plan avoids. A local
    checkpoint is lost with its executor, which a seconds-long analysis can afford (see
    :func:`toolkit.timeline.build_timeline`); a large input keeps reading its files.
    """
    return df.localCheckpoint() if small else df


def _read(spark: SparkSession, path: str, schema: StructType, small: bool = False) -> DataFrame:
    """A parquet table the pipeline wrote, read with its known schema (no job to infer it); see
    :func:`_one_partition` for ``small``."""
    return _one_partition(spark.read.schema(schema).parquet(path), small)


@dataclass
class Parsed:
    """A bundle parsed and classified: the tables ``stream-incident parse`` writes."""

    bundle: Bundle
    ingest: IngestReport
    records: DataFrame
    events: DataFrame
    config: DataFrame
    out_dir: Path
    #: Each process run's first and last line among all records (``run_bounds.parquet``).
    run_bounds: DataFrame | None = None
    #: The input is small (:func:`toolkit.jvm.is_small`): later stages query its tables as one partition.
    small: bool = False


def parse(
    spark: SparkSession,
    bundle: Bundle | Path | str | list,
    out_dir: Path | str,
    options: AnalysisOptions | None = None,
    *,
    cache: ParseCache | None = None,
    progress: Progress | None = None,
    shapes: bool = True,
) -> Parsed:
    """Read every line of the bundle into records, classify them into events; tables land in ``out_dir``.

    ``cache`` overrides the parse cache ``options`` would open (tests give their own); ``shapes`` also
    writes ``unknown_shapes.parquet`` (what no template classifies)."""
    options = options or AnalysisOptions()
    cache = cache if cache is not None else options.parse_cache()
    say = progress or (lambda _m: None)
    parsed = _parse(spark, bundle, out_dir, options, cache, say, shapes)
    if cache is not None:
        trim_if_due(cache, say)
    return parsed


def _parse(spark: SparkSession, bundle: Bundle | Path | str | list, out_dir: Path | str, options: AnalysisOptions,
           cache: ParseCache | None, say: Progress, shapes: bool) -> Parsed:
    out = Path(out_dir)
    user = options.user_catalogue()
    activate_catalogue(user)  # before the bundle is read: the user's layouts read lines, its templates classify
    if cache is not None:
        cache.use_catalogue(user.digest if user is not None else "")
    size = input_bytes(_bundle_paths(bundle))
    plan_for_input(spark, size)
    opened, report, records = parse_bundle(spark, bundle, out, timezone=options.log_timezone,
                                           work_dir=options.work_dir, progress=say, cache=cache,
                                           redact=options.redact)
    small = is_small(size)
    events, config, bounds = classify_records(spark, records, out, progress=say, cache=cache,
                                              file_keys=report.file_keys, shapes=shapes, small=small,
                                              tiny=small and size <= ONE_TASK_CLASSIFY_BYTES)
    return Parsed(bundle=opened, ingest=report, records=records, events=events, config=config, out_dir=out,
                  run_bounds=bounds, small=small)


def _bundle_paths(bundle: Bundle | Path | str | list) -> list:
    if isinstance(bundle, Bundle):
        return [f.local_path for f in bundle.logs]
    return list(bundle) if isinstance(bundle, list) else [bundle]


def analyse(
    spark: SparkSession,
    bundle: Bundle | Path | str | list,
    out_dir: Path | str,
    options: AnalysisOptions | None = None,
    *,
    cache: ParseCache | None = None,
    progress: Progress | None = None,
    write_timeline: bool = True,
    shapes: bool = True,
) -> Analysis:
    """Parse, classify and reconstruct the timeline of a bundle; tables land in ``out_dir``.

    ``cache`` overrides the parse cache ``options`` would open (tests give their own); ``shapes``: see
    :func:`parse`."""
    options = options or AnalysisOptions()
    cache = cache if cache is not None else options.parse_cache()
    say = progress or (lambda _m: None)
    parsed = _parse(spark, bundle, out_dir, options, cache, say, shapes)
    out, report, small = parsed.out_dir, parsed.ingest, parsed.small
    events, config, bounds = (_held(df, small) for df in (parsed.events, parsed.config, parsed.run_bounds))
    state = _state_facts(spark, out, small)
    timeline = None
    if write_timeline:
        timeline = _cached_timeline(spark, events, state, config, out, cache, report, say, small)
    if timeline is None:
        say("reconstructing the timeline")
        held: list[DataFrame] = []  # a large input's shared tables, kept while the timeline is written
        timeline = build_timeline(events, state, config, bounds, materialize_shared=small,
                                  held=held if write_timeline else None)
        if write_timeline:
            try:
                write_tables(timeline.tables(), _table_paths(out, TIMELINE_TABLES))
            finally:
                release(held)
            timeline = _reload(spark, timeline, out, small)
            if cache is not None and report.file_keys:
                cache.store_derived(_timeline_key(cache, report), _table_paths(out, TIMELINE_TABLES), TIMELINE_TABLES)
    if cache is not None:  # after the timeline: its kept tables, read just now, count as used
        trim_if_due(cache, say)
    return Analysis(bundle=parsed.bundle, ingest=report, records=parsed.records, events=events, timeline=timeline,
                    out_dir=out)


def _table_paths(out: Path, names: Iterable[str]) -> dict[str, str]:
    return {name: str((out / f"{name}.parquet").resolve()) for name in names}


def _timeline_key(cache: ParseCache, report: IngestReport) -> Path:
    return cache.derived_dir([*report.file_keys, f"state:{report.state_digest}"], "timeline")


def _cached_timeline(spark: SparkSession, events: DataFrame, state: StateFacts, config: DataFrame, out: Path,
                     cache: ParseCache | None, report: IngestReport, say: Progress, small: bool = False
                     ) -> Timeline | None:
    """The timeline tables of an earlier run on the same files and state facts, copied into ``out``."""
    if cache is None or not report.file_keys:
        return None
    paths = _table_paths(out, TIMELINE_TABLES)
    schemas = cache.restore_derived(_timeline_key(cache, report), paths)
    if not schemas:
        return None
    say("timeline unchanged since an earlier run (cache)")
    tables = {name: _read(spark, path, schemas.get(name, TIMELINE_TABLES[name]), small) for name, path in paths.items()}
    return Timeline(events=events, config=config_with_runs(events, config), state=state, **tables)


def _reload(spark: SparkSession, timeline: Timeline, out: Path, small: bool = False) -> Timeline:
    """Swap each derived table for its parquet copy (later queries skip the window functions).

    Every table is built to its contract in ``toolkit.timeline.schemas``, so that is its schema and
    no file is opened until a query runs."""
    tables = {name: _read(spark, path, TIMELINE_TABLES[name], small)
              for name, path in _table_paths(out, timeline.tables()).items()}
    return Timeline(events=timeline.events, config=timeline.config, state=timeline.state, notes=timeline.notes,
                    **tables)


@dataclass
class Investigation:
    """One analysed bundle and its ranked findings: what :func:`run` returns."""

    analysis: Analysis
    findings: list[Finding]
    options: AnalysisOptions
    bundle_label: str
    started: datetime
    seconds: float

    @property
    def timeline(self) -> Timeline:
        return self.analysis.timeline

    @property
    def findings_path(self) -> Path:
        """``out_dir/findings.json``, written by :func:`run`."""
        return self.analysis.out_dir / FINDINGS_FILE

    def findings_document(self) -> dict[str, Any]:
        """The findings as the JSON object of ``docs/findings-schema.md``, with what the detectors had to read
        (``ingest``: a bundle with nothing readable must not pass for a clean one)."""
        return findings_document(self.findings, self.bundle_label, self.analysis.ingest.readability())


def bundle_label(bundle: Bundle | Path | str | list) -> str:
    """How ``findings.json`` names the bundle: its absolute path (paths joined by ``, `` for loose files),
    the same whichever entry point and working directory it was given from."""
    if isinstance(bundle, Bundle):
        items = bundle.inputs or [bundle.root]  # an opened bundle is named by what it was opened from
    else:
        items = bundle if isinstance(bundle, (list, tuple)) else [bundle]
    return ", ".join(str(Path(os.fspath(b)).expanduser().resolve()) for b in items)


def findings_document(findings: list[Finding], label: str, ingest: dict[str, Any] | None = None) -> dict[str, Any]:
    """``findings.json``'s object for these findings of the bundle named ``label``; ``ingest`` is the bundle's
    :meth:`toolkit.ingest.IngestReport.readability`."""
    return findings_to_json(findings, bundle=label, **({"ingest": ingest} if ingest is not None else {}))


def findings_text(document: dict[str, Any]) -> str:
    """``findings.json``'s exact text (``detect --format json`` prints the same)."""
    return json.dumps(document, indent=2, default=str) + "\n"


def run(
    spark: SparkSession,
    bundle: Bundle | Path | str | list,
    out_dir: Path | str,
    options: AnalysisOptions | None = None,
    *,
    progress: Progress | None = None,
) -> Investigation:
    """Analyse ``bundle`` into ``out_dir``, run the detectors and write ``out_dir/findings.json``.

    The one spine behind ``stream-incident detect`` and ``report``, the notebooks and the Explorer:
    the same bundle and options give a byte-identical ``findings.json`` from each of them.
    Raises ``KeyError`` for an unknown detector id in ``options.detectors``.
    """
    options = options or AnalysisOptions()
    say = progress or (lambda _m: None)
    started = datetime.now(dt_timezone.utc)
    t0 = time.monotonic()
    cache = options.parse_cache()
    # Findings never read the unknown shapes: leave them to ``parse`` and ``timeline``.
    analysis = analyse(spark, bundle, out_dir, options, cache=cache, progress=say, shapes=False)
    kept = _findings_key(cache, analysis.ingest, options.detectors)
    findings = _cached_findings(cache, kept)
    if findings is not None:
        say("findings unchanged since an earlier run (cache)")
    else:
        say("running the detectors")
        findings = run_detectors(analysis.timeline, only=options.detectors)
        if kept is not None and not _incomplete(findings):
            cache.store_findings(kept, {"findings": list(findings), "ran": findings.ran, "skipped": findings.skipped})
    inv = Investigation(analysis=analysis, findings=findings, options=options, bundle_label=bundle_label(bundle),
                        started=started, seconds=time.monotonic() - t0)
    inv.findings_path.parent.mkdir(parents=True, exist_ok=True)
    inv.findings_path.write_text(findings_text(inv.findings_document()), encoding="utf-8")
    return inv


def _findings_key(cache: ParseCache | None, report: IngestReport, only: Sequence[str] | None) -> Path | None:
    """Where the detectors' results on exactly these files, state facts and detector choice are kept (None without
    the parse cache). The detectors read nothing but the timeline, whose inputs these are; the code is in the key."""
    if cache is None or not report.file_keys:
        return None
    chosen = "detectors:" + (",".join(only) if only is not None else "*")
    return cache.derived_dir([*report.file_keys, f"state:{report.state_digest}", chosen], "findings")


def _cached_findings(cache: ParseCache | None, kept: Path | None) -> DetectorResults | None:
    """The detectors' results of an earlier run with the same key, or None."""
    value = cache.restore_findings(kept) if cache is not None and kept is not None else None
    if not isinstance(value, dict):
        return None
    return DetectorResults(value["findings"], ran=value["ran"], skipped=value["skipped"])


def _incomplete(findings: Sequence[Finding]) -> bool:
    """Results not to keep: a detector failed (perhaps for a passing reason: memory, a lost executor), or the lines a
    finding cites could not be read."""
    return any(f.severity == ERROR or any(m.startswith(EVIDENCE_UNREAD) for m in f.missing_evidence)
               for f in findings)
