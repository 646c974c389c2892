"""NiFi's on-disk write-ahead logs -> ``nifi_repository_files`` and ``nifi_local_state`` rows.

Two repositories are read, from a copied folder or from a ``capture-state --product nifi`` archive:

* the local state provider (``WriteAheadLocalStateProvider``, default ``./state/local``): component state
  (listing timestamps of ``ListFile``/``ListS3``/``ListSFTP``, offsets of other stateful processors).
  NiFi 2.x writes it with ``SequentialAccessWriteAheadLog``: ``checkpoint`` (a ``HashMapSnapshot``),
  ``checkpoint.partial`` while a checkpoint is written, and ``journals/<first transaction id>.journal``
  (``LengthDelimitedJournal``). NiFi 1.x writes it with ``MinimalLockingWriteAheadLog``: ``snapshot``,
  ``snapshot.partial`` and ``partition-<n>/<n>.journal``. Records are ``StateMapSerDe`` records: component
  id, update type, state version, then the key/value entries (a cleared state is an update with none).
* the FlowFile repository (``WriteAheadFlowFileRepository``, default ``./flowfile_repository``), written by
  ``SequentialAccessWriteAheadLog`` in 1.x and 2.x. Only the outline is read (see
  :func:`toolkit.state.capture.nifi_wal_outline`): record count and max transaction id of the checkpoint,
  transaction ids and lengths of the journals, whether each journal was closed. FlowFile records, attribute
  values and content are never decoded, and the content and provenance repositories are never read.

Damage never raises: a truncated or corrupt file keeps what was decoded before the damage and its row
carries ``problem`` (also reported as an ingest problem).
"""

from __future__ import annotations

import os
import struct
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from toolkit.state import capture
from toolkit.state.capture import (
    JOURNAL_COMPLETE,
    STATE_MAP_SERDE,
    TRANSACTION_FOLLOWS,
    WAL_HASHMAP_SNAPSHOT,
    WAL_LENGTH_DELIMITED_JOURNAL,
    WAL_MINIMAL_LOCKING,
)
from toolkit.state.snapshot import Entry, Snapshot

#: ``org.wali.UpdateType`` names, in declaration order (2.x added the last two).
UPDATE_TYPES = ("CREATE", "UPDATE", "DELETE", "SWAP_OUT", "SWAP_IN", "SWAP_FILE_DELETED", "SWAP_FILE_RENAMED")
#: ``MinimalLockingWriteAheadLog`` markers after each record of a transaction.
_TRANSACTION_CONTINUE, _TRANSACTION_COMMIT = 1, 2
_FLOWFILE_SERDE_MARK = "RepositoryRecordSerde"


# --------------------------------------------------------------------------- loading a tree


def from_directory(root: Path, max_file_bytes: int = capture.DEFAULT_MAX_FILE_BYTES) -> Snapshot:
    """List a copied NiFi home or repository folder the way ``capture-state --product nifi`` does."""
    listed, errors = capture.walk_listing(root, skip_dir_names=capture.NIFI_SKIPPED_DIRS)
    outlines: dict[str, dict[str, Any]] = {}
    sizes: dict[str, int] = {}
    entries: list[Entry] = []
    for item in listed:
        rel = "" if item["path"] == "." else item["path"]
        entries.append(Entry(rel=rel, type=item["type"], size=item["size"], mtime_ns=item["mtime_ns"],
                             mode=item["mode"]))
        sizes[rel] = item["size"]
        if item["type"] == "f":
            outline = capture.nifi_outline_or_none(root / rel, rel.rsplit("/", 1)[-1])
            if outline is not None:
                outlines[rel] = outline

    def read(rel: str) -> bytes | None:
        if not capture.nifi_copies_content(outlines.get(rel), sizes.get(rel, 0), max_file_bytes):
            return None
        try:
            with open(root / rel, "rb") as handle:
                return handle.read(max_file_bytes + 1)
        except OSError:
            return None

    snap = Snapshot(root_name=root.name, parent_name=root.parent.name or None, entries=entries, read=read,
                    product="nifi", wal_outlines=outlines)
    snap.problems.extend((err["path"], err["error"]) for err in errors)
    return snap


# --------------------------------------------------------------------------- decoding records


class _Damaged(Exception):
    """The bytes stop or turn invalid inside a field; ``str`` says where."""


