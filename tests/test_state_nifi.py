"""NiFi's on-disk state: local state provider and FlowFile repository write-ahead logs, 1.x and 2.x.

The committed fixtures under ``tests/fixtures/nifi/`` are written byte for byte as NiFi 1.28.1 and 2.9.0 write them
(``tests/nifi_wal_writer.py`` names the source of every field); damaged copies are cut from them here.
"""

from __future__ import annotations

import shutil
import struct
import tarfile
from pathlib import Path

import pytest

from support import nifi_wal_writer as w
from toolkit.state import StateItem, collect_state_rows, read_state
from toolkit.state import capture
from toolkit.state.nifi_wal import decode_state_journal, decode_state_snapshot
from toolkit.state.sniff import detect_evidence_file, detect_nifi_dir, detect_state_dir

FIXTURES = Path(__file__).parent / "fixtures" / "nifi"
V2, V1 = FIXTURES / "nifi-2.9.0", FIXTURES / "nifi-1.28.1"
LIST_FILE = "0195c2a4-7d3e-1000-b1d4-57f0c3a2e611"
LIST_SFTP = "0195c2a4-7d3e-1000-9a1e-2f3b6c7d8e90"
REMOVED = "0195c2a4-7d3e-1000-aa00-0c1d2e3f4a5b"


def _rows(path: Path, source: str = "h/x"):
    return collect_state_rows([StateItem("h", path, source, "")])


def _current(rows) -> dict[str, dict[str, str | None]]:
    state: dict[str, dict[str, str | None]] = {}
    for r in rows.nifi_local_state:
        if r["current"]:
            state.setdefault(r["component_id"], {})
            if r["key"] is not None:
                state[r["component_id"]][r["key"]] = r["value"]
            elif r["update_type"] == "DELETE":
                state[r["component_id"]] = {"<deleted>": None}
    return state


# --- the committed fixtures ---------------------------------------------------------------------------


def test_fixture_headers_are_the_java_class_names_nifi_writes():
    snapshot = (V2 / "state/local/checkpoint").read_bytes()
    assert snapshot[:2] == struct.pack(">H", len(w.HASHMAP_SNAPSHOT)) and snapshot[2:38] == w.HASHMAP_SNAPSHOT.encode()
    assert (V2 / "state/local/journals/42.journal").read_bytes()[-1] == 127  # closed cleanly
    assert (V1 / "state/local/snapshot").read_bytes()[2:38] == w.MINIMAL_LOCKING.encode()


def test_local_state_2x_snapshot_then_journal_replay():
    rows = _rows(V2 / "state/local")
    assert rows.problems == []
    files = {r["path"]: r for r in rows.nifi_repository_files}
    assert files["checkpoint"]["records"] == 3 and files["checkpoint"]["max_transaction_id"] == 41
    journal = files["journals/42.journal"]
    assert (journal["transactions"], journal["first_transaction_id"], journal["last_transaction_id"]) == (4, 42, 45)
    assert journal["complete"] is True and journal["version_hint"] == "2.x"
    state = _current(rows)
    assert state[LIST_FILE] == {"listing.timestamp": "1775639640000", "processed.timestamp": "1775639640000",
                                "id.0": "/data/in/orders-0419.csv"}
    assert state[LIST_SFTP]["listing.timestamp"] == "1775639580000"
    assert state[REMOVED] == {"<deleted>": None}
    cleared = [r for r in rows.nifi_local_state if r["cleared"]]
    assert [(r["component_id"], r["transaction_id"], r["state_version"]) for r in cleared] == [(LIST_FILE, 43, 43)]
    # replay order: the snapshot first, then transactions in id order
    order = [r["transaction_id"] for r in sorted(rows.nifi_local_state, key=lambda r: r["record_no"])]
    assert order[:7] == [None] * 7 and order[7:] == sorted(order[7:])


def test_local_state_1x_partitions_are_merged_by_transaction_id():
    rows = _rows(V1 / "state/local")
    assert rows.problems == []
    assert {r["version_hint"] for r in rows.nifi_repository_files if r["kind"] != "dir"} == {"1.x"}
    by_path = {r["path"]: r for r in rows.nifi_repository_files}
    assert by_path["snapshot"]["max_transaction_id"] == 17 and by_path["snapshot"]["records"] == 2
    assert (by_path["partition-0/1.journal"]["first_transaction_id"],
            by_path["partition-0/1.journal"]["last_transaction_id"]) == (18, 20)
    state = _current(rows)
    assert state[LIST_FILE] == {}  # transaction 20 (partition-0) cleared it after 18; 19 is in partition-1
    assert state[LIST_SFTP]["id.0"] == "/outbound/d.xml"
    assert state[REMOVED] == {"<deleted>": None}


