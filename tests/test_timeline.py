"""Timeline reconstruction: the story facts of each shipped bundle come back from the tables."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pandas as pd
import pytest

from pyspark.sql import functions as F

from support import SAMPLES
from support.timelines import event_schema
from toolkit import utc as utc_rows


def utc(text: str) -> datetime:
    """EXPECTED.json times are ISO UTC; Spark returns naive UTC datetimes (session zone UTC)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


def expected(name: str) -> dict:
    return json.loads((SAMPLES / name / "EXPECTED.json").read_text())


def rows(df, *order):
    return df.orderBy(*order).collect() if order else df.collect()


def test_eos_crash_stale_checkpoint_and_restart(analysis_of):
    name = "kafka-eos-stale-checkpoint"
    exp = expected(name)
    tl = analysis_of(name).timeline
    runs = rows(tl.process_runs.where(F.col("host") == exp["crashed_host"]), "run_no")
    assert [r.end_kind for r in runs] == ["crash", "unknown"]
    assert runs[0].end == utc(exp["times"]["last_line_before_crash"])
    assert runs[1].start == utc(exp["times"]["restart"])
    assert runs[0].guarantee == exp["guarantee"] and runs[0].version == exp["version"]

    for stale in exp["stale_checkpoints"]:
        task = stale["task"]
        capture = rows(tl.checkpoints.where((F.col("task_id") == task) & (F.col("origin") == "capture")))
        assert len(capture) == 1
        assert capture[0].offset == stale["checkpoint_offset"]
        assert capture[0].file_mtime == utc(stale["checkpoint_write_time"])  # written at restoration end
        first_run_restore = rows(tl.restorations.where((F.col("task_id") == task) & (F.col("run_id") == runs[0].run_id)))
        # The updater writes the file when the task completes restoration, ms after the changelog does.
        assert abs(first_run_restore[0].end - capture[0].file_mtime) <= timedelta(seconds=1)
        restart = rows(tl.restorations.where((F.col("task_id") == task) & (F.col("run_id") == runs[1].run_id)))
        assert len(restart) == 1
        assert not restart[0].from_scratch and restart[0].completed
        assert restart[0].start_offset == stale["checkpoint_offset"] + 1  # 2.6+: last applied offset + 1
        assert restart[0].end_offset == stale["end_offset_at_restart"]
        assert restart[0].records == stale["replayed_records"]
    assert tl.wipes.count() == 0  # the wipe that EOS needed never happened


def test_clean_rolling_restart_is_clean(analysis_of):
    tl = analysis_of("kafka-eos-clean-rolling-restart").timeline
    first_runs = rows(tl.process_runs.where(F.col("run_no") == 1), "host")
    restarted = [r for r in first_runs if r.end_kind != "unknown"]
    assert restarted and all(r.end_kind == "clean" for r in restarted)
    assert all(r.end_evidence for r in restarted)


def test_standby_lock_failure_cleaner_and_stale_restore(analysis_of):
    name = "kafka-standby-lock-cleaner"
    exp = expected(name)
    tl = analysis_of(name).timeline
    failed = rows(tl.locks.where((F.col("kind") == "failed") & (F.col("task_id") == "1_0")
                                 & (F.col("host") == exp["host"])), "ts")
    assert failed, "the standby lock failure is missing"
    assert failed[0].ts == utc(exp["times"]["lock_failed"])
    assert failed[0].thread == exp["lock_failed_thread"]
    assert failed[0].holder_thread == exp["lock_holder_thread"]

    cleaned = rows(tl.dir_cleanups.where((F.col("task_id") == "1_0") & (F.col("host") == exp["host"])))
    assert [c.ts for c in cleaned] == [utc(exp["times"]["cleaner_deletion"])]

    # 2.0 logs restorations only per changelog partition at DEBUG, without a task id or an end
    # line, so the restore itself is checked by the detector tests on the raw events.
    files = rows(tl.state.state_files.where((F.col("task_id") == "1_0") & (F.col("host") == exp["host"])))
    kinds = {f.kind for f in files}
    assert "checkpoint" in kinds and not kinds & {"rocksdb_store", "sst"}


def test_restore_skipped_after_reassignment(analysis_of):
    exp = expected("kafka-restore-skipped")
    tl = analysis_of("kafka-restore-skipped").timeline
    episodes = rows(tl.restorations.where((F.col("task_id") == "1_1") & (F.col("host") == exp["host"])), "start")
    # One episode per "No checkpoint found" for 1_1; the last comes with generation 323.
    assert len(episodes) >= 2
    assert all(e.from_scratch for e in episodes)
    last = episodes[-1]
    assert utc(exp["times"]["rebalance_323"]) <= last.start <= utc(exp["times"]["skipped_restore_running"])


