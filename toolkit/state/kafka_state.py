"""Kafka Streams state directory facts: a :class:`~toolkit.state.snapshot.Snapshot` -> ``state_files`` and
``checkpoints`` rows (plain dicts; ``toolkit.state`` turns them into DataFrames).

Layout understood (1.1-4.3)::

    <state.dir>/<app>/.lock                       2.8+ app lock        kafka-streams-process-metadata   2.8+
    <state.dir>/<app>/global/{.lock,.checkpoint,rocksdb/<store>/}
    <state.dir>/<app>/[__<topology>__/]<sub>_<partition>/
        .lock (<=2.8)  .checkpoint  .checkpoint.tmp  .checkpoint_<store> (4.3)  <store>.position (3.2-4.2)
        rocksdb/<store>/...                      one RocksDB per key-value store
        <store>/<store>.<segmentStart>/...       window/session store segments

No RocksDB data is parsed: store folders get counts, bytes and the newest mtime. A store whose RocksDB
OPTIONS file declares an ``offsets`` column family manages its own changelog offsets (KIP-1035, 4.3);
its offsets cannot be known from files, which the tables say explicitly.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from toolkit.state.capture import PROCESS_METADATA_FILE
from toolkit.state.offset_checkpoint import parse_offset_checkpoint
from toolkit.state.snapshot import Entry, Snapshot
from toolkit.state.timeutil import from_ns

TASK_DIR = re.compile(r"^\d+_\d+$")
NAMED_TOPOLOGY_DIR = re.compile(r"^__.+__$")
GLOBAL_DIR = "global"
_OFFSETS_COLUMN_FAMILY = re.compile(r'^\s*\[CFOptions\s+"offsets"\]', re.MULTILINE)
_OPTIONS_FILE = re.compile(r"^OPTIONS-(\d+)$")
KIP_1035_NOTE = "changelog offsets are kept inside RocksDB (column family 'offsets', KIP-1035, 4.3): unknown from files"

#: Values of ``state_files.kind``.
KINDS = (
    "state_dir",  # the state.dir root itself
    "app_dir",
    "topology_dir",  # __<name>__ (named topologies, 3.0+)
    "task_dir",  # includes global/ (task_id 'global')
    "app_lock",
    "task_lock",  # <task>/.lock and global/.lock (1.1-2.8)
    "process_metadata",
    "checkpoint",
    "checkpoint_tmp",
    "store_checkpoint",  # .checkpoint_<store> (4.3)
    "position",
    "rocksdb_dir",  # <task>/rocksdb
    "rocksdb_store",  # <task>/rocksdb/<store>
    "segmented_store",  # <task>/<store> holding segments
    "segment",  # <task>/<store>/<store>.<start>
    "sst",
    "rocksdb_file",  # other RocksDB files (CURRENT, OPTIONS-*, MANIFEST-*, LOG, *.log, LOCK ...)
    "other",
)


@dataclass
class KafkaStateRows:
    state_files: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)


def classify_root(snapshot: Snapshot) -> str:
    """``state_dir``, ``app`` or ``task``: what the captured folder is, judged by its content."""
    children = {e.name: e.type for e in snapshot.entries if e.rel and "/" not in e.rel}
    dirs = {name for name, kind in children.items() if kind == "d"}
    files = {name for name, kind in children.items() if kind != "d"}
    if any(TASK_DIR.match(d) or NAMED_TOPOLOGY_DIR.match(d) for d in dirs) or PROCESS_METADATA_FILE in files:
        return "app"
    if GLOBAL_DIR in dirs and any(e.rel.startswith(GLOBAL_DIR + "/") and _is_task_content(e.name) for e in snapshot.entries):
        return "app"
    if "rocksdb" in dirs or any(_is_task_content(f) for f in files):
        return "task"
    if TASK_DIR.match(snapshot.root_name or ""):
        return "task"
    if ".lock" in files and not dirs:
        return "app"  # an app folder of a stateless-but-locked instance (2.8+)
    return "state_dir"


def _is_task_content(name: str) -> bool:
    return name.startswith(".checkpoint") or name.endswith(".position") or name == "rocksdb"


@dataclass
class _Located:
    """Where an entry sits in the state.dir layout."""

    path: str
    app_id: str | None
    topology: str | None = None
    task_id: str | None = None
    store: str | None = None
    kind: str = "other"
    group: str | None = None  # path of the store/segment/task folder whose totals this file counts toward


def _locate(entry: Entry, root_kind: str, snapshot: Snapshot) -> _Located:
    if root_kind == "state_dir":
        prefix: list[str] = []
    elif root_kind == "app":
        prefix = [snapshot.root_name or "app"]
    else:
        prefix = [p for p in (snapshot.parent_name, snapshot.root_name or "task") if p]
    parts = prefix + (entry.rel.split("/") if entry.rel else [])
    path = "/".join(parts) if parts else "."
    is_dir = entry.type == "d"
    if root_kind == "task" and not snapshot.parent_name:
        # Without the app folder's name, the task folder is the top of the path.
        return _locate_in_task(parts, 1, _Located(path=path, app_id=None, task_id=parts[0]), is_dir)
    if not parts:
        return _Located(path=path, app_id=None, kind="state_dir")
    app_id = parts[0]
    if len(parts) == 1:
        return _Located(path=path, app_id=None if not is_dir else app_id, kind="app_dir" if is_dir else "other")
    located = _Located(path=path, app_id=app_id)
    second = parts[1]
    if len(parts) == 2 and not is_dir:
        located.kind = {".lock": "app_lock", PROCESS_METADATA_FILE: "process_metadata"}.get(second, "other")
        return located
    if second == GLOBAL_DIR:
        located.task_id = GLOBAL_DIR
        return _locate_in_task(parts, 2, located, is_dir)
    if NAMED_TOPOLOGY_DIR.match(second):
        located.topology = second[2:-2]
        if len(parts) == 2:
            located.kind = "topology_dir"
            return located
        if TASK_DIR.match(parts[2]):
            located.task_id = parts[2]
            return _locate_in_task(parts, 3, located, is_dir)
        return located
    if TASK_DIR.match(second):
        located.task_id = second
        return _locate_in_task(parts, 2, located, is_dir)
    return located


def _locate_in_task(parts: list[str], start: int, located: _Located, is_dir: bool) -> _Located:
    rest = parts[start:]
    task_path = "/".join(parts[:start])
    located.group = task_path
    if not rest:
        located.kind = "task_dir"
        located.group = None
        return located
    name = rest[0]
    if len(rest) == 1 and not is_dir:
        if name == ".lock":
            located.kind = "task_lock"
        elif name == ".checkpoint":
            located.kind = "checkpoint"
        elif name == ".checkpoint.tmp":
            located.kind = "checkpoint_tmp"
        elif name.startswith(".checkpoint_"):
            located.kind, located.store = "store_checkpoint", name[len(".checkpoint_") :]
        elif name.endswith(".position"):
            located.kind, located.store = "position", name[: -len(".position")]
        return located
    if name == "rocksdb":
        if len(rest) == 1:
            located.kind = "rocksdb_dir"
            return located
        located.store = rest[1]
        if len(rest) == 2:
            located.kind = "rocksdb_store" if is_dir else "other"
            return located
        located.group = f"{task_path}/rocksdb/{rest[1]}"
        located.kind = _rocksdb_file_kind(rest[-1], is_dir)
        return located
    located.store = name
    if len(rest) == 1:
        located.kind = "segmented_store"
        return located
    if len(rest) == 2:
        located.kind = "segment" if is_dir else "other"
        located.group = f"{task_path}/{name}"
        return located
    located.group = f"{task_path}/{name}/{rest[1]}"
    located.kind = _rocksdb_file_kind(rest[-1], is_dir)
    return located


def _rocksdb_file_kind(name: str, is_dir: bool) -> str:
    if is_dir:
        return "other"
    return "sst" if name.endswith(".sst") else "rocksdb_file"


# ---------------------------------------------------------------------------------------------------------------
# Version hints: what the layout says about the Kafka Streams version (offset meaning depends on it).

_V26, _V28, _V32, _V43 = (2, 6), (2, 8), (3, 2), (4, 3)


@dataclass
class _VersionRange:
    low: tuple[int, int] | None = None
    high: tuple[int, int] | None = None

    def at_least(self, version: tuple[int, int]) -> None:
        self.low = version if self.low is None else max(self.low, version)

    def at_most(self, version: tuple[int, int]) -> None:
        self.high = version if self.high is None else min(self.high, version)

    def text(self) -> str | None:
        def fmt(v: tuple[int, int]) -> str:
            return f"{v[0]}.{v[1]}"

        if self.low and self.high:
            if self.low > self.high:
                return f"inconsistent ({fmt(self.low)}+ and <={fmt(self.high)} markers)"
            return fmt(self.low) if self.low == self.high else f"{fmt(self.low)}-{fmt(self.high)}"
        if self.low:
            return f"{fmt(self.low)}+"
        if self.high:
            return f"<={fmt(self.high)}"
        return None

    def offsets_are_last_applied(self) -> bool | None:
        """2.6 changed task checkpoints from "next offset to restore" to "last applied offset"."""
        if self.low and self.low >= _V26:
            return True
        if self.high and self.high < _V26:
            return False
        return None


def _offset_meaning(file_kind: str, versions: _VersionRange) -> str:
    if file_kind == "global_checkpoint":
        return "next_offset"
    if file_kind == "position":
        return "input_position"
    if file_kind == "store_checkpoint":
        return "last_applied"
    last_applied = versions.offsets_are_last_applied()
    if last_applied is None:
        return "next_offset_or_last_applied"
    return "last_applied" if last_applied else "next_offset"


def _changelog_store(app_id: str | None, topic: str) -> str | None:
    prefix, suffix = f"{app_id}-", "-changelog"
    if app_id and topic.startswith(prefix) and topic.endswith(suffix) and len(topic) > len(prefix) + len(suffix):
        return topic[len(prefix) : -len(suffix)]
    return None


# ---------------------------------------------------------------------------------------------------------------


@dataclass
class _SnapshotOrigin:
    """What every row of one snapshot shares: where it came from and when it was taken."""

    host: str | None
    source: str
    capture_time: datetime | None

    def problem_source(self, path: str) -> str:
        """The source a problem about ``path`` (relative to the snapshot) is reported under."""
        return f"{self.source}/{path}" if path and path != "." else self.source


def read_snapshot(snapshot: Snapshot, host: str | None, source: str) -> KafkaStateRows:
    """Turn one snapshot into ``state_files`` and ``checkpoints`` rows plus problems (never raises)."""
    out = KafkaStateRows()
    root_kind = classify_root(snapshot)
    origin = _SnapshotOrigin(host or snapshot.captured_host, source, snapshot.capture_time)
    located = [(entry, _locate(entry, root_kind, snapshot)) for entry in snapshot.entries]
    out.problems.extend((origin.problem_source(rel), reason) for rel, reason in snapshot.problems)

    totals = _folder_totals(located, root_kind)
    offsets_in_store = _offsets_in_store(located, snapshot)
    versions = _layout_version_hints(located, offsets_in_store, root_kind, snapshot)
    checkpoint_files = _add_state_file_rows(out, located, snapshot, origin, totals, offsets_in_store)
    parsed = _parse_checkpoint_files(checkpoint_files, snapshot, versions)
    for row in out.state_files:
        row["version_hint"] = versions[row["app_id"]].text() if row["app_id"] in versions else None
    _add_checkpoint_rows(out, parsed, snapshot, origin, versions)
    _add_in_store_offset_rows(out, origin)
    if not any(r["kind"] in ("app_dir", "task_dir") for r in out.state_files):
        out.problems.append((source, "no Kafka Streams application or task folder found in this state directory"))
    return out


#: Per folder: [files, sst files, bytes, newest mtime in ns] of every file below it.
_FolderTotals = dict[str, list[Any]]


def _folder_totals(located: list[tuple[Entry, _Located]], root_kind: str) -> _FolderTotals:
    """Folder totals: each file counts toward its own group and every enclosing folder's group."""
    totals: _FolderTotals = defaultdict(lambda: [0, 0, 0, None])  # files, ssts, bytes, newest_ns

    def count(bucket: list[Any], entry: Entry) -> None:
        bucket[0] += 1
        bucket[1] += entry.name.endswith(".sst")
        bucket[2] += entry.size
        if entry.mtime_ns is not None and (bucket[3] is None or entry.mtime_ns > bucket[3]):
            bucket[3] = entry.mtime_ns

    for entry, where in located:
        if entry.type != "f":
            continue
        parts = where.path.split("/")
        for depth in range(1, len(parts)):
            count(totals["/".join(parts[:depth])], entry)
        if root_kind == "state_dir" and len(parts) >= 1:
            count(totals["."], entry)
    return totals


