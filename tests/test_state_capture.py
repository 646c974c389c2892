"""The capture tool and the shell listing give the same tables as reading the state directory itself."""

from __future__ import annotations

import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from support import REPO
from support.state_dirs import at, bad_state_dir, state_dir_21, state_dir_28, state_dir_38, state_dir_43
from toolkit.state import StateItem, collect_state_rows, detect_evidence_file, detect_state_dir, read_state
from toolkit.state import capture

CAPTURE_PY = REPO / "toolkit" / "state" / "capture.py"
PLAYBOOK = REPO / "playbooks" / "capturing-state.md"
STORE_DATA = re.compile(r"(\.sst|\.log|/MANIFEST-\d+|/LOG|/LOCK)$")
SHAPES = {"2.1": state_dir_21, "2.8": state_dir_28, "3.8": state_dir_38, "4.3": state_dir_43, "bad": bad_state_dir}


def comparable(rows, source: str):
    """Rows without the columns that legitimately differ (where the evidence came from, when it was taken)."""
    def strip(row):
        return tuple(sorted((k, v) for k, v in row.items() if k not in ("source", "capture_time")))

    return (
        sorted(map(strip, rows.state_files), key=repr),
        sorted(map(strip, rows.checkpoints), key=repr),
        sorted((s.replace(source, "<src>"), r) for s, r in rows.problems),
    )


def read(path: Path, kind: str, source: str):
    return comparable(collect_state_rows([StateItem("host-1", path, source, kind)]), source)


def take_capture(state: Path, out: Path, *extra: str) -> Path:
    assert capture.main([str(state), "--out", str(out), *extra]) == 0
    return out


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_capture_reads_back_as_the_same_tables_as_the_folder(tmp_path, shape):
    state = SHAPES[shape](tmp_path / "state")
    archive = take_capture(state, tmp_path / "capture.tar.gz")
    direct = read(state, "state_dir", "b/state")
    captured = read(archive, "state_capture", "b/capture.tar.gz")
    assert captured == direct
    assert direct[1], "the shape has checkpoint rows"


def test_capture_copies_metadata_only_and_records_the_full_listing(tmp_path):
    state = state_dir_38(tmp_path / "state")
    archive = take_capture(state, tmp_path / "capture.tar.gz")
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        manifest = json.load(tar.extractfile(capture.MANIFEST_MEMBER))
    names = [m.name for m in members]
    assert names[0] == capture.MANIFEST_MEMBER
    assert not [n for n in names if STORE_DATA.search(n)]
    copied = {n[len(capture.FILES_PREFIX):] for n in names[1:]}
    assert copied == {
        "orders-app/kafka-streams-process-metadata",
        "orders-app/0_0/.checkpoint",
        "orders-app/0_0/counts.position",
        "orders-app/__fraud__/0_1/.checkpoint",
        *(f"orders-app/{t}/rocksdb/{s}/{f}" for t, s in (("0_0", "counts"), ("1_2", "joined"))
          for f in ("CURRENT", "IDENTITY", "OPTIONS-000007")),
    }
    assert manifest["format"] == capture.FORMAT_NAME and manifest["format_version"] == 1
    assert manifest["state_dir"] == str(state.resolve()) and manifest["hostname"]
    assert manifest["capture_time"].endswith("Z")
    entries = {e["path"]: e for e in manifest["entries"]}
    sst = entries["orders-app/0_0/rocksdb/counts/000004.sst"]
    assert (sst["type"], sst["size"], sst["copied"]) == ("f", 4096, False)
    assert sst["mtime_ns"] == os.stat(state / sst["path"]).st_mtime_ns == at(22, 250)
    assert entries["orders-app/0_0/.checkpoint"]["mtime_ns"] == at(61, 999999)
    assert entries["."]["type"] == "d" and entries["orders-app/1_2"]["mode"] == "0755"
    assert len(entries) == sum(1 for _ in state.rglob("*")) + 1


