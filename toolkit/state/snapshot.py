"""One shape for the three ways a state directory reaches us: a copied folder, a capture archive, a shell listing.

Each loader returns a :class:`Snapshot` — the listing (relative paths, types, sizes, nanosecond mtimes,
modes) plus a way to read the small metadata files — so that ``kafka_state`` builds identical tables from
all three. Only files that :func:`capture.is_metadata_file` names are ever read, also from a folder, which
is what keeps "read the folder" and "read its capture" equal.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tarfile
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from toolkit.state import capture
from toolkit.state.timeutil import decimal_seconds_to_ns, from_ns, parse_aws_time

#: Header line of the shell capture's listing (see playbooks/capturing-state.md).
LISTING_MAGIC = "# stream-incident state listing"
LISTING_FILE_NAME = "state-listing.txt"
#: ``find "$STATE_DIR" -printf '%y %s %T@ %m %P\n'``: type, size, mtime (epoch.fraction), octal mode, path.
LISTING_LINE = re.compile(r"^(?P<type>[a-zA-Z]) (?P<size>\d+) (?P<mtime>\d+(?:\.\d+)?) (?P<mode>[0-7]{1,4}) (?P<path>.*)$")
_FIND_TYPES = {"f": "f", "d": "d", "l": "l"}


@dataclass(frozen=True)
class Entry:
    """One listed path. ``rel`` is POSIX and relative to the captured root ("" = the root itself)."""

    rel: str
    type: str  # f | d | l | o
    size: int
    mtime_ns: int | None
    mode: str | None  # "0644"

    @property
    def name(self) -> str:
        return self.rel.rsplit("/", 1)[-1]

    @property
    def mtime(self) -> datetime | None:
        return from_ns(self.mtime_ns)


ContentReader = Callable[[str], "bytes | None"]


@dataclass
class Snapshot:
    """A state directory listing with access to its captured metadata files."""

    root_name: str  # name of the captured folder (app id when an app folder was captured)
    parent_name: str | None  # name of the folder above it (the app id when a task folder was captured)
    entries: list[Entry]
    read: ContentReader  # rel -> bytes, or None when the content was not captured
    capture_time: datetime | None = None
    captured_host: str | None = None
    state_dir: str | None = None
    problems: list[tuple[str, str]] = field(default_factory=list)  # (rel or "", reason)
    copy_errors: dict[str, str] = field(default_factory=dict)  # rel -> why its content is missing
    product: str = "kafka-streams"  # or "nifi" (``capture-state --product nifi``, a NiFi repository folder)
    wal_outlines: dict[str, dict[str, Any]] = field(default_factory=dict)  # NiFi: rel -> write-ahead-log outline


def _safe_rel(name: str) -> str | None:
    """A member/listing path as a clean relative POSIX path, or None when it could escape the root."""
    if not name or "\0" in name or name.startswith("/") or "\\" in name:
        return None
    parts = [p for p in PurePosixPath(name).parts if p not in ("", ".")]
    if any(p == ".." for p in parts):
        return None
    return "/".join(parts)


def _read_capped(path: Path, limit: int = capture.DEFAULT_MAX_FILE_BYTES) -> bytes | None:
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        with open(path, "rb") as handle:
            return handle.read(limit + 1)
    except OSError:
        return None


def _folder_reader(base: Path, sizes: dict[str, int], any_name: bool = False) -> ContentReader:
    """Reads metadata files (any copied file with ``any_name``) under ``base``, never outside it or via symlinks."""
    base_resolved = base.resolve()

    def read(rel: str) -> bytes | None:
        safe = _safe_rel(rel)
        if safe is None or not (any_name or capture.is_metadata_file(safe.rsplit("/", 1)[-1])):
            return None
        if sizes.get(safe, 0) > capture.DEFAULT_MAX_FILE_BYTES:
            return None
        path = base / safe
        try:
            if not path.resolve().is_relative_to(base_resolved):
                return None
        except OSError:
            return None
        return _read_capped(path)

    return read


def from_directory(root: Path) -> Snapshot:
    """List a copied ``state.dir`` (or app/task folder) the same way the capture tool does."""
    listed, errors = capture.walk_listing(root)
    entries = [_entry_from_manifest(item) for item in listed]
    snapshot = Snapshot(
        root_name=root.name,
        parent_name=root.parent.name or None,
        entries=[e for e in entries if e is not None],
        read=_folder_reader(root, {e.rel: e.size for e in entries if e is not None}),
    )
    snapshot.problems.extend((err["path"], err["error"]) for err in errors)
    return snapshot


def _entry_from_manifest(item: dict[str, Any]) -> Entry | None:
    rel = "" if item.get("path") in (".", "") else _safe_rel(str(item.get("path")))
    if rel is None:
        return None
    mtime_ns = item.get("mtime_ns")
    return Entry(
        rel=rel,
        type=str(item.get("type") or "o"),
        size=int(item.get("size") or 0),
        mtime_ns=int(mtime_ns) if isinstance(mtime_ns, int) else None,
        mode=str(item["mode"]) if item.get("mode") is not None else None,
    )


def _snapshot_from_manifest(manifest: dict[str, Any], read: ContentReader) -> Snapshot:
    if manifest.get("format") != capture.FORMAT_NAME:
        raise ValueError("manifest is not a stream-incident state capture")
    state_dir = str(manifest.get("state_dir") or "")
    posix = PurePosixPath(state_dir.replace("\\", "/")) if state_dir else None
    entries: list[Entry] = []
    problems: list[tuple[str, str]] = []
    copy_errors: dict[str, str] = {}
    outlines: dict[str, dict[str, Any]] = {}
    for item in manifest.get("entries") or []:
        if not isinstance(item, dict):
            continue
        entry = _entry_from_manifest(item)
        if entry is None:
            problems.append((str(item.get("path")), "unsafe path in manifest; ignored"))
            continue
        entries.append(entry)
        if item.get("copy_error"):
            copy_errors[entry.rel] = str(item["copy_error"])
        if isinstance(item.get("wal"), dict):
            outlines[entry.rel] = item["wal"]
    for err in manifest.get("errors") or []:
        if isinstance(err, dict):
            problems.append((str(err.get("path")), f"capture: {err.get('error')}"))
    return Snapshot(
        root_name=str(manifest.get("root_name") or (posix.name if posix else "")),
        parent_name=(posix.parent.name or None) if posix else None,
        entries=entries,
        read=read,
        capture_time=parse_aws_time(manifest.get("capture_time")),
        captured_host=manifest.get("hostname"),
        state_dir=state_dir or None,
        problems=problems,
        copy_errors=copy_errors,
        product="nifi" if manifest.get("product") == "nifi" else "kafka-streams",
        wal_outlines=outlines,
    )


def from_capture_archive(path: Path, max_member_bytes: int = capture.DEFAULT_MAX_FILE_BYTES) -> Snapshot:
    """Read a capture archive in memory: the manifest and the copied metadata files, nothing is extracted.

    Store data members (``--include-store-data``) are skipped unread; members outside ``state-capture/files/``,
    with unsafe names, or that are not regular files are ignored.
    """
    manifest: dict[str, Any] | None = None
    contents: dict[str, bytes] = {}
    problems: list[tuple[str, str]] = []
    try:
        with tarfile.open(path, "r:*") as archive:
            try:
                for member in archive:
                    if member.name == capture.MANIFEST_MEMBER and member.isfile():
                        handle = archive.extractfile(member)
                        manifest = json.loads(handle.read().decode("utf-8")) if handle else None
                    elif member.name == capture.COPY_ERRORS_MEMBER and member.isfile():
                        handle = archive.extractfile(member)
                        for err in json.loads(handle.read().decode("utf-8")) if handle else []:
                            problems.append((str(err.get("path")), f"capture: {err.get('error')}"))
                    elif member.name.startswith(capture.FILES_PREFIX):
                        rel = _safe_rel(member.name[len(capture.FILES_PREFIX) :])
                        if rel is None or not member.isfile():
                            problems.append((member.name, "unsafe or non-regular archive member; ignored"))
                            continue
                        nifi = isinstance(manifest, dict) and manifest.get("product") == "nifi"
                        wanted = nifi or capture.is_metadata_file(rel.rsplit("/", 1)[-1])
                        if not wanted or member.size > max_member_bytes:
                            continue  # store data: listed in the manifest, content not needed
                        handle = archive.extractfile(member)
                        if handle is not None:
                            contents[rel] = handle.read(max_member_bytes + 1)
            except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
                # Truncated archive: keep what was read before the damage.
                problems.append(("", f"capture archive damaged after {len(contents)} files: {exc}"))
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise ValueError(f"not a readable capture archive: {exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"capture manifest is not valid JSON: {exc}") from exc
    if not isinstance(manifest, dict):
        raise ValueError("capture archive has no readable state-capture/manifest.json")
    snapshot = _snapshot_from_manifest(manifest, contents.get)
    snapshot.problems.extend(problems)
    return snapshot


def from_extracted_manifest(manifest_path: Path) -> Snapshot:
    """A capture archive that a bundle walker already extracted: ``manifest.json`` next to ``files/``."""
    try:
        manifest = json.loads(manifest_path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"capture manifest is not valid JSON: {exc}") from exc
    if not isinstance(manifest, dict):
        raise ValueError("capture manifest is not a JSON object")
    files = manifest_path.parent / capture.FILES_DIR_NAME
    sizes = {str(item.get("path")): int(item.get("size") or 0) for item in manifest.get("entries") or [] if isinstance(item, dict)}
    return _snapshot_from_manifest(manifest, _folder_reader(files, sizes, any_name=manifest.get("product") == "nifi"))


def from_listing(path: Path) -> Snapshot:
    """Read the shell capture: a ``find -printf '%y %s %T@ %m %P\\n'`` listing, files in a sibling ``files/``."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read listing: {exc}") from exc
    text = raw.decode("utf-8", errors="replace")
    header: dict[str, str] = {}
    entries: list[Entry] = []
    bad_lines: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line.startswith("#"):
            key, sep, value = line[1:].partition(":")
            if sep:
                header[key.strip().lower()] = value.strip()
            continue
        match = LISTING_LINE.match(line)
        rel = _safe_rel(match.group("path")) if match and match.group("path") not in ("", ".") else ""
        if match is None or rel is None:
            bad_lines.append(number)
            continue
        try:
            mtime_ns = decimal_seconds_to_ns(match.group("mtime"))
        except ValueError:
            bad_lines.append(number)
            continue
        entries.append(
            Entry(
                rel=rel,
                type=_FIND_TYPES.get(match.group("type"), "o"),
                size=int(match.group("size")),
                mtime_ns=mtime_ns,
                mode=match.group("mode").rjust(4, "0"),
            )
        )
    if not entries:
        raise ValueError("no listing lines in the expected 'find -printf \"%y %s %T@ %m %P\\n\"' format")
    entries.sort(key=lambda e: (e.rel != "", e.rel))
    state_dir = header.get("state_dir") or ""
    posix = PurePosixPath(state_dir) if state_dir else None
    files = path.parent / capture.FILES_DIR_NAME
    snapshot = Snapshot(
        root_name=posix.name if posix else "",
        parent_name=(posix.parent.name or None) if posix else None,
        entries=entries,
        read=_folder_reader(files, {e.rel: e.size for e in entries}),
        capture_time=parse_aws_time(header.get("capture_time")),
        captured_host=header.get("host") or None,
        state_dir=state_dir or None,
    )
    if bad_lines:
        shown = ", ".join(str(n) for n in bad_lines[:10])
        snapshot.problems.append(("", f"{len(bad_lines)} listing line(s) not in the supported format (lines {shown})"))
    return snapshot