class _Reader:
    """A cursor over bytes with Java ``DataInputStream`` reads (big-endian)."""

    def __init__(self, data: bytes, start: int = 0, end: int | None = None) -> None:
        self.data, self.pos, self.end = data, start, len(data) if end is None else end

    def left(self) -> int:
        return self.end - self.pos

    def take(self, size: int, what: str) -> bytes:
        if size < 0 or self.pos + size > self.end:
            raise _Damaged(f"truncated in {what} at byte {self.pos} ({self.left()} of {size} bytes left)")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def boolean(self, what: str) -> bool:
        return self.u8(what) != 0

    def i32(self, what: str) -> int:
        return struct.unpack(">i", self.take(4, what))[0]

    def i64(self, what: str) -> int:
        return struct.unpack(">q", self.take(8, what))[0]

    def utf(self, what: str) -> str:
        (length,) = struct.unpack(">H", self.take(2, what))
        return capture.decode_modified_utf8(self.take(length, what))


def _state_record(reader: _Reader) -> dict[str, Any]:
    """One ``StateMapSerDe`` record (same layout in 1.x and 2.x)."""
    component_id = reader.utf("component id")
    update_type = reader.utf("update type")
    if update_type not in UPDATE_TYPES:
        raise _Damaged(f"unknown update type {update_type[:40]!r} at byte {reader.pos}")
    record: dict[str, Any] = {"component_id": component_id, "update_type": update_type, "entries": []}
    if update_type == "DELETE":
        return record
    record["state_version"] = reader.i64("state version")
    count = reader.i32("entry count")
    if count < 0 or count > reader.left():
        raise _Damaged(f"entry count {count} does not fit the {reader.left()} bytes left")
    for _ in range(count):
        key = reader.utf("key") if reader.boolean("has-key flag") else None
        value = reader.utf("value") if reader.boolean("has-value flag") else None
        record["entries"].append((key, value))
    return record


@dataclass
class _Decoded:
    """What one local-state file holds: header facts, records (with transaction ids) and damage."""

    wal_class: str | None = None
    serde: str | None = None
    max_transaction_id: int | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    transactions: int = 0
    complete: bool | None = None
    problem: str | None = None


def _header(reader: _Reader, out: _Decoded) -> None:
    out.wal_class = reader.utf("header class name")
    if out.wal_class not in capture.WAL_CLASSES:
        raise _Damaged("not a NiFi write-ahead-log file (unknown header)")
    reader.i32("log version")
    out.serde = reader.utf("serde class name")
    reader.i32("serde version")


def decode_state_snapshot(data: bytes) -> _Decoded:
    """``HashMapSnapshot`` (2.x ``checkpoint``) or ``MinimalLockingWriteAheadLog`` (1.x ``snapshot``)."""
    out = _Decoded()
    reader = _Reader(data)
    try:
        if not data:
            raise _Damaged("empty file (0 bytes): NiFi skips it in recovery")
        _header(reader, out)
        out.max_transaction_id = reader.i64("max transaction id")
        count = reader.i32("record count")
        if count < 0:
            raise _Damaged(f"negative record count {count}")
        for number in range(count):
            record = _state_record(reader)
            record["transaction_id"] = None
            out.records.append(record)
        swaps = reader.i32("swap location count")
        for _ in range(max(swaps, 0)):
            reader.utf("swap location")
        if reader.left():
            out.problem = f"{reader.left()} unexpected byte(s) after the snapshot"
    except _Damaged as exc:
        out.problem = f"{exc} (after {len(out.records)} record(s))"
    return out


def decode_state_journal(data: bytes) -> _Decoded:
    """A local-state journal: 2.x ``LengthDelimitedJournal`` or a 1.x ``MinimalLockingWriteAheadLog`` partition."""
    out = _Decoded()
    reader = _Reader(data)
    try:
        if not data:
            raise _Damaged("empty file (0 bytes)")
        _header(reader, out)
        if out.wal_class == WAL_LENGTH_DELIMITED_JOURNAL:
            reader.take(reader.i32("serde header length"), "serde header")
            _length_delimited_transactions(reader, out)
        elif out.wal_class == WAL_MINIMAL_LOCKING:
            _minimal_locking_transactions(reader, out)
        else:
            raise _Damaged("a snapshot header in a journal file")
    except _Damaged as exc:
        out.problem = f"{exc} (after {out.transactions} whole transaction(s))"
    return out


