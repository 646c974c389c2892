"""Kafka Streams state directories (2.1, 2.8, 3.8, 4.3 shapes) -> state_files / checkpoints, and bad checkpoints."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from support.state_dirs import (MALFORMED, PROCESS_ID, at, bad_state_dir, state_dir_21, state_dir_28, state_dir_38,
                                 state_dir_43, utc)
from toolkit.state import StateItem, collect_state_rows, detect_evidence_file, detect_state_dir, read_state
from toolkit.state.offset_checkpoint import parse_offset_checkpoint


def rows_of(path: Path, kind: str = "state_dir", source: str = "bundle/host-1/state", host: str = "host-1"):
    return collect_state_rows([StateItem(host=host, path=path, source=source, kind=kind)])


def by_path(rows):
    return {r["path"]: r for r in rows.state_files}


def test_reads_2_1_layout_with_exact_offsets_and_mtimes(tmp_path):
    rows = rows_of(state_dir_21(tmp_path / "state"))
    assert rows.problems == []
    files = by_path(rows)
    assert files["."]["kind"] == "state_dir"
    assert files["orders-app"]["kind"] == "app_dir"
    assert files["orders-app/0_0/.lock"]["kind"] == "task_lock"
    assert files["orders-app/global/.lock"]["task_id"] == "global"
    checkpoint = files["orders-app/0_1/.checkpoint"]
    assert (checkpoint["kind"], checkpoint["task_id"], checkpoint["app_id"]) == ("checkpoint", "0_1", "orders-app")
    assert checkpoint["mtime"] == datetime(2026, 4, 8, 9, 1, 11, 654321, tzinfo=timezone.utc)
    store = files["orders-app/0_0/rocksdb/counts"]
    assert (store["kind"], store["store"], store["file_count"], store["sst_count"]) == ("rocksdb_store", "counts", 8, 1)
    assert store["newest_mtime"] == utc(at(23, 500))
    assert store["offsets_in_store"] is False
    assert files["orders-app/0_0/rocksdb/counts/000004.sst"]["kind"] == "sst"
    segment = files["orders-app/0_1/windowed/windowed.1775606400000"]
    assert (segment["kind"], segment["store"], segment["sst_count"]) == ("segment", "windowed", 1)
    assert files["orders-app/0_1/windowed"]["kind"] == "segmented_store"
    assert files["orders-app"]["version_hint"] == "<=2.8"

    entries = {(c["task_id"], c["topic"], c["partition"]): c for c in rows.checkpoints}
    assert len(rows.checkpoints) == 4
    assert entries[("0_0", "orders-app-counts-changelog", 0)]["offset"] == 10452
    assert entries[("0_1", "orders-app-windowed-changelog", 1)]["offset"] == 7
    assert entries[("0_1", "orders-app-windowed-changelog", 1)]["store"] == "windowed"
    # 2.1 cannot be told from 2.6/2.7 by layout alone, and the offset meaning changed in 2.6.
    assert entries[("0_1", "orders-app-counts-changelog", 1)]["offset_meaning"] == "next_offset_or_last_applied"
    glob = entries[("global", "products", 0)]
    assert (glob["file_kind"], glob["offset"], glob["offset_meaning"]) == ("global_checkpoint", 512, "next_offset")
    assert entries[("0_1", "orders-app-counts-changelog", 1)]["file_mtime"] == utc(at(71, 654321))


def test_reads_2_8_layout_with_sentinel_and_process_id(tmp_path):
    rows = rows_of(state_dir_28(tmp_path / "state"))
    assert rows.problems == []
    files = by_path(rows)
    assert files["orders-app/.lock"]["kind"] == "app_lock"
    assert files["orders-app/kafka-streams-process-metadata"]["process_id"] == PROCESS_ID
    assert files["orders-app"]["version_hint"] == "2.8"
    entries = {c["topic"]: c for c in rows.checkpoints}
    assert entries["orders-app-counts-changelog"]["offset"] == 10452
    assert entries["orders-app-counts-changelog"]["offset_meaning"] == "last_applied"
    unknown = entries["orders-app-totals-changelog"]
    assert (unknown["offset"], unknown["sentinel"], unknown["store"], unknown["problem"]) == (
        -4, "OFFSET_UNKNOWN", "totals", None)


def test_reads_3_8_layout_positions_and_named_topology(tmp_path):
    rows = rows_of(state_dir_38(tmp_path / "state"))
    assert rows.problems == []
    files = by_path(rows)
    assert files["orders-app"]["version_hint"] == "3.2+"
    named = files["orders-app/__fraud__/0_1/.checkpoint"]
    assert (named["topology"], named["task_id"], named["kind"]) == ("fraud", "0_1", "checkpoint")
    assert files["orders-app/__fraud__"]["kind"] == "topology_dir"
    assert files["orders-app/1_2"]["mtime"] == utc(at(80))
    by_kind = {(c["task_id"], c["file_kind"]): c for c in rows.checkpoints}
    assert by_kind[("0_0", "checkpoint")]["offset"] == 20001
    assert by_kind[("0_0", "checkpoint")]["file_mtime"] == datetime(2026, 4, 8, 9, 1, 1, 999999, tzinfo=timezone.utc)
    position = by_kind[("0_0", "position")]
    assert (position["store"], position["topic"], position["offset"], position["offset_meaning"]) == (
        "counts", "orders", 45000, "input_position")
    assert by_kind[("0_1", "checkpoint")]["topology"] == "fraud"
    assert ("1_2", "checkpoint") not in by_kind  # EOS task running: no file, and no invented row


def test_reads_4_3_layout_offsets_inside_rocksdb(tmp_path):
    rows = rows_of(state_dir_43(tmp_path / "state"))
    assert rows.problems == []
    files = by_path(rows)
    store = files["orders-app/0_0/rocksdb/counts"]
    assert store["offsets_in_store"] is True and "KIP-1035" in store["note"]
    assert files["orders-app"]["version_hint"] == "4.3+"
    by_kind = {c["file_kind"]: c for c in rows.checkpoints}
    custom = by_kind["store_checkpoint"]
    assert (custom["store"], custom["offset"], custom["offset_meaning"]) == ("custom-store", 77, "last_applied")
    assert custom["file"] == "orders-app/0_0/.checkpoint_custom-store"
    in_store = by_kind["store_offsets"]
    assert (in_store["store"], in_store["offset"], in_store["offset_meaning"]) == ("counts", None, "in_store")


def test_root_may_be_an_app_folder_or_a_task_folder(tmp_path):
    state = state_dir_21(tmp_path / "state")
    whole = by_path(rows_of(state))
    app = by_path(rows_of(state / "orders-app"))
    assert app.keys() == whole.keys() - {"."}
    assert app["orders-app/0_1/.checkpoint"] == {**whole["orders-app/0_1/.checkpoint"]}
    task = rows_of(state / "orders-app" / "0_1")
    paths = {r["path"] for r in task.state_files}
    assert "orders-app/0_1/.checkpoint" in paths and "orders-app/0_1" in paths
    assert {(c["app_id"], c["task_id"], c["offset"]) for c in task.checkpoints} == {
        ("orders-app", "0_1", 88), ("orders-app", "0_1", 7)}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_checkpoint_is_a_problem_not_a_crash(case):
    data, reason = MALFORMED[case]
    parsed = parse_offset_checkpoint(data)
    assert parsed.entries == [] and reason in parsed.problem


def test_negative_offset_other_than_minus_four_is_kept_with_a_problem():
    parsed = parse_offset_checkpoint(b"0\n3\nt 0 -7\nt 1 5\nt 2 -4\n")
    assert parsed.problem is None
    assert [(e.partition, e.offset, e.problem is not None) for e in parsed.entries] == [
        (0, -7, True), (1, 5, False), (2, -4, False)]


def test_bad_files_in_a_state_dir_become_problem_rows_and_the_rest_is_read(tmp_path):
    rows = rows_of(bad_state_dir(tmp_path / "state"))
    bad = [c for c in rows.checkpoints if c["problem"] and c["topic"] is None]
    assert len(bad) == len(MALFORMED)
    assert all(c["offset"] is None for c in bad)
    good = [c for c in rows.checkpoints if c["problem"] is None]
    assert {(c["task_id"], c["partition"], c["offset"]) for c in good} == {("1_0", 1, 33), ("2_0", 0, 12)}
    negative = [c for c in rows.checkpoints if c["offset"] == -7]
    assert len(negative) == 1 and "invalid negative offset -7" in negative[0]["problem"]
    sources = [s for s, _ in rows.problems]
    assert "bundle/host-1/state/bad-app/0_0/.checkpoint" in sources
    assert "bundle/host-1/state/bad-app/kafka-streams-process-metadata" in sources
    assert len(rows.problems) == len(MALFORMED) + 2


def test_state_dir_sniffing(tmp_path):
    state = state_dir_38(tmp_path / "state")
    assert detect_state_dir(state)
    assert detect_state_dir(state / "orders-app")
    assert detect_state_dir(state / "orders-app" / "0_0")
    assert detect_state_dir(state_dir_21(tmp_path / "old"))
    logs = tmp_path / "logs"
    (logs / "2024_01").mkdir(parents=True)
    (logs / "app.log").write_text("hello\n")
    assert not detect_state_dir(logs)
    assert not detect_state_dir(logs / "app.log")
    assert not detect_state_dir(tmp_path / "missing")
    assert detect_evidence_file(state / "orders-app" / "0_0" / ".checkpoint") == "checkpoint_file"
    assert detect_evidence_file(state / "orders-app" / "0_0" / "counts.position") == "checkpoint_file"
    assert detect_evidence_file(state / "orders-app" / "0_0" / "rocksdb" / "counts" / "000004.sst") is None


def test_lone_checkpoint_file_is_read_with_task_from_its_folder(tmp_path):
    state = state_dir_28(tmp_path / "state")
    path = state / "orders-app" / "0_0" / ".checkpoint"
    rows = rows_of(path, kind="checkpoint_file", source="bundle/host-1/0_0/.checkpoint")
    assert {(c["app_id"], c["task_id"], c["topic"], c["offset"]) for c in rows.checkpoints} == {
        ("orders-app", "0_0", "orders-app-counts-changelog", 10452),
        ("orders-app", "0_0", "orders-app-totals-changelog", -4)}
    assert all(c["file_mtime"] == utc(at(61, 100)) for c in rows.checkpoints)


def test_read_state_builds_typed_dataframes(spark, tmp_path):
    from pyspark.sql import functions as F

    items = [
        StateItem("host-21", state_dir_21(tmp_path / "s21"), "h21/state", "state_dir"),
        StateItem("host-43", state_dir_43(tmp_path / "s43"), "h43/state", "state_dir"),
        StateItem("host-bad", bad_state_dir(tmp_path / "bad"), "bad/state", "state_dir"),
    ]
    tables = read_state(spark, items)
    got = (
        tables.checkpoints.where("problem IS NULL AND offset IS NOT NULL")
        .select("host", "task_id", "topic", "partition", "offset", F.unix_micros("file_mtime").alias("us"))
        .collect()
    )
    facts = {(r.host, r.task_id, r.topic, r.partition): (r.offset, r.us) for r in got}
    assert facts[("host-21", "0_0", "orders-app-counts-changelog", 0)] == (10452, at(61, 123456) // 1000)
    assert facts[("host-43", "0_0", "orders-app-custom-store-changelog", 0)] == (77, at(63, 42) // 1000)
    assert facts[("host-bad", "2_0", "bad-app-s-changelog", 0)][0] == 12
    assert tables.checkpoints.schema["partition"].dataType.typeName() == "integer"
    assert len(tables.problems) == len(MALFORMED) + 2

    empty = read_state(spark, [])
    assert empty.state_files.columns[:3] == ["host", "source", "app_id"]
    assert empty.problems == [] and empty.dynamo_items.schema["last_update"].dataType.typeName() == "timestamp"
