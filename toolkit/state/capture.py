#!/usr/bin/env python3
"""Capture a Kafka Streams ``state.dir`` for incident analysis, without stopping the application.

Standard library only: this file also runs on its own on a production host, without the toolkit::

    python3 capture.py /var/lib/kafka-streams --out state-$(hostname).tar.gz [--include-store-data]

What goes into the archive (a gzip'd tar):

* ``state-capture/manifest.json`` (always the first member): the full listing of the directory (path, type,
  size, mtime with nanoseconds, mode) plus the capture time, the host name and the captured path;
* ``state-capture/files/<path>``: copies of the small metadata files only (``.checkpoint*``, ``*.position``,
  ``kafka-streams-process-metadata``, RocksDB ``OPTIONS-*``/``CURRENT``/``IDENTITY``), each at most
  ``--max-file-bytes``;
* store data (``*.sst``, ``*.log``, ``MANIFEST-*``, RocksDB ``LOG``...) only with ``--include-store-data``.

Why a listing and not a plain ``tar`` of the folder: the incident questions are "which task directories existed,
when was each ``.checkpoint`` last written, which stores hold data", which the listing answers in kilobytes,
while store data is often gigabytes and may hold customer records.

With ``--product nifi`` the argument is a NiFi home (or its ``state/local`` or ``flowfile_repository`` folder):
the listing covers everything except the content and provenance repositories, the local state provider's
write-ahead log (component state: small) is copied, and the FlowFile repository's checkpoint and journals are
never copied: the manifest carries their outline instead (header, record count, transaction ids and
lengths, whether the journal was closed), which is read without decoding a single FlowFile.

The toolkit's reader (``toolkit.state``) turns this archive into the same tables as the directory itself.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import socket
import stat
import struct
import sys
import tarfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

FORMAT_NAME = "stream-incident-state-capture"
FORMAT_VERSION = 1
ARCHIVE_PREFIX = "state-capture/"
MANIFEST_MEMBER = ARCHIVE_PREFIX + "manifest.json"
FILES_PREFIX = ARCHIVE_PREFIX + "files/"
COPY_ERRORS_MEMBER = ARCHIVE_PREFIX + "copy-errors.json"
#: Name of the manifest when the archive has been extracted (e.g. by a bundle walker).
MANIFEST_FILE_NAME = "manifest.json"
#: Folder, next to the manifest or the shell listing, that holds the copied files.
FILES_DIR_NAME = "files"

#: Metadata files are small (a checkpoint is a few hundred bytes, RocksDB OPTIONS a few tens of KB).
DEFAULT_MAX_FILE_BYTES = 1 << 20
#: A runaway tree (millions of files) should not produce a manifest the reader cannot hold.
MAX_ENTRIES = 500_000

PROCESS_METADATA_FILE = "kafka-streams-process-metadata"
_ROCKSDB_METADATA_NAMES = ("CURRENT", "IDENTITY")

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def is_metadata_file(name: str) -> bool:
    """True for the small files whose content the capture copies (and the reader reads)."""
    return (
        name.startswith(".checkpoint")  # .checkpoint, .checkpoint.tmp, .checkpoint_<store> (4.3)
        or name.endswith(".position")  # IQv2 positions, 3.2-4.2
        or name == PROCESS_METADATA_FILE  # 2.8+
        or name.startswith("OPTIONS-")  # RocksDB options: tells KIP-1035 stores by their 'offsets' column family
        or name in _ROCKSDB_METADATA_NAMES
    )


# --------------------------------------------------------------------------- NiFi write-ahead logs

PRODUCTS = ("kafka-streams", "nifi")
#: Folders never listed in a NiFi capture: FlowFile content and provenance (customer data, millions of files).
NIFI_SKIPPED_DIRS = ("content_repository", "provenance_repository")
#: Class names NiFi writes as the first field of its write-ahead-log files (Java ``writeUTF``).
WAL_HASHMAP_SNAPSHOT = "org.apache.nifi.wali.HashMapSnapshot"  # snapshot of SequentialAccessWriteAheadLog
WAL_LENGTH_DELIMITED_JOURNAL = "org.apache.nifi.wali.LengthDelimitedJournal"  # its journals
WAL_MINIMAL_LOCKING = "org.wali.MinimalLockingWriteAheadLog"  # 1.x local state: snapshot and partition journals
WAL_CLASSES = (WAL_HASHMAP_SNAPSHOT, WAL_LENGTH_DELIMITED_JOURNAL, WAL_MINIMAL_LOCKING)
STATE_MAP_SERDE = "org.apache.nifi.controller.state.StateMapSerDe"
#: ``LengthDelimitedJournal`` markers: a transaction follows / the journal was closed cleanly.
TRANSACTION_FOLLOWS = 64
JOURNAL_COMPLETE = 127
_WAL_FILE_NAMES = ("checkpoint", "checkpoint.partial", "snapshot", "snapshot.partial")


def is_nifi_wal_name(name: str) -> bool:
    """True for the file names NiFi's write-ahead logs use (snapshot/checkpoint, ``<n>.journal``)."""
    return name in _WAL_FILE_NAMES or (name.endswith(".journal") and name[: -len(".journal")].isdigit())