def _length_delimited_transactions(reader: _Reader, out: _Decoded) -> None:
    out.complete = False
    while reader.left():
        marker = reader.u8("transaction marker")
        if marker == JOURNAL_COMPLETE:
            out.complete = True
            if reader.left():
                out.problem = f"{reader.left()} byte(s) after the closing marker"
            return
        if marker == 0 and reader.data[reader.pos:reader.end].count(0) == reader.left():
            out.problem = "trailing NUL bytes (power loss while writing): the rest is skipped, as NiFi does"
            return
        if marker != TRANSACTION_FOLLOWS:
            raise _Damaged(f"unexpected transaction marker {marker} at byte {reader.pos - 1}")
        transaction_id = reader.i64("transaction id")
        length = reader.i32("transaction length")
        body = _Reader(reader.data, reader.pos, reader.pos + length) if 0 <= length <= reader.left() else None
        if body is None:
            raise _Damaged(f"truncated: transaction {transaction_id} declares {length} bytes, {reader.left()} left")
        pending = []
        while body.left():
            record = _state_record(body)
            record["transaction_id"] = transaction_id
            pending.append(record)
        reader.pos = body.end
        out.records.extend(pending)  # a transaction counts only once it is whole, as in NiFi's recovery
        out.transactions += 1


def _minimal_locking_transactions(reader: _Reader, out: _Decoded) -> None:
    while reader.left():
        if reader.data[reader.pos:reader.end].count(0) == reader.left():
            out.problem = "trailing NUL bytes (power loss while writing): the rest is skipped, as NiFi does"
            return
        transaction_id = reader.i64("transaction id")
        pending = []
        while True:
            record = _state_record(reader)
            record["transaction_id"] = transaction_id
            pending.append(record)
            marker = reader.u8("transaction continue/commit marker")
            if marker == _TRANSACTION_COMMIT:
                break
            if marker != _TRANSACTION_CONTINUE:
                raise _Damaged(f"unexpected transaction marker {marker} at byte {reader.pos - 1}")
        out.records.extend(pending)
        out.transactions += 1


# --------------------------------------------------------------------------- rows


def _repository(rel: str, outline: dict[str, Any] | None, root_name: str) -> str | None:
    serde = (outline or {}).get("serde") or ""
    if serde == STATE_MAP_SERDE:
        return "local_state"
    if _FLOWFILE_SERDE_MARK in serde:
        return "flowfile"
    parts = [root_name, *PurePosixPath(rel).parts] if rel else [root_name]
    if "flowfile_repository" in parts or any(p.startswith("flowfile_repository") for p in parts):
        return "flowfile"
    for before, after in zip(parts, parts[1:]):
        if before == "state" and after == "local":
            return "local_state"
    if root_name == "local" and rel == "":
        return "local_state"
    return None


def _file_kind(entry: Entry) -> str:
    name = entry.name
    if entry.type == "d":
        return "dir"
    if name in ("checkpoint", "snapshot"):
        return "snapshot"
    if name.endswith(".partial"):
        return "snapshot_partial"
    if name.endswith(".journal"):
        return "journal"
    if name.endswith(".swap"):
        return "swap"
    if any(p.startswith("overflow-") for p in PurePosixPath(entry.rel).parts[:-1]):
        return "overflow"
    return "other"


def _wal_dir(rel: str) -> str:
    """The folder the write-ahead log lives in (parent of ``journals/`` or ``partition-<n>/``)."""
    parent = PurePosixPath(rel).parent
    if parent.name == "journals" or parent.name.startswith("partition-"):
        parent = parent.parent
    return str(parent)


def _version_hint(outline: dict[str, Any] | None, repository: str | None) -> str | None:
    wal_class = (outline or {}).get("wal_class")
    if wal_class == WAL_MINIMAL_LOCKING:
        return "1.x"
    if wal_class in (WAL_HASHMAP_SNAPSHOT, WAL_LENGTH_DELIMITED_JOURNAL):
        return "2.x" if repository == "local_state" else "1.x-2.x"
    return None


def _journal_order(rel: str) -> tuple[int, str]:
    stem = rel.rsplit("/", 1)[-1][: -len(".journal")]
    return (int(stem) if stem.isdigit() else -1, rel)