def test_alos_crash_and_restore_from_checkpoint(analysis_of):
    name = "kafka-alos-crash-reprocessing"
    exp = expected(name)
    tl = analysis_of(name).timeline
    crashed = rows(tl.process_runs.where(F.col("end_kind") == "crash"))
    assert [r.host for r in crashed] == [exp["crashed_host"]]
    assert crashed[0].end == utc(exp["times"]["last_line_before_crash"])
    assert crashed[0].guarantee == "at_least_once"
    after = rows(tl.restorations.where((F.col("host") == crashed[0].host) & (F.col("start") > crashed[0].end)))
    assert after and all(not r.from_scratch for r in after)


def test_nifi_migration_steps_from_logs_and_cloudtrail(analysis_of):
    tl = analysis_of("nifi-kinesis-migration-loss").timeline
    steps = rows(tl.migration_steps, "ts")
    origins = {s.origin for s in steps}
    assert origins == {"log", "cloudtrail"}
    failed = [s for s in steps if s.step == "PROCESSOR_START_FAILED"]
    assert len(failed) >= 2
    deleted_migration = [s for s in steps if s.origin == "cloudtrail" and (s.table or "").endswith("_migration")
                         and "DeleteTable" in (s.detail or "")]
    assert deleted_migration
    runs = rows(tl.process_runs)
    assert runs and all(r.product == "nifi" for r in runs)


def test_clock_skew_is_estimated_within_50ms(spark, tmp_path):
    """Two hosts log the same generations; host b's clock runs 730 ms ahead and nothing says so."""
    from toolkit.pipeline import analyse

    line = ("[{ts}] INFO [Consumer clientId=app-{pid}-StreamThread-1-consumer, groupId=app] Successfully {what} "
            "Generation{{generationId={gen}, memberId='app-{pid}-StreamThread-1-consumer-{pid}', protocol='stream'}} "
            "(org.apache.kafka.clients.consumer.internals.ConsumerCoordinator)\n")
    start = datetime(2026, 5, 4, 12, 0, 0)
    for host, pid, skew in (("a-0", "11111111-1111-1111-1111-111111111111", 0),
                            ("b-0", "22222222-2222-2222-2222-222222222222", 730)):
        text = ""
        for gen in range(1, 7):
            base = start + timedelta(minutes=7 * gen, milliseconds=skew)
            for what, delay in (("joined group with generation", 0), ("synced group in generation", 31)):
                jitter = timedelta(milliseconds=delay + (gen * 7 + len(host)) % 9)
                ts = (base + jitter).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
                text += line.format(ts=ts, pid=pid, what=what, gen=gen)
        (tmp_path / "bundle" / host).mkdir(parents=True)
        (tmp_path / "bundle" / host / "app.log").write_text(text)
    tl = analyse(spark, tmp_path / "bundle", tmp_path / "out").timeline
    skew = {r.host: r for r in tl.clock_skew.collect()}
    assert skew["b-0"].reference_host in ("a-0", "b-0")
    estimate = skew["b-0"].offset_ms if skew["b-0"].reference_host == "a-0" else -skew["a-0"].offset_ms
    assert abs(estimate - 730) <= 50
    assert skew["b-0"].samples >= 6


def test_for_task_and_between(analysis_of):
    tl = analysis_of("kafka-eos-stale-checkpoint").timeline
    only = tl.for_task("0_0")
    assert {r.task_id for r in only.restorations.collect()} == {"0_0"}
    window = tl.between("2026-03-07T10:08:00", "2026-03-07T10:09:00")
    assert all(r.start <= datetime(2026, 3, 7, 10, 9) for r in window.restorations.collect())
    summary = tl.summary().set_index("table")
    assert list(summary.index) == list(tl.tables())
    assert set(summary.index) >= {"process_runs", "restorations", "checkpoints", "clock_skew"}
    span = utc_rows.first(tl.restorations.agg(F.count(F.lit(1)).alias("rows"), F.min("start").alias("first"),
                                         F.max("start").alias("last")))
    assert summary.loc["restorations", "rows"] == span["rows"] > 0
    assert summary.loc["restorations", "first"] == span["first"] and summary.loc["restorations", "last"] == span["last"]
    assert pd.isna(summary.loc["clock_skew", "first"])  # a table without a time column has no span


