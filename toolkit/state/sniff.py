"""Cheap content sniffing for the bundle walker: is this folder a Kafka Streams state dir, what is this file?

Both functions read at most a few KB, never raise, and never extract anything.

Folder rules (:func:`detect_state_dir`):

* a *task* folder: name ``\\d+_\\d+`` (or ``global``) holding ``.checkpoint*``, ``*.position``, ``.lock`` or
  ``rocksdb/``, or holding store folders while its parent holds ``kafka-streams-process-metadata``;
* an *application* folder: holds ``kafka-streams-process-metadata``, a task folder, a ``__name__/`` named
  topology folder with task folders, or ``global/`` with checkpoint/RocksDB content;
* a *state.dir*: holds at least one application folder;
* never the ``files/`` folder of a capture (next to ``manifest.json`` or ``state-listing.txt``) or anything
  below it: the capture's listing is the authority there, its copied files are only a part of the tree.

File kinds (:func:`detect_evidence_file`): ``state_capture`` (capture archive, found by the manifest member's
name in the first tar headers; or an extracted ``manifest.json``), ``state_listing``, ``checkpoint_file``,
``dynamodb_table``, ``dynamodb_scan``, ``cloudtrail``, ``nifi_state``, ``nifi_wal_file`` (a loose NiFi
write-ahead-log file), else None. NiFi write-ahead-log folders count as state folders (:func:`detect_nifi_dir`).
"""

from __future__ import annotations

import os
import re
import zlib
from pathlib import Path

from toolkit.state import capture
from toolkit.state.snapshot import LISTING_FILE_NAME, LISTING_LINE, LISTING_MAGIC

HEAD_BYTES = 8192
_MAX_CHILDREN = 256
_TASK_DIR = re.compile(r"^\d+_\d+$")
_NAMED_TOPOLOGY = re.compile(r"^__.+__$")
_CHECKPOINT_START = re.compile(rb"^\s*-?\d+\s*\r?\n\s*-?\d+\s*(\r?\n|$)")
_JSON_KEY = '"{}"\\s*:'
_NIFI_SNAPSHOT_NAMES = ("checkpoint", "checkpoint.partial", "snapshot", "snapshot.partial")
_NIFI_PARTITION = re.compile(r"^partition-\d+$")
_NIFI_JOURNAL = re.compile(r"^\d+\.journal$")


def _children(path: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as it:
            found = []
            for entry in it:
                found.append(entry)
                if len(found) >= _MAX_CHILDREN:
                    break
            return found
    except OSError:
        return []


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _inside_capture_files(path: Path) -> bool:
    """True for the copied-files folder of a capture (or anything below it): its listing says more."""
    for folder in [path, *list(path.parents)[:6]]:
        if folder.name == capture.FILES_DIR_NAME:
            parent = folder.parent
            if (parent / LISTING_FILE_NAME).is_file() or (parent / capture.MANIFEST_FILE_NAME).is_file():
                return True
    return False


def _task_content(path: Path) -> bool:
    for child in _children(path):
        name = child.name
        if name.startswith(".checkpoint") or name.endswith(".position") or name == ".lock":
            return True
        if name == "rocksdb" and _is_dir(child):
            return True
    return False


def _looks_like_task(path: Path) -> bool:
    if not (_TASK_DIR.match(path.name) or path.name == "global"):
        return False
    if _task_content(path):
        return True
    # A task folder holding only window-store segments: trust it when the parent is clearly an app folder.
    return (path.parent / capture.PROCESS_METADATA_FILE).is_file() and any(_is_dir(c) for c in _children(path))


def _looks_like_app(path: Path) -> bool:
    children = _children(path)
    names = {c.name for c in children}
    if capture.PROCESS_METADATA_FILE in names:
        return True
    for child in children:
        if not _is_dir(child):
            continue
        child_path = Path(child.path)
        if _TASK_DIR.match(child.name) and _looks_like_task(child_path):
            return True
        if child.name == "global" and _task_content(child_path):
            return True
        if _NAMED_TOPOLOGY.match(child.name) and any(
            _is_dir(g) and _TASK_DIR.match(g.name) for g in _children(child_path)
        ):
            return True
    return False


def _wal_header(path: Path) -> bool:
    try:
        head = _head(path, 64)
    except OSError:
        return False
    if len(head) < 2:
        return False
    length = int.from_bytes(head[:2], "big")
    return head[2:2 + length].decode("latin-1") in capture.WAL_CLASSES


def _holds_journals(path: Path) -> bool:
    return any(_NIFI_JOURNAL.match(c.name) for c in _children(path))


def detect_nifi_dir(path: Path) -> bool:
    """True for a folder that holds a NiFi write-ahead log itself (``state/local``, ``flowfile_repository``).

    2.x layout: ``checkpoint`` and ``journals/<n>.journal``; 1.x local state: ``snapshot`` and
    ``partition-<n>/<n>.journal``. The NiFi home above them is not one (its logs are read as logs).
    """
    try:
        path = Path(path)
        if not path.is_dir() or path.is_symlink() or _inside_capture_files(path):
            return False
        for child in _children(path):
            if child.name in _NIFI_SNAPSHOT_NAMES and not _is_dir(child) and _wal_header(Path(child.path)):
                return True
            if (child.name == "journals" or _NIFI_PARTITION.match(child.name)) and _is_dir(child):
                if _holds_journals(Path(child.path)):
                    return True
        return False
    except (OSError, ValueError):
        return False


def detect_state_dir(path: Path) -> bool:
    """True when ``path`` is a Kafka Streams state.dir root, app or task folder, or a NiFi WAL folder."""
    try:
        path = Path(path)
        if not path.is_dir() or path.is_symlink() or _inside_capture_files(path):
            return False
        if _looks_like_task(path) or _looks_like_app(path) or detect_nifi_dir(path):
            return True
        return any(_is_dir(c) and _looks_like_app(Path(c.path)) for c in _children(path)[:64])
    except (OSError, ValueError):
        return False


def _head(path: Path, size: int = HEAD_BYTES) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(size)


def _gunzip_head(head: bytes, size: int = 4096) -> bytes:
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, size)
    except zlib.error:
        return b""