def read_tree(snap: Snapshot, host: str | None, source: str) -> tuple[list[dict], list[dict], list[tuple[str, str]]]:
    """Rows of ``nifi_repository_files`` and ``nifi_local_state`` for one NiFi folder or capture, plus problems."""
    files: list[dict[str, Any]] = []
    problems: list[tuple[str, str]] = [(f"{source}:{rel}" if rel else source, reason) for rel, reason in snap.problems]
    decoded: dict[str, _Decoded] = {}
    by_rel: dict[str, dict[str, Any]] = {}
    # A damaged file (empty, cut inside its header) names no serde: it belongs to the repository of its folder.
    folder_repository: dict[str, str] = {}
    for rel, outline in snap.wal_outlines.items():
        known = _repository(rel, outline, snap.root_name) if outline.get("serde") else None
        if known:
            folder_repository.setdefault(_wal_dir(rel), known)
    for entry in snap.entries:
        outline = snap.wal_outlines.get(entry.rel)
        repository = (_repository(entry.rel, outline, snap.root_name) if (outline or {}).get("serde") else None)
        repository = (repository or folder_repository.get(_wal_dir(entry.rel))
                      or folder_repository.get(entry.rel or ".") or _repository(entry.rel, outline, snap.root_name))
        if repository is None:
            continue
        outline = outline or {}
        row: dict[str, Any] = {
            "host": host, "source": source, "root": snap.root_name, "repository": repository,
            "path": entry.rel or ".", "is_dir": entry.type == "d", "kind": _file_kind(entry), "size": entry.size,
            "mtime": entry.mtime, "capture_time": snap.capture_time,
            "wal_class": outline.get("wal_class"), "wal_version": outline.get("wal_version"),
            "serde": outline.get("serde"), "serde_version": outline.get("serde_version"),
            "max_transaction_id": outline.get("max_transaction_id"), "records": outline.get("records"),
            "transactions": outline.get("transactions"), "first_transaction_id": outline.get("first_transaction_id"),
            "last_transaction_id": outline.get("last_transaction_id"),
            "transaction_bytes": outline.get("transaction_bytes"), "complete": outline.get("complete"),
            "trailing_nul_bytes": outline.get("trailing_nul_bytes"),
            "version_hint": _version_hint(outline, repository), "problem": outline.get("problem"), "note": None,
        }
        if entry.rel in snap.copy_errors:
            row["note"] = f"content not captured: {snap.copy_errors[entry.rel]}"
        if repository == "local_state" and outline.get("serde") == STATE_MAP_SERDE:
            data = snap.read(entry.rel)
            if data is None:
                row["note"] = row["note"] or "content not captured (larger than the copy limit)"
            else:
                result = (decode_state_journal(data) if row["kind"] == "journal" else decode_state_snapshot(data))
                decoded[entry.rel] = result
                row["problem"] = row["problem"] or result.problem
                if row["kind"] == "journal" and row["transactions"] is None:
                    row["transactions"] = result.transactions  # 1.x partitions: only the decoder can count
                    ids = [r["transaction_id"] for r in result.records]
                    row["first_transaction_id"] = min(ids) if ids else None
                    row["last_transaction_id"] = max(ids) if ids else None
        by_rel[entry.rel] = row
        files.append(row)
    _note_mixed_versions(files)
    _note_partial_next_to_snapshot(files)
    problems.extend((f"{source}:{row['path']}", f"NiFi {row['repository']} file: {row['problem']}")
                    for row in files if row["problem"])
    states = _local_state_rows(decoded, by_rel, host, source, snap)
    return files, states, problems


def _note_mixed_versions(files: list[dict[str, Any]]) -> None:
    """A 1.x log left in a folder a 2.x NiFi uses: 2.x never reads it (no migration in the source)."""
    hints: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in files:
        if row["repository"] == "local_state" and row["version_hint"] and row["kind"] in ("snapshot", "journal"):
            hints[(row["source"], _wal_dir(row["path"]))].add(row["version_hint"])
    for row in files:
        key = (row["source"], _wal_dir(row["path"]))
        if row["version_hint"] == "1.x" and hints.get(key, set()) >= {"1.x", "2.x"}:
            row["note"] = ("1.x local state next to a 2.x write-ahead log: NiFi 2.x does not read the 1.x "
                           "files, so this state was not carried over")


def _note_partial_next_to_snapshot(files: list[dict[str, Any]]) -> None:
    """A ``checkpoint.partial`` (1.x local state: ``snapshot.partial``) next to its snapshot is never damage.

    The snapshot writer fills the partial file through a buffered stream, fsyncs it, and only then deletes the
    snapshot and renames the partial into place; recovery deletes a partial file whenever the snapshot exists
    (``HashMapSnapshot#recover``, ``MinimalLockingWriteAheadLog#recover``). A copy of a running node often holds
    one, empty or cut, because a checkpoint was being written when it was taken.
    """
    snapshots = {(row["source"], _wal_dir(row["path"])) for row in files if row["kind"] == "snapshot"}
    for row in files:
        if row["kind"] == "snapshot_partial" and (row["source"], _wal_dir(row["path"])) in snapshots:
            if row["problem"]:
                row["note"] = (f"{row['problem']}: a checkpoint was being written when this was copied; NiFi "
                               "deletes the partial file at recovery because the snapshot exists")
            row["problem"] = None