def test_nifi_tables_are_built_once_and_carried_by_every_derived_timeline(analysis_of, monkeypatch):
    """The build derives the NiFi tables with the others; a reloaded, filtered or corrected timeline keeps them."""
    import toolkit.timeline.build as timeline_build
    import toolkit.timeline.nifi as nifi
    from toolkit.pipeline import _reload
    from toolkit.timeline.build import build

    analysis = analysis_of("nifi-kinesis-migration-loss")
    built_tables = []
    original = nifi.nifi_tables
    for module in (nifi, timeline_build):
        monkeypatch.setattr(module, "nifi_tables", lambda *a, **k: built_tables.append(1) or original(*a, **k))
    tl = build(analysis.timeline.events, analysis.timeline.state, analysis.timeline.config)
    assert len(built_tables) == 1
    derived = [_reload(tl.spark, tl, analysis.out_dir), tl.for_task("0_0"),
               tl.between("2026-03-07T10:00:00", "2026-03-07T11:00:00"), tl.corrected_for_clock_skew()]
    assert len(built_tables) == 1
    assert all(d.nifi_checkpoints is not None and d.nifi_state_changes is not None for d in derived)
    assert derived[0].nifi_checkpoints.count() == tl.nifi_checkpoints.count()


def test_template_version_map_holds_every_template_version_row(spark):
    from toolkit.events.versions import template_version_map, template_version_rows, template_versions

    (row,) = spark.range(1).selectExpr(f"{template_version_map()} AS versions").collect()
    rows = template_version_rows()
    assert row.versions == {tid: f"{family}/{lo}/{hi}" for tid, family, lo, hi in rows}
    assert sorted(map(tuple, template_versions(spark).collect())) == sorted(rows)