class _Truncated(Exception):
    pass


def _read_exact(handle: Any, size: int) -> bytes:
    data = handle.read(size)
    if len(data) < size:
        raise _Truncated(f"file ends {size - len(data)} byte(s) short of a {size}-byte field")
    return data


def read_java_utf(handle: Any) -> str:
    """One ``DataOutputStream.writeUTF`` string: 2-byte length, then modified UTF-8."""
    (length,) = struct.unpack(">H", _read_exact(handle, 2))
    return decode_modified_utf8(_read_exact(handle, length))


def decode_modified_utf8(raw: bytes) -> str:
    """Java's modified UTF-8 (NUL as C0 80, supplementary characters as surrogate pairs) -> str."""
    text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", errors="surrogatepass")
    try:
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        return text.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate: keep the rest readable


def nifi_wal_outline(path: Path, name: str | None = None) -> dict[str, Any]:
    """The outline of one NiFi write-ahead-log file, read without decoding any record.

    Header fields for every file; for a snapshot the record count and max transaction id it declares;
    for a ``LengthDelimitedJournal`` every transaction's id and length (the content is skipped), whether
    the journal was closed cleanly (trailing marker 127) and what follows the last whole transaction.
    ``problem`` names damage (empty file, truncated header or transaction, unknown marker); the fields
    read before the damage are kept. Never raises for bad content (an unreadable path raises OSError).
    """
    name = name or Path(path).name
    outline: dict[str, Any] = {"problem": None}
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            outline["problem"] = "empty file (0 bytes)"
            return outline
        try:
            wal_class = read_java_utf(handle)
            outline["wal_class"] = wal_class
            if wal_class not in WAL_CLASSES:
                outline["problem"] = "not a NiFi write-ahead-log file (unknown header)"
                return outline
            (outline["wal_version"],) = struct.unpack(">i", _read_exact(handle, 4))
            outline["serde"] = read_java_utf(handle)
            (outline["serde_version"],) = struct.unpack(">i", _read_exact(handle, 4))
            journal = wal_class == WAL_LENGTH_DELIMITED_JOURNAL or (
                wal_class == WAL_MINIMAL_LOCKING and name.endswith(".journal"))
            outline["file_kind"] = "journal" if journal else "snapshot"
            if not journal:
                outline["max_transaction_id"], outline["records"] = struct.unpack(">qi", _read_exact(handle, 12))
                outline["header_bytes"] = handle.tell()
                return outline
            if wal_class == WAL_MINIMAL_LOCKING:
                # 1.x partition journals are not length-delimited: only a record decoder can walk them.
                outline["header_bytes"] = handle.tell()
                return outline
            (serde_header_length,) = struct.unpack(">i", _read_exact(handle, 4))
            if serde_header_length < 0 or handle.tell() + serde_header_length > size:
                raise _Truncated(f"serde header of {serde_header_length} bytes does not fit the file")
            handle.seek(serde_header_length, os.SEEK_CUR)
            outline["header_bytes"] = handle.tell()
            _outline_transactions(handle, size, outline)
        except _Truncated as exc:
            outline["problem"] = f"truncated: {exc}"
        except struct.error as exc:  # pragma: no cover - _read_exact guarantees the sizes
            outline["problem"] = f"unreadable field: {exc}"
    return outline


