"""Parse cache: unchanged files are read back, changed or added files alone are parsed again."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from pyspark.sql.types import LongType, StringType, StructField, StructType

from toolkit.cache import ParseCache
from toolkit.ingest import parse_bundle
from toolkit.schemas import CANDIDATE_COLUMN, RECORD_COLUMNS

LINE = ("[2026-03-07 14:02:{:02d},000] INFO stream-thread [a-StreamThread-1] State transition from "
        "PARTITIONS_ASSIGNED to RUNNING (org.apache.kafka.streams.processor.internals.StreamThread)\n")


def _run(spark, bundle, out, cache):
    said: list[str] = []
    _, report, records = parse_bundle(spark, bundle, out, cache=cache, progress=said.append)
    rows = sorted((r.source, r.line_no, r.message) for r in records.collect())
    return said, report, rows


def test_second_run_reuses_and_changed_file_is_reparsed(spark, tmp_path):
    bundle = tmp_path / "bundle"
    for host in ("h-0", "h-1"):
        (bundle / host).mkdir(parents=True)
        (bundle / host / "app.log").write_text(LINE.format(1) + LINE.format(2))
    cache = ParseCache(tmp_path / "cache")

    said, report, first = _run(spark, bundle, tmp_path / "out1", cache)
    assert "0 of 2 log files unchanged since an earlier run (cache)" in said
    assert len(first) == 4

    said, report, second = _run(spark, bundle, tmp_path / "out2", cache)
    assert "2 of 2 log files unchanged since an earlier run (cache)" in said
    assert not any(s.startswith("parsing") for s in said)
    assert second == first
    # records.parquet of a cached run is the cache's files, linked, and reads as a plain records table (partitioned
    # by the gate's verdict, see toolkit.catalogue.gate)
    linked = spark.read.parquet(str(tmp_path / "out2" / "records.parquet"))
    assert tuple(linked.columns) == (*RECORD_COLUMNS, CANDIDATE_COLUMN) and linked.count() == 4
    parts = list((tmp_path / "out2" / "records.parquet").glob("candidate=*/*.parquet"))
    assert parts and all(p.stat().st_nlink >= 2 for p in parts)
    assert {f.path: (f.layout, f.lines, f.records) for f in report.files} == {
        "h-0/app.log": ("kafka-log4j", 2, 2), "h-1/app.log": ("kafka-log4j", 2, 2)}

    (bundle / "h-1" / "app.log").write_text(LINE.format(1) + LINE.format(2) + LINE.format(3))
    said, report, third = _run(spark, bundle, tmp_path / "out3", cache)
    assert "1 of 2 log files unchanged since an earlier run (cache)" in said
    assert any(s.startswith("parsing 1 log files") for s in said)
    assert sum(1 for r in third if r[0] == "h-1/app.log") == 3
    assert sum(1 for r in third if r[0] == "h-0/app.log") == 2
    assert report.totals["lines"] == 5 and report.totals["unaccounted_files"] == 0


def test_a_cached_run_accounts_for_every_line_as_the_first_run_did(spark, tmp_path):
    bundle = tmp_path / "bundle"
    (bundle / "h-0").mkdir(parents=True)
    # A continuation line with no record above it is kept as unparsed: the report shows it as an example.
    (bundle / "h-0" / "app.log").write_text("\tat org.example.Cut.off(Cut.java:7)\n" + LINE.format(1) + LINE.format(2))
    (bundle / "h-0" / "empty.log").write_text("")
    cache = ParseCache(tmp_path / "cache")

    _, first, _ = _run(spark, bundle, tmp_path / "out1", cache)
    said, again, _ = _run(spark, bundle, tmp_path / "out2", cache)
    assert "2 of 2 log files unchanged since an earlier run (cache)" in said
    kept = sorted(p.name for p in (tmp_path / "cache" / "meta").glob("*.accounting.json"))
    assert len(kept) == 2
    as_json = lambda report: {k: v for k, v in report.to_json().items() if k != "bundle"}  # noqa: E731
    assert as_json(again) == as_json(first)
    app = next(f for f in first.files if f.path == "h-0/app.log")
    assert (app.lines, app.records, app.unparsed) == (3, 2, 1)
    assert app.unparsed_examples == [{"line_no": 1, "text": "\tat org.example.Cut.off(Cut.java:7)"}]
    assert app.first_ts == "2026-03-07T14:02:01Z" and app.last_ts == "2026-03-07T14:02:02Z"


def test_bad_and_nul_lines_are_counted_once_on_the_raw_lines_with_or_without_the_cache(spark, tmp_path, monkeypatch):
    import toolkit.ingest as ingest

    bundle = tmp_path / "bundle"
    (bundle / "h-0").mkdir(parents=True)
    # After a head of plain text (a NUL in the head makes a file binary): two undecodable lines (one a stack
    # line folded into its record) and one NUL line.
    head = "".join(LINE.format(i % 60) for i in range(80)).encode()
    (bundle / "h-0" / "app.log").write_bytes(
        head + LINE.format(1).encode() + b"\tat org.example.Bad\xff(Bad.java:1)\n" + b"junk \xc3\x28\n"
        + LINE.format(2).encode().replace(b"RUNNING", b"RUN\x00NING") + LINE.format(3).encode())
    scans: list[bool] = []
    real = ingest.record_figures
    monkeypatch.setattr(ingest, "record_figures", lambda records, text_checks=False: scans.append(text_checks)
                        or real(records, text_checks))
    expected = ["2 lines contain bytes that are not valid UTF-8 (kept as U+FFFD)", "1 lines contain NUL bytes"]

    _, plain, _ = _run(spark, bundle, tmp_path / "plain", None)
    cache = ParseCache(tmp_path / "cache")
    _, first, _ = _run(spark, bundle, tmp_path / "out1", cache)
    _, again, _ = _run(spark, bundle, tmp_path / "out2", cache)
    for report in (plain, first, again):
        assert [p.problem for p in report.problems] == expected
    # The first pass over the raw lines counted them: the records' text was never scanned again,
    # and the cached run needed no accounting job at all.
    assert scans == [False, False]

    # Accounting kept by an earlier version (checks counted per record) still reads.
    (kept,) = (tmp_path / "cache" / "meta").glob("*.accounting.json")
    figures = json.loads(kept.read_text())
    figures["bad_utf8"], figures["nul_records"] = figures.pop("bad_utf8_lines"), figures.pop("nul_lines")
    kept.write_text(json.dumps(figures))
    _, older, _ = _run(spark, bundle, tmp_path / "out3", cache)
    assert [p.problem for p in older.problems] == expected


def test_an_empty_state_table_is_written_without_spark_and_reads_with_its_schema(spark, tmp_path):
    from toolkit.ingest import write_empty_table
    from toolkit.state.schemas import STATE_SCHEMAS

    for name, schema in STATE_SCHEMAS.items():
        write_empty_table(schema, tmp_path / name)
        table = spark.read.parquet(str(tmp_path / name))
        assert [(f.name, f.dataType) for f in table.schema] == [(f.name, f.dataType) for f in schema], name
        assert table.count() == 0


def test_events_are_reused_only_while_every_file_is_unchanged(spark, tmp_path):
    from toolkit.pipeline import analyse

    bundle = tmp_path / "bundle"
    (bundle / "h-0").mkdir(parents=True)
    (bundle / "h-0" / "app.log").write_text(LINE.format(1))
    cache = ParseCache(tmp_path / "cache")

    def events_of(out):
        said: list[str] = []
        analysis = analyse(spark, bundle, tmp_path / out, cache=cache, progress=said.append)
        return said, sorted((r.line_no, r.event) for r in analysis.events.collect())

    said, first = events_of("out1")
    assert "classifying events" in said and first == [(1, "THREAD_STATE")]
    assert "reconstructing the timeline" in said
    said, second = events_of("out2")
    assert "events unchanged since an earlier run (cache)" in said and "classifying events" not in said
    assert second == first and (tmp_path / "out2" / "unknown_shapes.parquet").is_dir()
    # The timeline too: its tables are copied, not rebuilt, and equal the first run's.
    assert "timeline unchanged since an earlier run (cache)" in said and "reconstructing the timeline" not in said
    assert _table(spark, tmp_path / "out2", "thread_states") == _table(spark, tmp_path / "out1", "thread_states") != []

    # New state evidence leaves the events alone but rebuilds the timeline (checkpoints come from it).
    task = bundle / "h-0" / "state" / "a" / "0_0"
    task.mkdir(parents=True)
    (task / ".checkpoint").write_text("0\n1\norders 0 42\n")
    said, _ = events_of("out2b")
    assert "events unchanged since an earlier run (cache)" in said and "reconstructing the timeline" in said
    assert [r["offset"] for r in _table(spark, tmp_path / "out2b", "checkpoints", raw=True)] == [42]
    (task / ".checkpoint").unlink()

    (bundle / "h-0" / "app.log").write_text(LINE.format(1) + LINE.format(2))
    said, third = events_of("out3")
    assert "classifying events" in said and third == [(1, "THREAD_STATE"), (2, "THREAD_STATE")]


def _table(spark, out, name, raw=False):
    rows = spark.read.parquet(str(out / f"{name}.parquet")).collect()
    return rows if raw else sorted(tuple(map(repr, r)) for r in rows)


def test_a_pruned_derived_copy_is_a_miss_not_a_crash(tmp_path):
    cache = ParseCache(tmp_path / "cache")
    kept = cache.derived_dir(["k1", "k2"], "timeline")
    out = {name: str(tmp_path / "out" / f"{name}.parquet") for name in ("locks", "wipes")}
    for path in out.values():
        Path(path).mkdir(parents=True)
        (Path(path) / "part-0.parquet").write_bytes(b"PAR1")
    schemas = {"locks": StructType([StructField("host", StringType())]),
               "wipes": StructType([StructField("line_no", LongType())])}
    cache.store_derived(kept, out, schemas)
    assert cache.restore_derived(kept, out) == schemas and (Path(out["wipes"]) / "part-0.parquet").is_file()
    shutil.rmtree(kept / "wipes.parquet")  # a disk cleaner took part of it
    assert cache.restore_derived(kept, out) is None and not kept.exists()
    assert cache.derived_dir(["k2", "k1"], "timeline") == kept != cache.derived_dir(["k1", "k2"], "events")


def test_code_digest_covers_the_code_wherever_the_checkout_lives(tmp_path):
    """A checkout under a folder called "samples" must not drop every file from the digest."""
    import toolkit
    from toolkit.cache import code_files

    copy = tmp_path / "samples" / "toolkit"
    shutil.copytree(Path(toolkit.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    files = {str(p) for p in code_files(copy)}
    assert {"pipeline.py", "timeline/build.py", "catalogue/layouts.toml", "catalogue/kafka_streams.toml"} <= files
    assert not any(f.startswith("samples/") for f in files)


def test_detect_command_reuses_the_parse_cache(spark, tmp_path, capsys):
    from toolkit.cli import main

    bundle = tmp_path / "bundle"
    (bundle / "h-0").mkdir(parents=True)
    (bundle / "h-0" / "app.log").write_text(LINE.format(1) + LINE.format(2))
    argv = ["detect", str(bundle), "--cache-dir", str(tmp_path / "cache"), "--format", "json", "--master", "local[2]"]
    assert main([*argv, "--out", str(tmp_path / "out1")]) == 0
    first = capsys.readouterr()
    assert "0 of 1 log files unchanged since an earlier run (cache)" in first.err
    assert "classifying events" in first.err and "events unchanged" not in first.err
    assert main([*argv, "--out", str(tmp_path / "out2")]) == 0
    second = capsys.readouterr()
    assert "1 of 1 log files unchanged since an earlier run (cache)" in second.err
    assert "timeline unchanged since an earlier run (cache)" in second.err
    assert second.out == first.out


def test_records_read_back_from_the_cache_keep_the_long_line_guard(spark, small_plan_settings, tmp_path):
    """A re-run whose files all come from the cache reads no raw line: the longest line kept with the
    entry decides whether generated code comes back on, as the first pass did in the first run."""
    from toolkit import jvm

    bundle = tmp_path / "bundle"
    (bundle / "h-0").mkdir(parents=True)
    long_message = "x" * (jvm.LONG_LINE_CHARS + 10)
    (bundle / "h-0" / "app.log").write_text(LINE.format(1) + LINE.format(2).replace("RUNNING", long_message))
    cache = ParseCache(tmp_path / "cache")
    conf = spark.conf
    jvm.plan_for_input(spark, 10_000)
    _run(spark, bundle, tmp_path / "out1", cache)
    assert conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
    (meta,) = [p for p in (tmp_path / "cache" / "meta").glob("*.json") if p.name.count(".") == 1]
    kept = json.loads(meta.read_text())
    assert kept["longest_line"] == len(LINE.format(2).replace("RUNNING", long_message).rstrip("\n"))

    jvm.plan_for_input(spark, 10_000)
    said, _, rows = _run(spark, bundle, tmp_path / "out2", cache)
    assert "1 of 1 log files unchanged since an earlier run (cache)" in said
    assert conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
    assert any(long_message in message for _, _, message in rows)

    # an entry kept before lengths were measured: taken as long
    meta.write_text(json.dumps({k: v for k, v in kept.items() if k != "longest_line"}))
    jvm.plan_for_input(spark, 10_000)
    _run(spark, bundle, tmp_path / "out3", cache)
    assert conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"

    # short lines kept: the small-input settings stay
    meta.write_text(json.dumps({**kept, "longest_line": 200}))
    jvm.plan_for_input(spark, 10_000)
    _run(spark, bundle, tmp_path / "out4", cache)
    assert conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"


def _hash_counter(monkeypatch) -> list[Path]:
    """Count the files :func:`toolkit.cache.content_digest` reads."""
    import toolkit.cache as cache_module

    read: list[Path] = []
    real = cache_module.content_digest

    def counting(path: Path) -> str:
        read.append(path)
        return real(path)

    monkeypatch.setattr(cache_module, "content_digest", counting)
    return read


def test_a_file_untouched_since_it_was_hashed_is_not_read_again(tmp_path, monkeypatch):
    import hashlib

    import toolkit.cache as cache_module

    monkeypatch.setattr(cache_module, "RACY_SECONDS", 0.0)
    log = tmp_path / "app.log"
    log.write_text(LINE.format(1))
    read = _hash_counter(monkeypatch)
    memo = ParseCache(tmp_path / "cache").digests
    first = memo.digest(log)
    assert first == hashlib.sha256(log.read_bytes()).hexdigest()
    assert memo.digest(log) == first and ParseCache(tmp_path / "cache").digests.digest(log) == first
    assert read == [log.resolve()]


def test_a_file_rewritten_with_its_old_size_and_time_is_hashed_again(tmp_path, monkeypatch):
    import os
    import time

    import toolkit.cache as cache_module

    monkeypatch.setattr(cache_module, "RACY_SECONDS", 0.0)
    log = tmp_path / "app.log"
    log.write_text(LINE.format(1))
    before = log.stat()
    memo = ParseCache(tmp_path / "cache").digests
    first = memo.digest(log)
    time.sleep(0.05)  # past the file system's clock tick, so the status-change time moves
    log.write_text(LINE.format(2))  # same length
    os.utime(log, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the old modification time
    assert log.stat().st_size == before.st_size and log.stat().st_mtime_ns == before.st_mtime_ns
    read = _hash_counter(monkeypatch)
    assert memo.digest(log) != first
    assert read == [log.resolve()]


def test_a_file_changed_just_before_it_was_hashed_is_not_remembered(tmp_path, monkeypatch):
    log = tmp_path / "app.log"
    log.write_text(LINE.format(1))
    memo = ParseCache(tmp_path / "cache").digests
    read = _hash_counter(monkeypatch)
    memo.digest(log)
    memo.digest(log)
    assert len(read) == 2  # written a moment ago: its times may not show a change made in the same tick
    assert not list((tmp_path / "cache" / "digests").glob("*.json"))


def test_findings_are_reused_only_for_the_same_files_and_detectors_and_never_after_a_failure(spark, tmp_path,
                                                                                            monkeypatch):
    """A re-run on an unchanged bundle takes the detectors' results from the cache: the same findings (times as
    datetimes, not strings), the same findings.json; another detector choice, or a run where a detector failed,
    runs the detectors."""
    from toolkit import detectors as detector_package
    from toolkit.options import AnalysisOptions
    from toolkit.pipeline import run

    bundle = Path(__file__).resolve().parent.parent / "sample_logs" / "kafka-eos-stale-checkpoint"
    options = AnalysisOptions(cache_dir=tmp_path / "cache")

    def investigate(out, opts=options):
        said: list[str] = []
        inv = run(spark, bundle, tmp_path / out, opts, progress=said.append)
        return said, inv

    said, first = investigate("out1")
    assert "running the detectors" in said and "findings unchanged since an earlier run (cache)" not in said
    assert any(f.severity == "critical" for f in first.findings)
    said, second = investigate("out2")
    assert "findings unchanged since an earlier run (cache)" in said and "running the detectors" not in said
    assert list(second.findings) == list(first.findings) and second.findings[0].ts == first.findings[0].ts
    assert (second.findings.ran, second.findings.skipped) == (first.findings.ran, first.findings.skipped)
    assert second.findings_path.read_bytes() == first.findings_path.read_bytes()

    one = first.findings[0].detector
    said, only = investigate("out3", AnalysisOptions(cache_dir=tmp_path / "cache", detectors=(one,)))
    assert "running the detectors" in said and {f.detector for f in only.findings} == {one}

    # A detector that fails leaves nothing kept: the next run runs the detectors again.
    def broken(_view):
        raise MemoryError("lost an executor")

    spec = detector_package.registered_detectors()[one]
    monkeypatch.setitem(detector_package.REGISTRY, one, dataclasses.replace(spec, fn=broken))
    other_cache = AnalysisOptions(cache_dir=tmp_path / "cache2")
    said, failed = investigate("out4", other_cache)
    assert "running the detectors" in said and any(f.severity == "error" for f in failed.findings)
    monkeypatch.undo()
    said, again = investigate("out5", other_cache)
    assert "running the detectors" in said and not any(f.severity == "error" for f in again.findings)