def test_include_store_data_copies_sst_files(tmp_path):
    state = state_dir_28(tmp_path / "state")
    archive = take_capture(state, tmp_path / "full.tar.gz", "--include-store-data")
    with tarfile.open(archive) as tar:
        sst = tar.getmember(capture.FILES_PREFIX + "orders-app/0_0/rocksdb/counts/000004.sst")
        assert tar.extractfile(sst).read() == b"\x02" * 4096
    assert read(archive, "state_capture", "x") == read(state, "state_dir", "x")


def test_capture_runs_as_a_single_stdlib_file(tmp_path):
    tree = ast.parse(CAPTURE_PY.read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported - {"__future__"} <= set(sys.stdlib_module_names)

    alone = tmp_path / "tool" / "capture.py"
    alone.parent.mkdir()
    shutil.copy(CAPTURE_PY, alone)
    state = state_dir_43(tmp_path / "state")
    out = tmp_path / "host.tar.gz"
    done = subprocess.run([sys.executable, "-I", str(alone), str(state), "--out", str(out)],
                          cwd=alone.parent, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "entries listed" in done.stderr
    assert detect_evidence_file(out) == "state_capture"
    assert read(out, "state_capture", "x") == read(state, "state_dir", "x")
    missing = subprocess.run([sys.executable, "-I", str(alone), str(tmp_path / "nope"), "--out", str(out)],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2


def playbook_script() -> str:
    blocks = re.findall(r"```sh\n(.*?)```", PLAYBOOK.read_text(), flags=re.DOTALL)
    return next(b for b in blocks if "stream-incident state listing v1" in b)


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("find") is None, reason="needs bash and find")
def test_shell_capture_from_the_playbook_reads_like_the_folder(tmp_path):
    state = state_dir_38(tmp_path / "state")
    out = tmp_path / "shell-capture"
    env = {**os.environ, "STATE_DIR": str(state), "OUT": str(out)}
    done = subprocess.run(["bash", "-euc", playbook_script()], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    listing = out / "state-listing.txt"
    assert detect_evidence_file(listing) == "state_listing"
    assert not detect_state_dir(out / "files") and not detect_state_dir(out / "files" / "orders-app")
    assert read(listing, "state_listing", "x") == read(state, "state_dir", "x")

    # Listing alone: same tree and mtimes, checkpoint contents reported as unavailable.
    shutil.rmtree(out / "files")
    rows = collect_state_rows([StateItem("h", listing, "x", "state_listing")])
    assert {r["path"] for r in rows.state_files} == {r["path"] for r in collect_state_rows(
        [StateItem("h", state, "x", "state_dir")]).state_files}
    assert all(c["problem"].startswith("checkpoint content unavailable") for c in rows.checkpoints)


def test_extracted_capture_is_read_from_its_manifest_and_files_folder(tmp_path):
    state = state_dir_21(tmp_path / "state")
    archive = take_capture(state, tmp_path / "capture.tar.gz")
    target = tmp_path / "extracted"
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    manifest = target / capture.MANIFEST_MEMBER
    assert detect_evidence_file(manifest) == "state_capture"
    assert not detect_state_dir(target / "state-capture" / "files")
    assert read(manifest, "state_capture", "x") == read(state, "state_dir", "x")


def add_member(tar: tarfile.TarFile, name: str, data: bytes, kind: bytes = tarfile.REGTYPE, link: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.size, info.type, info.linkname = (len(data) if kind == tarfile.REGTYPE else 0), kind, link
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def test_hostile_and_damaged_archives_become_problems(tmp_path, monkeypatch):
    manifest = {"format": capture.FORMAT_NAME, "format_version": 1, "state_dir": "/s/app", "root_name": "app",
                "capture_time": "2026-04-08T09:00:00.000000Z", "hostname": "h",
                "entries": [{"path": ".", "type": "d", "size": 0, "mtime_ns": at(0), "mode": "0755"},
                            {"path": "0_1", "type": "d", "size": 0, "mtime_ns": at(1), "mode": "0755"},
                            {"path": "0_1/.checkpoint", "type": "f", "size": 12, "mtime_ns": at(2), "mode": "0644"},
                            {"path": "../../etc/passwd", "type": "f", "size": 1, "mtime_ns": at(2)}]}
    hostile = tmp_path / "hostile.tar.gz"
    with tarfile.open(hostile, "w:gz") as tar:
        add_member(tar, capture.MANIFEST_MEMBER, json.dumps(manifest).encode())
        add_member(tar, capture.FILES_PREFIX + "0_1/.checkpoint", b"0\n1\nt 1 9\n")
        add_member(tar, capture.FILES_PREFIX + "../../../escaped/.checkpoint", b"0\n0\n")
        add_member(tar, capture.FILES_PREFIX + "0_2/.checkpoint", b"", tarfile.SYMTYPE, "/etc/shadow")
    monkeypatch.chdir(tmp_path)
    rows = collect_state_rows([StateItem("h", hostile, "b/hostile.tar.gz", "state_capture")])
    assert [(c["task_id"], c["offset"]) for c in rows.checkpoints] == [("0_1", 9)]
    reasons = " | ".join(r for _, r in rows.problems)
    assert "unsafe path in manifest" in reasons and reasons.count("unsafe or non-regular") == 2
    assert not (tmp_path / "escaped").exists()

    good = take_capture(state_dir_28(tmp_path / "state"), tmp_path / "good.tar.gz")
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    garbage = tmp_path / "garbage.tar.gz"
    garbage.write_bytes(b"\x1f\x8b\x08\x00" + os.urandom(2000))
    rows = collect_state_rows([
        StateItem("h", truncated, "b/truncated.tar.gz", "state_capture"),
        StateItem("h", garbage, "b/garbage.tar.gz", "state_capture"),
        StateItem("h", tmp_path / "absent.tar.gz", "b/absent.tar.gz", "state_capture"),
    ])
    sources = {s for s, _ in rows.problems}
    assert {"b/garbage.tar.gz", "b/absent.tar.gz"} <= sources
    assert any(s.startswith("b/truncated.tar.gz") for s in sources)
    assert detect_evidence_file(garbage) is None


def test_capture_and_folder_give_equal_dataframes(spark, tmp_path):
    state = state_dir_43(tmp_path / "state")
    archive = take_capture(state, tmp_path / "capture.tar.gz")
    tables = read_state(spark, [StateItem("h", state, "dir", "state_dir"),
                                StateItem("h", archive, "cap", "state_capture")])
    for frame in (tables.state_files, tables.checkpoints):
        cols = [c for c in frame.columns if c not in ("source", "capture_time")]
        rows = frame.select(F.unix_micros("capture_time").alias("taken"), "source", *cols).collect()
        direct = sorted((tuple(r)[2:] for r in rows if r.source == "dir"), key=repr)
        captured = sorted((tuple(r)[2:] for r in rows if r.source == "cap"), key=repr)
        assert direct and captured == direct
        assert {r.taken is None for r in rows if r.source == "dir"} == {True}
        assert None not in {r.taken for r in rows if r.source == "cap"}


def test_a_capture_of_a_folder_without_state_says_so(tmp_path, capsys):
    """``capture-state`` pointed at the wrong folder (no .checkpoint, lock or metadata file) still writes its listing,
    and warns that nothing was copied instead of reporting success in silence."""
    wrong = tmp_path / "not-the-state-dir"
    (wrong / "logs").mkdir(parents=True)
    (wrong / "logs" / "app.log").write_text("hello\n")
    take_capture(wrong, tmp_path / "capture.tar.gz")
    err = capsys.readouterr().err
    assert "0 files copied" in err and "warning: no checkpoint, lock or metadata file" in err and "state.dir?" in err