def _offsets_in_store(located: list[tuple[Entry, _Located]], snapshot: Snapshot) -> dict[str, bool]:
    """Per store group: whether its newest RocksDB OPTIONS file has an 'offsets' column family (KIP-1035)."""
    newest_options: dict[str, tuple[int, Entry]] = {}
    for entry, where in located:
        match = _OPTIONS_FILE.match(entry.name)
        if match and where.group and entry.type == "f":
            number = int(match.group(1))
            if where.group not in newest_options or number > newest_options[where.group][0]:
                newest_options[where.group] = (number, entry)
    offsets_in_store: dict[str, bool] = {}
    for group, (_, entry) in newest_options.items():
        data = snapshot.read(entry.rel)
        if data is not None:
            offsets_in_store[group] = bool(_OFFSETS_COLUMN_FAMILY.search(data.decode("utf-8", errors="replace")))
    return offsets_in_store


def _layout_version_hints(located: list[tuple[Entry, _Located]], offsets_in_store: dict[str, bool], root_kind: str,
                          snapshot: Snapshot) -> dict[str | None, _VersionRange]:
    """Per app: the Kafka Streams versions its layout markers (locks, metadata, position files...) allow."""
    versions: dict[str | None, _VersionRange] = defaultdict(_VersionRange)
    for entry, where in located:
        hint = versions[where.app_id]
        if where.kind in ("app_lock", "process_metadata"):
            hint.at_least(_V28)
        elif where.kind == "task_lock":
            hint.at_most(_V28)
        elif where.kind == "position":
            hint.at_least(_V32)
        elif where.kind == "store_checkpoint":
            hint.at_least(_V43)
    for group, has_offsets in offsets_in_store.items():
        if has_offsets:
            versions[group.split("/", 1)[0] if root_kind != "task" or snapshot.parent_name else None].at_least(_V43)
    return versions