@pytest.mark.parametrize(("root", "records", "max_tx", "transactions", "complete"),
                         [(V2, 3, 5000, 3, True), (V1, 2, 900, 2, False)])
def test_flowfile_repository_outline_only(root, records, max_tx, transactions, complete):
    rows = _rows(root / "flowfile_repository")
    assert rows.problems == [] and rows.nifi_local_state == []
    files = {r["path"]: r for r in rows.nifi_repository_files}
    assert files["checkpoint"]["repository"] == "flowfile"
    assert (files["checkpoint"]["records"], files["checkpoint"]["max_transaction_id"]) == (records, max_tx)
    journal = next(r for r in rows.nifi_repository_files if r["kind"] == "journal")
    assert journal["transactions"] == transactions and journal["complete"] is complete
    assert journal["first_transaction_id"] == max_tx + 1


def test_sniffing_finds_the_wal_folders_not_the_home(tmp_path):
    for root in (V1, V2):
        assert detect_nifi_dir(root / "state/local") and detect_state_dir(root / "flowfile_repository")
        assert not detect_state_dir(root) and not detect_state_dir(root / "state")
    loose = tmp_path / "checkpoint"
    shutil.copy(V2 / "state/local/checkpoint", loose)
    assert detect_evidence_file(loose) == "nifi_wal_file"
    rows = _rows(loose)
    assert rows.problems == [] and len(_current(rows)) == 3


# --- damaged copies -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("top", "rel"), [("state/local", "checkpoint"), ("state/local", "journals/42.journal"),
                                          ("flowfile_repository", "checkpoint"),
                                          ("flowfile_repository", "journals/5001.journal")])
def test_every_truncation_is_a_problem_row_never_a_crash(tmp_path, top, rel):
    data = (V2 / top / rel).read_bytes()
    header = capture.nifi_wal_outline(V2 / top / rel)["header_bytes"]
    for cut in sorted({*range(0, min(len(data), 90)), *range(90, len(data), 7)}):
        folder = tmp_path / f"cut{cut}"
        shutil.copytree(V2 / top, folder)
        (folder / rel).write_bytes(data[:cut])
        rows = collect_state_rows([StateItem("h", folder, "h/x", "state_dir")])
        assert not [p for p in rows.problems if "unexpected error" in p[1]], (rel, cut)
        row = next(r for r in rows.nifi_repository_files if r["path"] == rel)
        if rel.endswith(".journal"):
            # a cut between two whole transactions looks like a journal still open: not closed, no damage
            assert row["problem"] or row["complete"] is False, (rel, cut)
        elif top == "state/local" or cut < header:
            # FlowFile checkpoints are read up to their record count only (records are never decoded)
            assert row["problem"], (rel, cut)
            assert (f"h/x:{rel}", f"NiFi {row['repository']} file: {row['problem']}") in rows.problems


def test_truncated_journal_keeps_whole_transactions_and_names_the_cut():
    data = (V2 / "state/local/journals/42.journal").read_bytes()
    decoded = decode_state_journal(data[:-30])
    assert decoded.problem and "truncated" in decoded.problem and "transaction 45" in decoded.problem
    assert decoded.transactions == 3 and {r["transaction_id"] for r in decoded.records} == {42, 43, 44}
    unclosed = decode_state_journal(data[:-1])
    assert unclosed.problem is None and unclosed.complete is False and unclosed.transactions == 4


def test_power_loss_shapes(tmp_path):
    assert decode_state_snapshot(b"").problem.startswith("empty file")
    journal = (V2 / "state/local/journals/42.journal").read_bytes()[:-1] + b"\0" * 64
    nul = decode_state_journal(journal)
    assert nul.transactions == 4 and "NUL" in nul.problem
    outline_path = tmp_path / "9.journal"
    outline_path.write_bytes(journal)
    outline = capture.nifi_wal_outline(outline_path)
    assert outline["trailing_nul_bytes"] == 64 and outline["transactions"] == 4 and outline["problem"] is None
    bad = bytearray((V2 / "state/local/journals/42.journal").read_bytes())
    header = len(w.length_delimited_journal([], closed=False))
    bad[header] = 65
    assert "unexpected transaction marker 65" in decode_state_journal(bytes(bad)).problem
    garbage = tmp_path / "checkpoint"
    garbage.write_bytes(b"\x00\x05hello" + bytes(range(256)))
    assert capture.nifi_wal_outline(garbage)["problem"].startswith("not a NiFi write-ahead-log file")