def _local_state_rows(decoded: dict[str, _Decoded], by_rel: dict[str, dict[str, Any]], host: str | None,
                      source: str, snap: Snapshot) -> list[dict[str, Any]]:
    """One row per state entry of every record, in replay order, with the record that is current marked."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for rel in decoded:
        groups[(_wal_dir(rel), by_rel[rel]["version_hint"] or "")].append(rel)
    rows: list[dict[str, Any]] = []
    for (_folder, hint), rels in sorted(groups.items()):
        snapshots = [r for r in rels if by_rel[r]["kind"] == "snapshot"]
        partials = [r for r in rels if by_rel[r]["kind"] == "snapshot_partial"]
        # NiFi's recovery: a snapshot wins over a partial one (a crash while checkpointing); a lone partial
        # is renamed and used.
        base = snapshots[0] if snapshots else (partials[0] if partials else None)
        base_max = decoded[base].max_transaction_id if base and decoded[base].max_transaction_id is not None else -1
        ordered: list[tuple[str, dict[str, Any], str, bool]] = []
        for rel in partials + snapshots:
            for record in decoded[rel].records:
                ordered.append((rel, record, "snapshot", rel == base))
        journal_records = []
        for rel in sorted((r for r in rels if by_rel[r]["kind"] == "journal"), key=_journal_order):
            for record in decoded[rel].records:
                journal_records.append((rel, record))
        journal_records.sort(key=lambda item: item[1]["transaction_id"])  # 1.x partitions interleave
        for rel, record in journal_records:
            ordered.append((rel, record, "journal", record["transaction_id"] > base_max))
        current: dict[str, int] = {}
        for index, (_rel, record, _origin, applies) in enumerate(ordered):
            if applies:
                current[record["component_id"]] = index
        for index, (rel, record, origin, applies) in enumerate(ordered):
            base_row = {
                "host": host, "source": source, "path": by_rel[rel]["path"], "component_id": record["component_id"],
                "update_type": record["update_type"], "state_version": record.get("state_version"),
                "entry_count": len(record["entries"]) if record["update_type"] != "DELETE" else None,
                "transaction_id": record["transaction_id"], "record_no": index, "origin": origin,
                "applied": applies, "current": current.get(record["component_id"]) == index,
                "cleared": record["update_type"] != "DELETE" and not record["entries"],
                "file_mtime": by_rel[rel]["mtime"], "capture_time": snap.capture_time, "version_hint": hint or None,
            }
            if record["entries"]:
                for key, value in sorted(record["entries"], key=lambda kv: (kv[0] is None, kv[0] or "")):
                    rows.append({**base_row, "key": key, "value": value})
            else:
                rows.append({**base_row, "key": None, "value": None})
    return rows


def is_nifi_wal_file(path: Path) -> bool:
    """A loose NiFi write-ahead-log file (found outside any folder): its header names a WAL class."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64)
    except OSError:
        return False
    if len(head) < 2:
        return False
    length = struct.unpack(">H", head[:2])[0]
    return head[2:2 + length].decode("latin-1") in capture.WAL_CLASSES


def lone_file_snapshot(path: Path) -> Snapshot:
    """A single WAL file as a one-entry tree (its folder's name tells the repository when the header does not)."""
    st = os.stat(path)
    name = path.name
    rel = name
    parent = path.parent
    if parent.name == "journals" or parent.name.startswith("partition-"):
        rel = f"{parent.name}/{name}"
        parent = parent.parent
    outline = capture.nifi_outline_or_none(path, name) or {}
    entry = Entry(rel=rel, type="f", size=st.st_size, mtime_ns=st.st_mtime_ns, mode=None)
    read: Callable[[str], bytes | None] = lambda r: (
        path.read_bytes() if r == rel and capture.nifi_copies_content(outline, st.st_size, capture.DEFAULT_MAX_FILE_BYTES)
        else None)
    return Snapshot(root_name=parent.name, parent_name=parent.parent.name or None, entries=[entry], read=read,
                    product="nifi", wal_outlines={rel: outline})


__all__ = [
    "from_directory",
    "read_tree",
    "decode_state_snapshot",
    "decode_state_journal",
    "is_nifi_wal_file",
    "lone_file_snapshot",
]