#: Folder kinds whose ``state_files`` row carries the totals of the files below it.
_TOTALLED_KINDS = ("state_dir", "app_dir", "topology_dir", "task_dir", "rocksdb_dir", "rocksdb_store",
                   "segmented_store", "segment")


def _add_state_file_rows(out: KafkaStateRows, located: list[tuple[Entry, _Located]], snapshot: Snapshot,
                         origin: _SnapshotOrigin, totals: _FolderTotals, offsets_in_store: dict[str, bool],
                         ) -> list[tuple[Entry, _Located, str]]:
    """One ``state_files`` row per entry; returns the checkpoint-format files to parse, with their file kind."""
    checkpoint_files: list[tuple[Entry, _Located, str]] = []
    for entry, where in located:
        is_dir = entry.type == "d"
        row: dict[str, Any] = {
            "host": origin.host,
            "source": origin.source,
            "app_id": where.app_id,
            "topology": where.topology,
            "task_id": where.task_id,
            "store": where.store,
            "kind": where.kind,
            "path": where.path,
            "is_dir": is_dir,
            "size": entry.size,
            "mode": entry.mode,
            "mtime": entry.mtime,
            "capture_time": origin.capture_time,
        }
        if is_dir and where.kind in _TOTALLED_KINDS:
            files, ssts, size, newest = totals.get(where.path, [0, 0, 0, None])
            row.update(file_count=files, sst_count=ssts, bytes=size, newest_mtime=from_ns(newest))
        if where.kind in ("rocksdb_store", "segment"):
            row["offsets_in_store"] = offsets_in_store.get(where.path)
            if row["offsets_in_store"]:
                row["note"] = KIP_1035_NOTE
        if where.kind == "process_metadata":
            row["process_id"] = _process_id(snapshot, entry, out, origin.problem_source(where.path))
        if entry.rel in snapshot.copy_errors:
            row["note"] = f"content not captured: {snapshot.copy_errors[entry.rel]}"
        out.state_files.append(row)
        if where.kind in ("checkpoint", "checkpoint_tmp", "store_checkpoint", "position") and entry.type == "f":
            file_kind = "global_checkpoint" if where.kind == "checkpoint" and where.task_id == GLOBAL_DIR else where.kind
            checkpoint_files.append((entry, where, file_kind))
    return checkpoint_files