def test_modified_utf8_round_trip():
    text = "Zürich/\u0000/数据/\U0001F600"
    assert capture.decode_modified_utf8(w.java_utf(text)[2:]) == text


def test_1x_state_left_next_to_a_2x_log_is_noted(tmp_path):
    folder = tmp_path / "state" / "local"
    shutil.copytree(V2 / "state/local", folder)
    shutil.copy(V1 / "state/local/snapshot", folder / "snapshot")
    rows = _rows(folder)
    note = next(r for r in rows.nifi_repository_files if r["path"] == "snapshot")["note"]
    assert note and "not carried over" in note


# --- capture-state --product nifi ---------------------------------------------------------------------


def _nifi_home(tmp_path: Path) -> Path:
    home = tmp_path / "nifi-home"
    shutil.copytree(V2, home)
    secret = home / "content_repository" / "1" / "1775639520000-1"
    secret.parent.mkdir(parents=True)
    secret.write_bytes(b"customer payload")
    (home / "provenance_repository").mkdir()
    (home / "provenance_repository" / "1.prov").write_bytes(b"event")
    return home


def _comparable(rows):
    drop = {"source", "capture_time"}
    files = sorted(({k: v for k, v in r.items() if k not in drop} for r in rows.nifi_repository_files),
                   key=lambda r: (r["repository"], r["path"]))
    for r in files:  # a folder copy is read at its own root, the capture at the NiFi home
        r["path"] = r["path"].split("/", 2)[-1] if r["path"].startswith("state/local/") else r["path"]
    state = sorted(({k: v for k, v in r.items() if k not in drop | {"path"}} for r in rows.nifi_local_state),
                   key=lambda r: (r["record_no"], r["key"] or ""))
    return files, state


def test_capture_round_trips_into_the_state_tables(tmp_path):
    home = _nifi_home(tmp_path)
    out = tmp_path / "nifi-state.tar.gz"
    assert capture.main([str(home), "--product", "nifi", "--out", str(out)]) == 0
    with tarfile.open(out) as archive:
        names = archive.getnames()
    copied = [n for n in names if n.startswith(capture.FILES_PREFIX)]
    assert sorted(copied) == [capture.FILES_PREFIX + "state/local/checkpoint",
                              capture.FILES_PREFIX + "state/local/journals/42.journal"]
    assert detect_evidence_file(out) == "state_capture"
    captured = collect_state_rows([StateItem("h", out, "h/nifi-state.tar.gz", "")])
    assert not [p for p in captured.problems]
    assert not [r for r in captured.nifi_repository_files if "content_repository" in r["path"]
                or "provenance" in r["path"]]
    direct = collect_state_rows([StateItem("h", home / "state" / "local", "h/local", ""),
                                 StateItem("h", home / "flowfile_repository", "h/ffr", "")])
    cap_files, cap_state = _comparable(captured)
    dir_files, dir_state = _comparable(direct)
    assert cap_state == dir_state and cap_state
    wal = lambda files: {(r["repository"], r["path"].rsplit("/", 1)[-1], r["records"], r["max_transaction_id"],
                          r["transactions"], r["complete"], r["mtime"]) for r in files if r["kind"] != "dir"}
    assert wal(cap_files) == wal(dir_files)
    assert all(r["capture_time"] is not None for r in captured.nifi_local_state)


def test_capture_never_copies_flowfile_records(tmp_path):
    home = _nifi_home(tmp_path)
    out = tmp_path / "c.tar.gz"
    capture.write_capture(home, out, product="nifi", include_store_data=True)
    with tarfile.open(out) as archive:
        assert not [n for n in archive.getnames() if "flowfile_repository" in n and n.startswith(capture.FILES_PREFIX)]
        manifest = archive.extractfile(capture.MANIFEST_MEMBER).read().decode()
    assert '"wal"' in manifest and "customer payload" not in manifest


def test_read_state_builds_the_nifi_tables(spark):
    tables = read_state(spark, [StateItem("h", V2 / "state/local", "h/local", ""),
                                StateItem("h", V1 / "flowfile_repository", "h/ffr", "")])
    assert tables.nifi_local_state.where("current and key = 'listing.timestamp'").count() == 2
    assert tables.nifi_repository_files.where("repository = 'flowfile' and kind = 'journal' and not complete").count() == 1