def _is_capture_tar(data: bytes) -> bool:
    # The manifest is the first member; a PAX header block may precede it, hence two blocks are searched.
    return data[257:262] == b"ustar" and capture.MANIFEST_MEMBER.encode() in data[:2048]


def _has_key(text: str, *keys: str) -> bool:
    return all(re.search(_JSON_KEY.format(re.escape(k)), text) for k in keys)


def detect_evidence_file(path: Path) -> str | None:
    """The evidence kind of one file (see the module docstring), or None. Reads at most 8 KB."""
    try:
        path = Path(path)
        if not path.is_file():
            return None
        head = _head(path)
    except (OSError, ValueError):
        return None
    name = path.name
    if name.startswith(".checkpoint"):
        # Any content, even empty or zeroed after a power loss, so a damaged file is reported, not ignored.
        return "checkpoint_file"
    if not head:
        return None
    if head[:2] == b"\x1f\x8b":
        return "state_capture" if _is_capture_tar(_gunzip_head(head)) else None
    if _is_capture_tar(head):
        return "state_capture"
    if capture.is_nifi_wal_name(name) and _wal_header(path):
        return "nifi_wal_file"
    if b"\0" in head:
        return None
    if name.endswith(".position") and _CHECKPOINT_START.match(head):
        return "checkpoint_file"
    text = head.decode("utf-8", errors="replace")
    if text.startswith(LISTING_MAGIC):
        return "state_listing"
    first = next((line for line in text.splitlines() if line.strip() and not line.startswith("#")), "")
    if name == LISTING_FILE_NAME and LISTING_LINE.match(first):
        return "state_listing"
    if "ResourceNotFoundException" in text and "DescribeTable" in text and '"eventName"' not in text:
        return "dynamodb_table"
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return None
    if _has_key(text, "format") and capture.FORMAT_NAME in text:
        return "state_capture"  # an extracted capture's manifest.json
    # CloudTrail first: its CreateTable/DescribeTable records embed table descriptions too.
    if _has_key(text, "CloudTrailEvent") or (_has_key(text, "eventName") and
                                             (_has_key(text, "eventTime") or _has_key(text, "eventSource"))):
        return "cloudtrail"
    if _has_key(text, "Records") and "eventName" in text:
        return "cloudtrail"
    if _has_key(text, "Table") and (_has_key(text, "KeySchema") or _has_key(text, "TableStatus")):
        return "dynamodb_table"
    if _has_key(text, "Items") and (re.search(r'\{\s*"(S|N|B|SS|NS|BS|M|L|BOOL|NULL)"\s*:', text) or
                                    _has_key(text, "ScannedCount") or _has_key(text, "Count")):
        return "dynamodb_scan"
    if _has_key(text, "componentState") or (_has_key(text, "componentId") and _has_key(text, "localState")):
        return "nifi_state"
    return None