def _parse_checkpoint_files(checkpoint_files: list[tuple[Entry, _Located, str]], snapshot: Snapshot,
                            versions: dict[str | None, _VersionRange]) -> list[tuple[Entry, _Located, str, Any]]:
    """Parse each checkpoint-format file (None when its content was not captured).

    A -4 sentinel only exists from 2.6 on, which settles the offset meaning of the whole app.
    """
    parsed = []
    for entry, where, file_kind in checkpoint_files:
        data = snapshot.read(entry.rel)
        result = parse_offset_checkpoint(data) if data is not None else None
        if result is not None and any(e.offset == -4 for e in result.entries):
            versions[where.app_id].at_least(_V26)
        parsed.append((entry, where, file_kind, result))
    return parsed


def _add_checkpoint_rows(out: KafkaStateRows, parsed: list[tuple[Entry, _Located, str, Any]], snapshot: Snapshot,
                         origin: _SnapshotOrigin, versions: dict[str | None, _VersionRange]) -> None:
    """One ``checkpoints`` row per entry of each parsed file, or one row with the problem that kept it unread."""
    for entry, where, file_kind, result in parsed:
        base = {
            "host": origin.host,
            "source": origin.source,
            "app_id": where.app_id,
            "topology": where.topology,
            "task_id": where.task_id,
            "file": where.path,
            "file_kind": file_kind,
            "file_mtime": entry.mtime,
            "capture_time": origin.capture_time,
        }
        meaning = _offset_meaning(file_kind, versions[where.app_id])
        if result is None:
            why = snapshot.copy_errors.get(entry.rel) or "content not captured (listing only or file too large)"
            reason = f"checkpoint content unavailable: {why}"
            out.checkpoints.append({**base, "store": where.store, "problem": reason})
            out.problems.append((origin.problem_source(where.path), reason))
            continue
        if result.problem:
            out.checkpoints.append({**base, "store": where.store, "problem": result.problem})
            out.problems.append((origin.problem_source(where.path), f"unreadable checkpoint: {result.problem}"))
            continue
        for item in result.entries:
            store = where.store if file_kind in ("store_checkpoint", "position") else _changelog_store(where.app_id, item.topic)
            out.checkpoints.append(
                {
                    **base,
                    "store": store,
                    "topic": item.topic,
                    "partition": item.partition,
                    "offset": item.offset,
                    "sentinel": item.sentinel,
                    "offset_meaning": meaning,
                    "problem": item.problem,
                }
            )
            if item.problem:
                out.problems.append((origin.problem_source(where.path), item.problem))