def _outline_transactions(handle: Any, size: int, outline: dict[str, Any]) -> None:
    transactions = 0
    first = last = None
    total = 0
    outline.update(transactions=0, complete=False, trailing_nul_bytes=0)
    while True:
        marker = handle.read(1)
        if not marker:
            break  # still open when copied, or the process died: no closing marker
        if marker[0] == JOURNAL_COMPLETE:
            outline["complete"] = True
            rest = size - handle.tell()
            if rest:
                outline["problem"] = f"{rest} byte(s) after the closing marker"
            break
        if marker[0] == 0:
            rest = handle.read()
            if rest.count(0) == len(rest):
                outline["trailing_nul_bytes"] = len(rest) + 1  # power loss: NiFi skips the rest too
            else:
                outline["problem"] = f"unexpected transaction marker 0 at byte {handle.tell() - len(rest) - 1}"
            break
        if marker[0] != TRANSACTION_FOLLOWS:
            outline["problem"] = f"unexpected transaction marker {marker[0]} at byte {handle.tell() - 1}"
            break
        try:
            transaction_id, length = struct.unpack(">qi", _read_exact(handle, 12))
        except _Truncated:
            outline["problem"] = f"truncated: transaction header cut after transaction {last}"
            break
        if length < 0 or handle.tell() + length > size:
            outline["problem"] = (f"truncated: transaction {transaction_id} declares {length} bytes, "
                                  f"{max(size - handle.tell(), 0)} left")
            outline["incomplete_transaction_id"] = transaction_id
            break
        handle.seek(length, os.SEEK_CUR)
        transactions += 1
        total += length
        first = transaction_id if first is None else first
        last = transaction_id
    outline.update(transactions=transactions, first_transaction_id=first, last_transaction_id=last,
                   transaction_bytes=total)


def nifi_outline_or_none(path: Path, name: str) -> dict[str, Any] | None:
    if not is_nifi_wal_name(name):
        return None
    try:
        return nifi_wal_outline(path, name)
    except OSError as exc:
        return {"problem": f"unreadable: {type(exc).__name__}: {exc}"}


def nifi_copies_content(outline: dict[str, Any] | None, size: int, max_file_bytes: int) -> bool:
    """Whether a NiFi capture copies a file: local component state only, never FlowFile records."""
    return bool(outline) and outline.get("serde") == STATE_MAP_SERDE and size <= max_file_bytes


