"""What a healthy NiFi leaves on disk that looks like loss: a copy of a running node's FlowFile repository, the
empty 1.x records of components removed before an upgrade, and the high-water marks of List processors that do
not use ``listing.timestamp``.

Each case is built byte for byte as NiFi writes it (``tests/support/nifi_wal_writer.py``) and checked against
the rule in the source it follows (``HashMapSnapshot#recover``, ``WriteAheadLocalStateProvider#onComponentRemoved``,
ListHDFS' ``latest.timestamp``, ListS3's ``currentTimestamp``). Whether the FlowFile repository detector takes a
live copy for damage is tested with that detector (``tests/detectors/``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from support import nifi_wal_writer as w
from toolkit.state import StateItem, collect_state_rows
from toolkit.state.schemas import NIFI_LOCAL_STATE_SCHEMA
from toolkit.timeline.nifi import state_rows_from_capture

FFR_HEADER = b"\x00\x00\x00\x04" + b"\x00" * 12
LIST_S3 = "0190c1d2-3e4f-1000-a5b6-c7d8e9f0a1b2"
LIST_HDFS = "0190c1d2-3e4f-1000-b6c7-d8e9f0a1b2c3"
REMOVED = "0171d2e0-4c3b-1000-8e21-7f5a9c3d1e02"
KEEPER = "018f3a1c-5b2e-1000-9a7d-2c4e6f8a0b13"
KEY_SERVICE = "org.apache.nifi.web.security.jwt.key.service.StandardVerificationKeyService"


def _rows(path: Path):
    return collect_state_rows([StateItem("h", path, "h/x", "")])


def _files(rows) -> dict[str, dict]:
    return {r["path"]: r for r in rows.nifi_repository_files}


def test_a_partial_checkpoint_next_to_its_snapshot_is_no_damage(tmp_path):
    repo = tmp_path / "flowfile_repository"
    kw = {"serde": w.FLOWFILE_SERDE, "serde_version": 2, "serde_header": FFR_HEADER}
    w.write(repo / "checkpoint", w.hashmap_snapshot([b""] * 10, 99, **kw))
    w.write(repo / "checkpoint.partial", b"")
    rows = _rows(repo)
    partial = _files(rows)["checkpoint.partial"]
    assert partial["problem"] is None and "deletes the partial file" in partial["note"]
    assert not [p for p in rows.problems if "checkpoint.partial" in p[0]]
    # alone, a cut partial file is what NiFi renames into place and recovers from: damage
    (repo / "checkpoint").unlink()
    w.write(repo / "journals" / "100.journal", w.length_delimited_journal([(100, b"\x01" * 8)], closed=False, **kw))
    assert _files(_rows(repo))["checkpoint.partial"]["problem"] == "empty file (0 bytes)"


def _state_changes(spark, folder: Path) -> list:
    local = _rows(folder).nifi_local_state
    frame = spark.createDataFrame(local, NIFI_LOCAL_STATE_SCHEMA)
    return state_rows_from_capture(frame).orderBy("ts", "component_id", "kind").collect()


def _millis(text: str) -> str:
    return str(int(datetime.fromisoformat(text + "+00:00").timestamp() * 1000))


def test_listhdfs_and_lists3_marks_going_back_are_regressions(spark, tmp_path):
    folder = tmp_path / "state" / "local"
    snapshot = [w.state_record((LIST_S3, "UPDATE", 7, {"currentTimestamp": _millis("2026-04-08T08:00:00"),
                                                        "key-0": "orders/2026/04/08/o-1.json"})),
                w.state_record((LIST_HDFS, "UPDATE", 8, {"latest.timestamp": _millis("2026-04-08T08:10:00"),
                                                          "latest.file.0": "/data/in/p-1.parquet"}))]
    w.write(folder / "checkpoint", w.hashmap_snapshot(snapshot, 8))
    journal = [(9, w.state_record((LIST_S3, "UPDATE", 9, {"currentTimestamp": _millis("2026-04-01T00:00:00"),
                                                            "key-0": "orders/2026/04/01/o-0.json"}))),
               (10, w.state_record((LIST_HDFS, "UPDATE", 10, {"latest.timestamp": _millis("2026-04-08T08:20:00"),
                                                               "latest.file.0": "/data/in/p-2.parquet"})))]
    w.write(folder / "journals" / "9.journal", w.length_delimited_journal(journal, closed=False))
    changes = _state_changes(spark, folder)
    s3 = [c for c in changes if c.component_id == LIST_S3 and c.kind == "regressed"]
    assert len(s3) == 1 and "currentTimestamp" in s3[0].detail
    assert s3[0].listing_before.replace(tzinfo=None) - s3[0].listing_after.replace(tzinfo=None) == timedelta(
        days=7, hours=8)
    hdfs = [c.kind for c in changes if c.component_id == LIST_HDFS]
    assert hdfs == ["first_seen", "updated"]  # a mark moving forward is no regression


def test_only_1x_records_with_entries_are_lost_at_the_upgrade(spark, tmp_path):
    folder = tmp_path / "state" / "local"
    w.write(folder / "snapshot", w.minimal_locking_snapshot([
        (REMOVED, "UPDATE", 211, {}),  # a component removed long ago: 1.x keeps its empty record in every checkpoint
        (KEEPER, "UPDATE", 5309, {"listing.timestamp": _millis("2026-04-08T06:55:12"), "id.0": "/out/o-1.csv"}),
        (KEY_SERVICE, "UPDATE", 5301, {"k1": "{}"}),  # a framework service, not a flow component
    ], 10422))
    w.write(folder / "checkpoint", w.hashmap_snapshot([], -1))
    w.write(folder / "journals" / "0.journal", w.length_delimited_journal(
        [(0, w.state_record((KEEPER, "UPDATE", 0, {"listing.timestamp": _millis("2026-04-08T07:11:58")})))],
        closed=False))
    lost = [c for c in _state_changes(spark, folder) if c.kind == "not_carried_over"]
    # the processor that rebuilt its state under 2.x still lost its 1.x state at the upgrade
    assert [c.component_id for c in lost] == [KEEPER]
    assert lost[0].listing_before.replace(tzinfo=None) == datetime(2026, 4, 8, 6, 55, 12)