def _add_in_store_offset_rows(out: KafkaStateRows, origin: _SnapshotOrigin) -> None:
    """Stores that keep their offsets inside RocksDB: say so instead of leaving the checkpoint silently absent."""
    for row in out.state_files:
        if row.get("offsets_in_store") and row["kind"] == "rocksdb_store":
            out.checkpoints.append(
                {
                    "host": origin.host,
                    "source": origin.source,
                    "app_id": row["app_id"],
                    "topology": row["topology"],
                    "task_id": row["task_id"],
                    "store": row["store"],
                    "file": row["path"],
                    "file_kind": "store_offsets",
                    "offset_meaning": "in_store",
                    "file_mtime": row["newest_mtime"],
                    "capture_time": origin.capture_time,
                    "problem": None,
                }
            )


def _process_id(snapshot: Snapshot, entry: Entry, out: KafkaStateRows, where: str) -> str | None:
    data = snapshot.read(entry.rel)
    if data is None:
        return None
    try:
        value = json.loads(data.decode("utf-8"))
        process_id = value.get("processId") if isinstance(value, dict) else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        process_id = None
    if not isinstance(process_id, str):
        out.problems.append((where, 'kafka-streams-process-metadata is not JSON {"processId": "<uuid>"} '
                                    "(Kafka: Failed to read json process file)"))
        return None
    return process_id


def lone_checkpoint_rows(
    data: bytes | None, name: str, task_dir_name: str | None, app_dir_name: str | None, mtime: datetime | None,
    host: str | None, source: str,
) -> KafkaStateRows:
    """Rows for a single checkpoint-format file found outside any recognisable state folder."""
    out = KafkaStateRows()
    task_id = task_dir_name if task_dir_name and (TASK_DIR.match(task_dir_name) or task_dir_name == GLOBAL_DIR) else None
    app_id = app_dir_name if task_id else None
    if name == ".checkpoint":
        file_kind = "global_checkpoint" if task_id == GLOBAL_DIR else "checkpoint"
        store = None
    elif name == ".checkpoint.tmp":
        file_kind, store = "checkpoint_tmp", None
    elif name.startswith(".checkpoint_"):
        file_kind, store = "store_checkpoint", name[len(".checkpoint_") :]
    elif name.endswith(".position"):
        file_kind, store = "position", name[: -len(".position")]
    else:
        file_kind, store = "checkpoint", None
    base = {"host": host, "source": source, "app_id": app_id, "task_id": task_id, "file": source,
            "file_kind": file_kind, "file_mtime": mtime, "capture_time": None}
    result = parse_offset_checkpoint(data) if data is not None else None
    if result is None or result.problem:
        reason = result.problem if result is not None else "cannot read file"
        out.checkpoints.append({**base, "store": store, "problem": reason})
        out.problems.append((source, f"unreadable checkpoint: {reason}"))
        return out
    versions = _VersionRange()
    if any(e.offset == -4 for e in result.entries):
        versions.at_least(_V26)
    for item in result.entries:
        out.checkpoints.append({**base, "store": store or _changelog_store(app_id, item.topic), "topic": item.topic,
                                "partition": item.partition, "offset": item.offset, "sentinel": item.sentinel,
                                "offset_meaning": _offset_meaning(file_kind, versions), "problem": item.problem})
        if item.problem:
            out.problems.append((source, item.problem))
    return out
