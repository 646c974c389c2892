"""Kafka Streams state directories (2.1, 2.8, 3.8, 4.3 shapes) -> state_files / checkpoints, and bad checkpoints."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from toolkit.state import StateItem, collect_state_rows, detect_evidence_file, detect_state_dir, read_state
from toolkit.state.offset_checkpoint import parse_offset_checkpoint

# 2026-04-08T09:00:00Z plus sub-second parts, so tests prove microsecond mtimes survive.
T0_NS = 1_775_638_800_000_000_000
PROCESS_ID = "5e2c1a7e-3d4b-4c55-9a0e-7f3b2c1d0e9f"
OPTIONS_43 = b"""[Version]
  rocksdb_version=9.7.3
[DBOptions]
  create_if_missing=true
[CFOptions "default"]
  comparator=leveldb.BytewiseComparator
[CFOptions "keyValueWithTimestamp"]
  comparator=leveldb.BytewiseComparator
[CFOptions "offsets"]
  comparator=leveldb.BytewiseComparator
"""
OPTIONS_OLD = b'[Version]\n  rocksdb_version=7.9.2\n[CFOptions "default"]\n[CFOptions "keyValueWithTimestamp"]\n'


def at(seconds: float, micros: int = 0) -> int:
    """T0 plus ``seconds`` and ``micros``, in nanoseconds (plus 789 ns that Spark's microseconds drop)."""
    return T0_NS + int(seconds * 1_000_000_000) + micros * 1000 + 789


def utc(ns: int) -> datetime:
    from toolkit.state.timeutil import from_ns

    return from_ns(ns)


def rocksdb_files(prefix: str, t: int, options: bytes = OPTIONS_OLD, sst_bytes: int = 4096) -> dict:
    return {
        f"{prefix}/": at(t),
        f"{prefix}/CURRENT": (b"MANIFEST-000005\n", at(t)),
        f"{prefix}/IDENTITY": (b"3c1f0a4e-rocks\n", at(t)),
        f"{prefix}/LOCK": (b"", at(t)),
        f"{prefix}/LOG": (b"rocksdb info log\n" * 10, at(t + 1)),
        f"{prefix}/MANIFEST-000005": (b"\x01" * 300, at(t + 1)),
        f"{prefix}/OPTIONS-000007": (options, at(t)),
        f"{prefix}/000004.sst": (b"\x02" * sst_bytes, at(t + 2, 250)),
        f"{prefix}/000006.log": (b"\x03" * 100, at(t + 3, 500)),
    }


def build_tree(root: Path, spec: dict) -> Path:
    """Create files (``rel: (bytes, mtime_ns)``) and folders (``rel/: mtime_ns``), then set every mtime.

    Folder mtimes are set last, deepest first, because creating a child touches its parent.
    """
    root.mkdir(parents=True, exist_ok=True)
    for rel, value in spec.items():
        if rel.endswith("/"):
            (root / rel).mkdir(parents=True, exist_ok=True)
        else:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(value[0])
    for rel, value in spec.items():
        if not rel.endswith("/"):
            os.utime(root / rel, ns=(value[1], value[1]))
    for rel in sorted((r for r in spec if r.endswith("/")), key=lambda r: -r.count("/")):
        os.utime(root / rel, ns=(spec[rel], spec[rel]))
    os.utime(root, ns=(at(0), at(0)))
    return root


def state_dir_21(root: Path) -> Path:
    """Kafka Streams 2.1: per-task .lock, global store, a window store with segments, no process file."""
    spec = {
        "orders-app/": at(5),
        "orders-app/0_0/": at(60),
        "orders-app/0_0/.lock": (b"", at(10)),
        "orders-app/0_0/.checkpoint": (b"0\n1\norders-app-counts-changelog 0 10452\n", at(61, 123456)),
        **rocksdb_files("orders-app/0_0/rocksdb/counts", 20),
        "orders-app/0_0/rocksdb/": at(20),
        "orders-app/0_1/": at(70),
        "orders-app/0_1/.lock": (b"", at(10)),
        "orders-app/0_1/.checkpoint": (
            b"0\n2\norders-app-counts-changelog 1 88\norders-app-windowed-changelog 1 7\n",
            at(71, 654321),
        ),
        "orders-app/0_1/windowed/": at(30),
        **rocksdb_files("orders-app/0_1/windowed/windowed.1775606400000", 30),
        "orders-app/global/": at(40),
        "orders-app/global/.lock": (b"", at(11)),
        "orders-app/global/.checkpoint": (b"0\n1\nproducts 0 512\n", at(41)),
        **rocksdb_files("orders-app/global/rocksdb/products-store", 42),
        "orders-app/global/rocksdb/": at(42),
    }
    return build_tree(root, spec)


def state_dir_28(root: Path) -> Path:
    """2.8: app-level .lock and process metadata appear while per-task .lock files still exist; -4 sentinel."""
    spec = {
        "orders-app/": at(5),
        "orders-app/.lock": (b"", at(1)),
        "orders-app/kafka-streams-process-metadata": (b'{"processId":"%s"}' % PROCESS_ID.encode(), at(2)),
        "orders-app/0_0/": at(60),
        "orders-app/0_0/.lock": (b"", at(10)),
        "orders-app/0_0/.checkpoint": (
            b"0\n2\norders-app-counts-changelog 0 10452\norders-app-totals-changelog 0 -4\n",
            at(61, 100),
        ),
        "orders-app/0_0/rocksdb/": at(20),
        **rocksdb_files("orders-app/0_0/rocksdb/counts", 20),
        **rocksdb_files("orders-app/0_0/rocksdb/totals", 21, sst_bytes=0),
    }
    return build_tree(root, spec)


def state_dir_38(root: Path) -> Path:
    """3.8: no task .lock files, IQv2 .position files, a named topology, an EOS task with no checkpoint."""
    spec = {
        "orders-app/": at(5),
        "orders-app/.lock": (b"", at(1)),
        "orders-app/kafka-streams-process-metadata": (b'{"processId":"%s"}' % PROCESS_ID.encode(), at(2)),
        "orders-app/0_0/": at(60),
        "orders-app/0_0/.checkpoint": (b"0\n1\norders-app-counts-changelog 0 20001\n", at(61, 999999)),
        "orders-app/0_0/counts.position": (b"0\n1\norders 0 45000\n", at(62)),
        "orders-app/0_0/rocksdb/": at(20),
        **rocksdb_files("orders-app/0_0/rocksdb/counts", 20),
        "orders-app/1_2/": at(80),
        "orders-app/1_2/rocksdb/": at(20),
        **rocksdb_files("orders-app/1_2/rocksdb/joined", 20),
        "orders-app/__fraud__/": at(6),
        "orders-app/__fraud__/0_1/": at(90),
        "orders-app/__fraud__/0_1/.checkpoint": (b"0\n1\norders-app-scores-changelog 1 5\n", at(91)),
    }
    return build_tree(root, spec)


def state_dir_43(root: Path) -> Path:
    """4.3 (KIP-1035): offsets in RocksDB's 'offsets' column family, .checkpoint_<store> for custom stores."""
    spec = {
        "orders-app/": at(5),
        "orders-app/.lock": (b"", at(1)),
        "orders-app/kafka-streams-process-metadata": (b'{"processId":"%s"}' % PROCESS_ID.encode(), at(2)),
        "orders-app/0_0/": at(60),
        "orders-app/0_0/.checkpoint_custom-store": (
            b"0\n1\norders-app-custom-store-changelog 0 77\n",
            at(63, 42),
        ),
        "orders-app/0_0/rocksdb/": at(20),
        **rocksdb_files("orders-app/0_0/rocksdb/counts", 20, options=OPTIONS_43),
    }
    return build_tree(root, spec)


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


MALFORMED = {
    "unknown_version": (b"1\n1\nt 0 5\n", "Unknown offset checkpoint version: 1"),
    "wrong_count": (b"0\n3\nt 0 5\nt 1 6\n", "Expected 3 entries but found only 2"),
    "too_many_lines": (b"0\n1\nt 0 5\nt 1 6\n", "Expected 1 entries but found only 2"),
    "bad_line": (b"0\n1\nt 0\n", "Malformed line in offset checkpoint file: 't 0'."),
    "bad_number": (b"0\n1\nt zero 5\n", "Malformed line"),
    "truncated_entry": (b"0\n2\nt 0 5\nt 1", "Malformed line in offset checkpoint file: 't 1'."),
    "truncated_after_version": (b"0\n", "truncated"),
    "binary": (b"\x00\x00\x00\x00\x7fELF\x00\x01", "binary"),
    "not_utf8": (b"0\n1\nt\xff 0 5\n", "not UTF-8"),
    "empty": (b"", "empty file"),
    "count_not_number": (b"0\nabc\n", "entry count line is not a number"),
}


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


def bad_state_dir(root: Path) -> Path:
    spec = {"bad-app/": at(5), "bad-app/.lock": (b"", at(1)),
            "bad-app/kafka-streams-process-metadata": (b"{not json", at(2))}
    for number, case in enumerate(sorted(MALFORMED)):
        spec[f"bad-app/0_{number}/"] = at(50)
        spec[f"bad-app/0_{number}/.checkpoint"] = (MALFORMED[case][0], at(51))
    spec["bad-app/1_0/"] = at(50)
    spec["bad-app/1_0/.checkpoint"] = (b"0\n2\nbad-app-s-changelog 0 -7\nbad-app-s-changelog 1 33\n", at(52))
    spec["bad-app/2_0/"] = at(50)
    spec["bad-app/2_0/.checkpoint"] = (b"0\n1\nbad-app-s-changelog 0 12\n", at(53))
    return build_tree(root, spec)


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