def _version_key(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def _range_contains(text: str, version: str) -> bool:
    v = _version_key(version)
    if text.startswith(">="):
        return _version_key(text[2:]) <= v
    lo, hi = text.split("-")
    return _version_key(lo) <= v <= _version_key(hi)


@pytest.mark.parametrize("name", sorted(p.name for p in SAMPLES.iterdir() if (p / "EXPECTED.json").is_file()))
def test_version_is_known_or_bounded_with_evidence(analysis_of, name):
    true_version = expected(name)["version"]
    runs = analysis_of(name).timeline.process_runs.collect()
    assert runs
    for run in runs:
        assert run.version_evidence
        if run.version is not None:  # from a banner
            assert run.version == true_version and run.version_evidence.startswith("banner")
        assert run.version_range and _range_contains(run.version_range, true_version), run.version_range


def test_skew_correction_is_applied_on_request(analysis_of):
    tl = analysis_of("kafka-eos-stale-checkpoint").timeline
    skew = {r.host: r for r in tl.clock_skew.collect()}
    other = next(h for h, r in skew.items() if r.host != r.reference_host)
    fixed = tl.corrected_for_clock_skew(min_confidence="low")
    before = tl.process_runs.where(F.col("host") == other).orderBy("run_no").first().start
    after = fixed.process_runs.where(F.col("host") == other).orderBy("run_no").first().start
    assert (before - after) == timedelta(milliseconds=skew[other].offset_ms)
    assert fixed.notes and tl.process_runs.where(F.col("host") == other).first().start == before  # original untouched


def test_version_range_from_templates_when_the_banner_is_gone(spark, tmp_path):
    """Logs cut after start-up (rotation, `kubectl logs --since`) lose the AppInfoParser/KafkaStreams banner."""
    from toolkit.pipeline import analyse

    name = "kafka-eos-stale-checkpoint"
    true_version = expected(name)["version"]
    banner = ("Kafka Streams version: ", "Kafka version: ", "Kafka commitId: ", "Kafka startTimeMs: ")
    bundle = tmp_path / name
    removed = 0
    for src in (SAMPLES / name).rglob("*"):
        dst = bundle / src.relative_to(SAMPLES / name)
        if src.is_dir():
            dst.mkdir(parents=True, exist_ok=True)
        elif src.name.endswith(".log"):
            dst.parent.mkdir(parents=True, exist_ok=True)
            lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
            kept = [line for line in lines if not any(b in line for b in banner)]
            removed += len(lines) - len(kept)
            dst.write_text("".join(kept), encoding="utf-8")
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    assert removed >= 8, "the sample's banner lines are what this test removes"

    runs = analyse(spark, bundle, tmp_path / "out").timeline.process_runs.collect()
    assert {r.host for r in runs} == set(expected(name)["hosts"])
    for run in runs:
        assert run.version is None, f"no banner left, yet {run.host} run {run.run_no} claims {run.version}"
        assert run.version_range and _range_contains(run.version_range, true_version), run.version_range
        assert run.version_evidence.startswith("log templates: "), run.version_evidence


def test_table_schemas_do_not_follow_the_sessions_default_timestamp_type(spark):
    """A session whose plain TIMESTAMP means TIMESTAMP_NTZ still gets the declared (zoned) timestamp columns."""
    from toolkit.state.schemas import STATE_SCHEMAS
    from toolkit.timeline import StateFacts
    from toolkit.timeline.build import build
    from toolkit.timeline.schemas import TABLES

    events = spark.createDataFrame([], event_schema())
    state = StateFacts(**{name: spark.createDataFrame([], schema) for name, schema in STATE_SCHEMAS.items()})
    spark.conf.set("spark.sql.timestampType", "TIMESTAMP_NTZ")
    try:
        tables = build(events, state).tables()
        got = {name: [(f.name, f.dataType) for f in tables[name].schema.fields] for name in TABLES}
    finally:
        spark.conf.unset("spark.sql.timestampType")
    assert got == {name: [(f.name, f.dataType) for f in schema.fields] for name, schema in TABLES.items()}


def _table_rows(df) -> list[tuple]:
    """A table's rows as sortable text tuples (order and partitioning aside)."""
    return sorted(tuple("" if v is None else str(v) for v in r) for r in df.collect())


def test_a_small_bundle_is_queried_as_one_partition_with_the_same_tables_and_findings(spark, tmp_path, monkeypatch,
                                                                                        capsys, analysis_of):
    from toolkit import jvm
    from toolkit.detectors import findings_to_json, run_detectors
    from toolkit.options import AnalysisOptions
    from toolkit.pipeline import analyse

    bundle = SAMPLES / "kafka-standby-lock-cleaner"
    options = AnalysisOptions(use_cache=False)
    small = analysis_of(bundle.name)  # the session's own analysis: planned as the small input it is
    try:
        monkeypatch.setattr(jvm, "SMALL_INPUT_BYTES", 0)  # the same bundle, planned as a large one
        large = analyse(spark, bundle, tmp_path / "large", options)
    finally:
        jvm.plan_for_input(spark, None)

    def shuffles(df) -> bool:
        df.groupBy("host").count().explain()
        return "Exchange" in capsys.readouterr().out

    # A window or aggregate over a small bundle's tables needs no shuffle; a large one's keeps its partitions.
    assert not shuffles(small.events) and not shuffles(small.timeline.task_lifecycles)
    assert shuffles(large.events) and shuffles(large.timeline.task_lifecycles)
    # A small bundle's events are held in memory for the timeline and the detectors; a large one's are read
    # from their files by every query.
    assert small.events.inputFiles() == [] and large.events.inputFiles()
    # Its run bounds come from numbering every record, a large one's from the windowed pass: the same rows.
    bounds = [_table_rows(spark.read.parquet(str(a.out_dir / "run_bounds.parquet"))) for a in (small, large)]
    assert bounds[0] and bounds[0] == bounds[1]
    for name, df in small.timeline.tables().items():
        assert _table_rows(df) == _table_rows(getattr(large.timeline, name)), name
    assert small.timeline.locks.count() > 0 and small.timeline.dir_cleanups.count() > 0
    documents = [findings_to_json(run_detectors(a.timeline), bundle=str(bundle)) for a in (small, large)]
    assert documents[0]["findings"] and documents[0] == documents[1]


def test_materialized_shared_tables_give_the_same_timeline(analysis_of):
    """Computing run spans and task lifecycles once (small inputs) changes no row of any table (on the sample
    with two runs on one host, locks and cleaner deletions: every table built on the shared ones is filled)."""
    from toolkit.timeline.build import build

    timeline = analysis_of("kafka-standby-lock-cleaner").timeline
    lazy = build(timeline.events, timeline.state, timeline.config)
    shared = build(timeline.events, timeline.state, timeline.config, materialize_shared=True)
    compared = 0
    for table, df in lazy.tables().items():
        other = shared.tables()[table]
        assert df.columns == other.columns, table
        rows = sorted(map(repr, utc_rows.collect(df)))
        assert rows == sorted(map(repr, utc_rows.collect(other))), table
        compared += bool(rows)
    assert compared >= 8  # the sample fills most tables: the comparison is not of empty ones


def test_a_large_inputs_shared_tables_are_kept_while_the_timeline_is_written(spark, analysis_of):
    """With ``held`` (the pipeline's choice for a large input), run spans and task lifecycles are computed once
    and kept with ``persist``: every table comes out as without them, and ``release`` lets them go."""
    from toolkit.spark import release
    from toolkit.timeline import build_timeline

    analysis = analysis_of("kafka-standby-lock-cleaner")
    config = spark.read.parquet(str(analysis.out_dir / "config.parquet"))
    bounds = spark.read.parquet(str(analysis.out_dir / "run_bounds.parquet"))
    held: list = []
    kept = build_timeline(analysis.events, analysis.timeline.state, config, bounds, held=held)
    shared = list(held)
    assert len(shared) == 2 and all(df.is_cached for df in shared)
    lazy = build_timeline(analysis.events, analysis.timeline.state, config, bounds)
    for name, table in kept.tables().items():
        rows = sorted(map(repr, table.collect()))
        assert rows == sorted(map(repr, lazy.tables()[name].collect())), name
        if name in ("process_runs", "task_lifecycles", "locks"):
            assert rows, name
    release(held)
    assert not held and not any(df.is_cached for df in shared)