def ns_to_iso(mtime_ns: int) -> str:
    """Render epoch nanoseconds as ISO 8601 UTC with microseconds (for humans; ``mtime_ns`` is the truth)."""
    moment = _EPOCH + timedelta(microseconds=mtime_ns // 1000)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def mode_text(st_mode: int) -> str:
    """Permission bits as four octal digits, e.g. ``0644`` (the same text whatever the source)."""
    return format(stat.S_IMODE(st_mode), "04o")


def entry_type(st_mode: int) -> str:
    """One letter like GNU find's ``%y``: ``f`` file, ``d`` directory, ``l`` symlink, ``o`` anything else."""
    if stat.S_ISLNK(st_mode):
        return "l"
    if stat.S_ISDIR(st_mode):
        return "d"
    if stat.S_ISREG(st_mode):
        return "f"
    return "o"


def walk_listing(root: Path, skip: Path | None = None,
                 skip_dir_names: Sequence[str] = ()) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """List ``root`` recursively without following symlinks; paths are POSIX and relative (``.`` = root).

    Folders named in ``skip_dir_names`` are listed themselves but not walked. Returns ``(entries, errors)``.
    Entries are sorted by path so two captures of the same tree are identical.
    """
    entries: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    skip_resolved = skip.resolve() if skip is not None else None

    def add(rel: str, path: Path) -> os.stat_result | None:
        try:
            st = os.lstat(path)
        except OSError as exc:  # removed between listing and stat (e.g. a checkpoint swap)
            errors.append({"path": rel, "error": f"{type(exc).__name__}: {exc}"})
            return None
        item: dict[str, Any] = {
            "path": rel,
            "type": entry_type(st.st_mode),
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "mtime": ns_to_iso(st.st_mtime_ns),
            "mode": mode_text(st.st_mode),
        }
        if item["type"] == "l":
            try:
                item["link"] = os.readlink(path)
            except OSError:
                pass
        entries.append(item)
        return st

    def walk(directory: Path, rel_dir: str) -> None:
        try:
            with os.scandir(directory) as it:
                children = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            errors.append({"path": rel_dir, "error": f"{type(exc).__name__}: {exc}"})
            return
        for child in children:
            if len(entries) >= MAX_ENTRIES:
                errors.append({"path": rel_dir, "error": f"listing truncated at {MAX_ENTRIES} entries"})
                return
            rel = child.name if rel_dir == "." else f"{rel_dir}/{child.name}"
            child_path = Path(child.path)
            # resolve() only for a name match: it costs a syscall per path component.
            if skip_resolved is not None and child.name == skip_resolved.name and child_path.resolve() == skip_resolved:
                continue
            st = add(rel, child_path)
            if st is not None and stat.S_ISDIR(st.st_mode) and child.name not in skip_dir_names:
                walk(child_path, rel)

    add(".", root)
    walk(root, ".")
    entries.sort(key=lambda e: (e["path"] != ".", e["path"]))
    return entries, errors


def _wanted(entry: dict[str, Any], include_store_data: bool, max_file_bytes: int) -> bool:
    if entry["type"] != "f":
        return False
    if include_store_data:
        return True
    name = entry["path"].rsplit("/", 1)[-1]
    return is_metadata_file(name) and entry["size"] <= max_file_bytes


def _tar_info(name: str, entry: dict[str, Any], size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = entry["mtime_ns"] / 1e9  # PAX keeps the fraction, so an extracted copy keeps sub-second mtimes
    info.mode = int(entry["mode"], 8)
    info.type = tarfile.REGTYPE
    return info


class _Padded(io.RawIOBase):
    """Reads exactly ``size`` bytes from a file that may shrink while it is copied (zero-padded)."""

    def __init__(self, handle: Any, size: int) -> None:
        self._handle, self._left, self.short = handle, size, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._left <= 0:
            return 0
        want = min(len(buffer), self._left)
        data = self._handle.read(want)
        if not data:
            self.short = True
            data = b"\0" * want
        buffer[: len(data)] = data
        self._left -= len(data)
        return len(data)


def write_capture(
    state_dir: Path,
    out: Path,
    *,
    include_store_data: bool = False,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    product: str = "kafka-streams",
) -> dict[str, Any]:
    """Write the capture archive of ``state_dir`` to ``out`` and return the manifest (without entries' bulk).

    ``product="nifi"``: ``state_dir`` is a NiFi home or repository folder; see the module docstring.
    """
    state_dir = Path(state_dir)
    out = Path(out)
    capture_ns = time.time_ns()
    nifi = product == "nifi"
    entries, errors = walk_listing(state_dir, skip=out, skip_dir_names=NIFI_SKIPPED_DIRS if nifi else ())
    if nifi:
        include_store_data = False  # FlowFile records hold attribute values: outlines only
        for entry in entries:
            name = entry["path"].rsplit("/", 1)[-1]
            if entry["type"] == "f":
                outline = nifi_outline_or_none(state_dir / entry["path"], name)
                if outline is not None:
                    entry["wal"] = outline

    # Small files are read before the manifest is written so that the manifest can say what was copied;
    # a checkpoint swapped or deleted meanwhile is recorded as a copy error rather than silently missing.
    contents: dict[str, bytes] = {}
    streamed: list[dict[str, Any]] = []
    for entry in entries:
        wanted = (nifi_copies_content(entry.get("wal"), entry["size"], max_file_bytes) if nifi
                  else _wanted(entry, include_store_data, max_file_bytes))
        if not wanted:
            entry["copied"] = False
            continue
        name = entry["path"].rsplit("/", 1)[-1]
        if include_store_data and not nifi and not (is_metadata_file(name) and entry["size"] <= max_file_bytes):
            entry["copied"] = True
            streamed.append(entry)
            continue
        try:
            with open(state_dir / entry["path"], "rb") as handle:
                data = handle.read(max_file_bytes + 1)
        except OSError as exc:
            entry["copied"] = False
            entry["copy_error"] = f"{type(exc).__name__}: {exc}"
            continue
        if len(data) > max_file_bytes:
            entry["copied"] = False
            entry["copy_error"] = f"grew beyond {max_file_bytes} bytes while being copied"
            continue
        entry["copied"] = True
        entry["copied_size"] = len(data)
        contents[entry["path"]] = data

    manifest: dict[str, Any] = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "product": product,
        "tool": "stream-incident capture-state",
        "capture_time": ns_to_iso(capture_ns),
        "capture_time_ns": capture_ns,
        "hostname": socket.gethostname(),
        "state_dir": str(state_dir.resolve()),
        "root_name": state_dir.resolve().name,
        "include_store_data": include_store_data,
        "max_file_bytes": max_file_bytes,
        "python": platform.python_version(),
        "platform": sys.platform,
        "entry_count": len(entries),
        "copied_count": sum(1 for e in entries if e.get("copied")),
        "errors": errors,
        "entries": entries,
    }

    partial = out.with_name(out.name + ".partial")
    copy_errors: list[dict[str, str]] = []
    with tarfile.open(partial, "w:gz", format=tarfile.PAX_FORMAT) as archive:
        body = json.dumps(manifest, indent=1, sort_keys=False).encode("utf-8")
        info = tarfile.TarInfo(MANIFEST_MEMBER)
        info.size = len(body)
        info.mtime = capture_ns // 1_000_000_000  # integral: keeps the manifest header a plain ustar block
        info.mode = 0o644
        archive.addfile(info, io.BytesIO(body))
        for entry in entries:
            if entry["path"] in contents:
                data = contents[entry["path"]]
                archive.addfile(_tar_info(FILES_PREFIX + entry["path"], entry, len(data)), io.BytesIO(data))
        for entry in streamed:
            try:
                with open(state_dir / entry["path"], "rb") as handle:
                    reader = _Padded(handle, entry["size"])
                    archive.addfile(_tar_info(FILES_PREFIX + entry["path"], entry, entry["size"]), reader)
                    if reader.short:
                        copy_errors.append({"path": entry["path"], "error": "file shrank while copied; zero-padded"})
            except OSError as exc:
                copy_errors.append({"path": entry["path"], "error": f"{type(exc).__name__}: {exc}"})
        if copy_errors:
            body = json.dumps(copy_errors, indent=1).encode("utf-8")
            info = tarfile.TarInfo(COPY_ERRORS_MEMBER)
            info.size = len(body)
            info.mtime = time.time_ns() // 1_000_000_000
            archive.addfile(info, io.BytesIO(body))
    os.replace(partial, out)
    summary = {k: v for k, v in manifest.items() if k != "entries"}
    summary["copy_errors"] = copy_errors
    return summary


def _iter_lines(summary: dict[str, Any], out: Path) -> Iterator[str]:
    yield f"captured {summary['state_dir']} on {summary['hostname']} at {summary['capture_time']}"
    yield f"{summary['entry_count']} entries listed, {summary['copied_count']} files copied -> {out}"
    if not summary["copied_count"]:
        nifi = summary.get("product") == "nifi"
        yield (f"warning: no {'state provider or FlowFile repository' if nifi else 'checkpoint, lock or metadata'} "
               f"file under {summary['state_dir']}: is it the {'NiFi home' if nifi else 'state.dir'}? "
               "The archive holds the listing only.")
    for problem in summary["errors"] + summary["copy_errors"]:
        yield f"warning: {problem['path']}: {problem['error']}"


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface (also used by ``stream-incident capture-state``)."""
    parser = argparse.ArgumentParser(
        prog="capture-state",
        description="Capture a Kafka Streams state.dir, or NiFi's state and FlowFile repository, listing and "
                    "small metadata files into one archive.",
    )
    parser.add_argument("state_dir", type=Path,
                        help="the state.dir (or one application folder inside it); with --product nifi the NiFi "
                             "home, or its state/local or flowfile_repository folder")
    parser.add_argument("--product", choices=PRODUCTS, default="kafka-streams",
                        help="what the folder belongs to (default kafka-streams)")
    parser.add_argument("--out", type=Path, required=True, help="archive to write, e.g. state-HOST.tar.gz")
    parser.add_argument(
        "--include-store-data",
        action="store_true",
        help="also copy RocksDB data (*.sst, *.log, MANIFEST-*); can be large and holds records",
    )
    parser.add_argument(
        "--max-file-bytes",
        type=int,
        default=DEFAULT_MAX_FILE_BYTES,
        help=f"largest metadata file copied (default {DEFAULT_MAX_FILE_BYTES})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the capture; returns the process exit code (0 ok, 2 bad arguments or unreadable state dir)."""
    args = build_parser().parse_args(argv)
    if not args.state_dir.is_dir():
        print(f"error: {args.state_dir} is not a directory", file=sys.stderr)
        return 2
    try:
        summary = write_capture(
            args.state_dir, args.out, include_store_data=args.include_store_data, max_file_bytes=args.max_file_bytes,
            product=args.product,
        )
    except OSError as exc:
        print(f"error: cannot write {args.out}: {exc}", file=sys.stderr)
        return 2
    for line in _iter_lines(summary, args.out):
        print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
