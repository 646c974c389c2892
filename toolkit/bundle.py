"""Incident bundles: find the evidence files, extract archives safely, attribute hosts.

A bundle is a directory, a ``.tar``/``.tar.gz``/``.tgz``/``.zip`` archive, or loose files.
Logs may be plain, ``.gz`` or rotated (``app.log.1``, ``app.log.2026-01-05``). Archives (nested
too) are extracted into a work directory with no path traversal, no links, no device files and
caps on size, ratio and count; every refusal becomes an :class:`IngestProblem` and the run goes on.

Optional ``bundle.toml`` at the bundle root::

    app_id = "orders-agg"
    [defaults]
    timezone = "UTC"              # zone of timestamps printed without an offset
    [hosts.orders-agg-0]
    timezone = "Europe/Berlin"
    clock_offset_ms = 0           # this host's clock minus true time; subtracted from its timestamps
    date = "2026-03-07"           # for layouts that print a time without a date
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import lzma
import os
import re
import shutil
import stat
import tarfile
import tempfile
import tomllib
import zipfile
import zlib
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path, PurePosixPath
from typing import Iterable, Iterator
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

#: Files at the bundle root that describe the bundle rather than evidence.
BUNDLE_META_FILES = {"bundle.toml", "README.md", "EXPECTED.json", "README.txt"}

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip", ".tar.bz2", ".tar.xz")


@dataclass(frozen=True)
class Limits:
    """Caps that keep hostile or broken archives from filling the disk."""

    max_members: int = 200_000
    max_total_bytes: int = 64 * 1024**3
    max_member_bytes: int = 16 * 1024**3
    #: uncompressed / compressed size above which an archive member is treated as a bomb
    max_ratio: float = 1000.0
    max_depth: int = 3


@dataclass(frozen=True)
class HostSettings:
    """Per-host settings from ``bundle.toml`` (or defaults)."""

    timezone: str = "UTC"
    clock_offset_ms: int = 0
    date: str | None = None


@dataclass(frozen=True)
class IngestProblem:
    """Something in the bundle that could not be read as intended, and why."""

    source: str
    problem: str
    detail: str = ""


@dataclass(frozen=True)
class LogFile:
    """A text log file ready for Spark (decompressed if it was gzip)."""

    source: str  # path inside the bundle, '/'-separated, archives shown as 'a.tar.gz!/x/y.log'
    local_path: Path
    host: str
    size: int


@dataclass(frozen=True)
class EvidenceItem:
    """A non-log evidence file or directory (state dir, capture archive, JSON dump)."""

    source: str
    local_path: Path
    host: str
    kind: str


@dataclass
class Bundle:
    """Everything found in a bundle, ready for the layout and state readers."""

    root: Path
    work_dir: Path
    logs: list[LogFile] = field(default_factory=list)
    evidence: list[EvidenceItem] = field(default_factory=list)
    problems: list[IngestProblem] = field(default_factory=list)
    hosts: dict[str, HostSettings] = field(default_factory=dict)
    defaults: HostSettings = field(default_factory=HostSettings)
    app_id: str | None = None
    notes: str | None = None

    def settings_for(self, host: str) -> HostSettings:
        """Host settings, falling back to the bundle defaults."""
        return self.hosts.get(host, self.defaults)

    def host_names(self) -> list[str]:
        """All hosts seen in logs or evidence, sorted."""
        return sorted({f.host for f in self.logs} | {e.host for e in self.evidence})


class BundleError(ValueError):
    """The bundle as a whole cannot be opened (missing path, unreadable bundle.toml...)."""


# --------------------------------------------------------------------------- configuration


def _check_zone(name: str, where: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise BundleError(f"{where}: unknown time zone {name!r}") from exc
    return name


def _host_settings(raw: dict, base: HostSettings, where: str) -> HostSettings:
    tz = _check_zone(str(raw.get("timezone", base.timezone)), where)
    offset = raw.get("clock_offset_ms", base.clock_offset_ms)
    if not isinstance(offset, int):
        raise BundleError(f"{where}: clock_offset_ms must be an integer number of milliseconds")
    day = raw.get("date", base.date)
    if day is not None:
        try:
            date.fromisoformat(str(day))
        except ValueError as exc:
            raise BundleError(f"{where}: date must look like 2026-03-07, got {day!r}") from exc
        day = str(day)
    return HostSettings(timezone=tz, clock_offset_ms=offset, date=day)


def read_bundle_toml(path: Path, default_timezone: str | None = None) -> dict:
    """Parse and validate ``bundle.toml``; returns hosts/defaults/app_id/notes."""
    base = HostSettings(timezone=_check_zone(default_timezone, "--timezone") if default_timezone else "UTC")
    if not path.is_file():
        return {"defaults": base, "hosts": {}, "app_id": None, "notes": None}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BundleError(f"{path.name} is not valid TOML: {exc}") from exc
    defaults = _host_settings(data.get("defaults", {}), base, "bundle.toml [defaults]")
    if default_timezone:  # an explicit command-line zone wins over the file's default
        defaults = HostSettings(default_timezone, defaults.clock_offset_ms, defaults.date)
    hosts = {
        str(name): _host_settings(raw or {}, defaults, f"bundle.toml [hosts.{name}]")
        for name, raw in (data.get("hosts") or {}).items()
    }
    return {"defaults": defaults, "hosts": hosts, "app_id": data.get("app_id"), "notes": data.get("notes")}


# --------------------------------------------------------------------------- host attribution

_ROTATION = re.compile(r"(\.(\d+|\d{4}-\d{2}-\d{2}([_.-]\d{2})?(\.\d+)?))+$")
_LOG_EXT = re.compile(r"\.(log|txt|out|json|jsonl|ndjson)$", re.I)
_POD_LIKE = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$", re.I)


def host_from_file_name(name: str) -> str | None:
    """Guess a pod/host name from a file name like ``orders-agg-1.log.2`` or ``kafka-0_app.log``.

    Returns None for generic names (``app.log``, ``server.log``, ``nifi-app.log``).
    """
    stem = name
    for suffix in (".gz",):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    stem = _ROTATION.sub("", stem)
    stem = _LOG_EXT.sub("", stem)
    stem = _ROTATION.sub("", stem)
    stem = re.sub(r"[-_.]\d{4}-\d{2}-\d{2}(?:[-_T]\d{2}(?:[-_:]?\d{2})*)?$", "", stem)  # dated exports
    generic = {"app", "server", "application", "stdout", "stderr", "console", "nifi-app", "nifi-bootstrap",
               "nifi-user", "nifi-request", "kafka-streams", "streams", "log", "output", "current"}
    if not stem or stem.lower() in generic or not _POD_LIKE.match(stem):
        return None
    # A pod or host name normally carries an ordinal or hash: orders-agg-1, web-7f9c6d-x2k4q.
    return stem if re.search(r"\d", stem) and "-" in stem else None


def looks_like_log_name(name: str) -> bool:
    """True for names like ``app.log``, ``app.log.1.gz`` or ``server.out.2026-01-05``."""
    return bool(_LOG_EXT.search(_ROTATION.sub("", name.removesuffix(".gz"))))


def _attribute_host(rel: PurePosixPath, known_hosts: Iterable[str], inherited: str | None) -> str:
    known = set(known_hosts)
    for part in rel.parts[:-1]:
        if part in known:
            return part
    if inherited:
        return inherited
    if len(rel.parts) > 1:
        return rel.parts[0]
    guessed = host_from_file_name(rel.name)
    if guessed:
        return guessed
    return "unknown-host"


# --------------------------------------------------------------------------- sniffing

_GZIP_MAGIC = b"\x1f\x8b"


def _head(path: Path, n: int = 8192) -> bytes:
    with path.open("rb") as fh:
        return fh.read(n)


def _is_archive(path: Path, head: bytes) -> bool:
    name = path.name.lower()
    if name.endswith(ARCHIVE_SUFFIXES):
        return True
    if head.startswith(b"PK\x03\x04"):
        return True
    return len(head) >= 262 and head[257:262] == b"ustar"


def _looks_binary(head: bytes) -> bool:
    if not head:
        return False
    if b"\x00" in head:
        return True
    # Mostly non-text bytes (control characters other than tab/CR/LF/ESC).
    controls = sum(1 for b in head if b < 32 and b not in (9, 10, 13, 27))
    return controls > len(head) * 0.10


def _evidence_kind(path: Path) -> str | None:
    """Ask the state readers whether this file or directory is state evidence."""
    try:
        from toolkit.state import sniff
    except ImportError:  # state readers not installed: everything is a log
        return None
    try:
        if path.is_dir():
            return "state_dir" if sniff.detect_state_dir(path) else None
        return sniff.detect_evidence_file(path)
    except Exception:  # a sniffer must never stop ingest
        return None


# --------------------------------------------------------------------------- safe extraction

_DRIVE = re.compile(r"^[A-Za-z]:")


def _safe_member_path(name: str) -> PurePosixPath | None:
    """Return a safe relative path for an archive member name, or None if it must be refused."""
    if not name or "\x00" in name:
        return None
    unified = name.replace("\\", "/")
    if unified.startswith("/") or _DRIVE.match(unified):
        return None
    parts = [p for p in unified.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        return None
    return PurePosixPath(*parts)


class _Extractor:
    """Extracts one archive (and, through the caller, nested ones) under a root directory."""

    def __init__(self, limits: Limits, problems: list[IngestProblem]):
        self.limits = limits
        self.problems = problems
        self.total_bytes = 0
        self.members = 0
        self.capped: set[str] = set()

    def _refuse(self, source: str, problem: str, detail: str = "") -> None:
        self.problems.append(IngestProblem(source, problem, detail))

    def _target(self, dest_root: Path, rel: PurePosixPath, source: str) -> Path | None:
        target = dest_root.joinpath(*rel.parts)
        try:
            resolved = target.resolve()
            if not resolved.is_relative_to(dest_root.resolve()):
                self._refuse(source, "path escapes the archive", str(rel))
                return None
        except OSError as exc:
            self._refuse(source, "unusable member path", str(exc))
            return None
        if target.exists():
            # Duplicate names: keep both, the later one with a suffix.
            n = 2
            while target.with_name(f"{target.name}~{n}").exists():
                n += 1
            renamed = target.with_name(f"{target.name}~{n}")
            self._refuse(source, "duplicate name in archive", f"kept as {renamed.name}")
            target = renamed
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def _copy(self, fh, target: Path, declared: int, compressed: int | None, source: str) -> bool:
        cap = min(self.limits.max_member_bytes, self.limits.max_total_bytes - self.total_bytes)
        if declared > cap:
            self._refuse(source, "member too large", f"{declared} bytes exceeds the cap of {cap}")
            return False
        if compressed and declared > 1 << 20 and declared / max(compressed, 1) > self.limits.max_ratio:
            self._refuse(source, "compression ratio too high (archive bomb?)",
                         f"{declared} bytes from {compressed}")
            return False
        written = 0
        with target.open("wb") as out:
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                written += len(chunk)
                if written > cap:
                    out.close()
                    target.unlink(missing_ok=True)
                    self._refuse(source, "member larger than declared (archive bomb?)", f"over {cap} bytes")
                    return False
                out.write(chunk)
        self.total_bytes += written
        return True

    def _admit(self, name: str, kind: str, source: str, link_detail: str = "") -> PurePosixPath | None:
        """The one member policy of every archive format: ``kind`` is ``dir``, ``file``, ``link`` or
        ``special``. Links and special files are refused, and so are unsafe paths (absolute, drive letters,
        ``..``, NUL); returns the safe relative path of a directory or regular file."""
        if kind == "link":
            self._refuse(source, "link in archive not extracted", link_detail)
            return None
        if kind == "special":
            self._refuse(source, "special file in archive not extracted", "device, fifo or other")
            return None
        rel = _safe_member_path(name)
        if rel is None and kind == "file":
            self._refuse(source, "unsafe path in archive", name)
        return rel

    def _count_member(self, source: str) -> bool:
        """Count one member against the bundle-wide cap; the first refused member of each archive is reported."""
        self.members += 1
        if self.members > self.limits.max_members:
            archive = source.rsplit("!/", 1)[0]
            if archive not in self.capped:
                self.capped.add(archive)
                self._refuse(source, "too many archive members",
                             f"limit {self.limits.max_members} for the bundle; rest of this archive skipped")
            return False
        return True

    def extract_tar(self, archive: Path, dest: Path, source: str) -> None:
        try:
            tf = tarfile.open(archive, "r:*")
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            self._refuse(source, "unreadable archive", str(exc))
            return
        extracted = 0
        current: str | None = None
        dir_mtimes: list[tuple[Path, float]] = []
        # Tar members carry no compressed size; watch the whole archive's ratio instead.
        compressed = archive.stat().st_size if tf.fileobj is not None and archive.suffix in (".gz", ".tgz", ".bz2", ".xz") else None
        with tf:
            try:
                for member in tf:
                    msource = f"{source}!/{member.name}"
                    if not self._count_member(msource):
                        break
                    kind = ("dir" if member.isdir() else "link" if member.issym() or member.islnk()
                            else "file" if member.isfile() else "special")
                    rel = self._admit(member.name, kind, msource, f"points to {member.linkname}")
                    if rel is None:
                        continue
                    if kind == "dir":
                        dest.joinpath(*rel.parts).mkdir(parents=True, exist_ok=True)
                        dir_mtimes.append((dest.joinpath(*rel.parts), member.mtime))
                        continue
                    projected = self.total_bytes + member.size
                    if compressed and projected > 1 << 24 and projected / compressed > self.limits.max_ratio:
                        # Judged on the sizes in the tar headers, before the member is written.
                        self._refuse(source, "compression ratio too high (archive bomb?)",
                                     f"{projected} bytes from {compressed}; rest skipped")
                        break
                    target = self._target(dest, rel, msource)
                    if target is None:
                        continue
                    fh = tf.extractfile(member)
                    if fh is None:
                        continue
                    current = msource
                    if self._copy(fh, target, member.size, None, msource):
                        extracted += 1
                        os.utime(target, (member.mtime, member.mtime))
                    current = None
                    if compressed and self.total_bytes > 1 << 24 and self.total_bytes / compressed > self.limits.max_ratio:
                        self._refuse(source, "compression ratio too high (archive bomb?)",
                                     f"{self.total_bytes} bytes from {compressed}; rest skipped")
                        break
                else:
                    # tarfile stops at the first zero block and never sees a compressed stream cut
                    # after it (or junk behind it): read the little that is left.
                    if isinstance(tf.fileobj, (gzip.GzipFile, bz2.BZ2File, lzma.LZMAFile)):
                        for _ in range(16):
                            if not tf.fileobj.read(1 << 16):
                                break
            except (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
                cut = f"; {current} cut short" if current else ""
                self._refuse(source, "truncated or corrupt archive", f"{exc}; {extracted} files recovered{cut}")
        _restore_dir_mtimes(dir_mtimes)

    def extract_zip(self, archive: Path, dest: Path, source: str) -> None:
        try:
            zf = zipfile.ZipFile(archive)
        except (zipfile.BadZipFile, OSError) as exc:
            self._refuse(source, "unreadable archive", str(exc))
            return
        dir_mtimes: list[tuple[Path, float]] = []
        with zf:
            for info in zf.infolist():
                msource = f"{source}!/{info.filename}"
                if not self._count_member(msource):
                    break
                mode = info.external_attr >> 16
                # Many zip tools store permission bits only; a file type, when present, must be regular.
                kind = ("dir" if info.is_dir() else "link" if stat.S_ISLNK(mode)
                        else "special" if stat.S_IFMT(mode) and not stat.S_ISREG(mode) else "file")
                rel = self._admit(info.filename, kind, msource, "symbolic link")
                if rel is None:
                    continue
                if kind == "dir":
                    dest.joinpath(*rel.parts).mkdir(parents=True, exist_ok=True)
                    dir_mtimes.append((dest.joinpath(*rel.parts), _zip_mtime(info)))
                    continue
                target = self._target(dest, rel, msource)
                if target is None:
                    continue
                try:
                    with zf.open(info) as fh:
                        ok = self._copy(fh, target, info.file_size, info.compress_size, msource)
                except (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError, RuntimeError) as exc:
                    # RuntimeError: an encrypted member ("password required").
                    target.unlink(missing_ok=True)
                    self._refuse(msource, "corrupt archive member", str(exc))
                    continue
                if ok:
                    mtime = _zip_mtime(info)
                    os.utime(target, (mtime, mtime))
        _restore_dir_mtimes(dir_mtimes)


def _restore_dir_mtimes(dir_mtimes: list[tuple[Path, float]]) -> None:
    """Give extracted directories their archived times, deepest first (writing a file touches its parent).

    A state capture's directory times are evidence (when a task directory was created or cleaned).
    """
    for path, mtime in sorted(dir_mtimes, key=lambda item: len(item[0].parts), reverse=True):
        with contextlib.suppress(OSError):
            os.utime(path, (mtime, mtime))


def _zip_mtime(info: zipfile.ZipInfo) -> float:
    import time

    try:
        return time.mktime(info.date_time + (0, 0, -1))
    except (OverflowError, ValueError):
        return 0.0


def gunzip_to(src: Path, target: Path, limits: Limits, source: str, problems: list[IngestProblem]) -> bool:
    """Decompress a gzip log, keeping what can be read from a truncated or damaged file.

    Returns False when nothing usable came out. Decompression is streamed chunk by chunk so the
    lines decoded before the damage are kept (a dying pod often leaves exactly that); concatenated
    gzip members (``cat a.gz b.gz``) are all read.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    compressed = max(src.stat().st_size, 1)
    written = 0
    problem: str | None = None
    decomp = zlib.decompressobj(wbits=31)
    with src.open("rb") as fh, target.open("wb") as out:
        while problem is None:
            chunk = fh.read(1 << 20)
            if not chunk:
                if not decomp.eof:
                    problem = "truncated or corrupt gzip"
                    detail = f"stream ends early; {written} bytes recovered"
                break
            data = chunk
            while data:
                try:
                    piece = decomp.decompress(data, 1 << 22)
                except zlib.error as exc:
                    problem, detail = "truncated or corrupt gzip", f"{exc}; {written} bytes recovered"
                    break
                over = len(piece) > limits.max_member_bytes - written
                if over:  # never write past the cap, not even by one decompressed chunk
                    piece = piece[:max(limits.max_member_bytes - written, 0)]
                written += len(piece)
                out.write(piece)
                if over or (written > 1 << 26 and written / compressed > limits.max_ratio):
                    problem, detail = "compression ratio too high (gzip bomb?)", f"stopped after {written} bytes"
                    break
                if decomp.unconsumed_tail:
                    data = decomp.unconsumed_tail
                elif decomp.eof and decomp.unused_data:  # next gzip member
                    data = decomp.unused_data
                    decomp = zlib.decompressobj(wbits=31)
                else:
                    data = b""
    if problem:
        problems.append(IngestProblem(source, problem, detail))
    elif written == 0:  # a valid gzip of nothing: say so rather than drop the file silently
        problems.append(IngestProblem(source, "empty file", "empty after gunzip"))
    st = src.stat()
    os.utime(target, (st.st_mtime, st.st_mtime))
    return written > 0


# --------------------------------------------------------------------------- the walk


def _iter_files(root: Path) -> Iterator[Path]:
    """Files and candidate state directories below root, in a stable order, without following links."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        here = Path(dirpath)
        keep = []
        for d in dirnames:
            sub = here / d
            if sub.is_symlink():
                yield sub  # refused with a problem row, never walked
                continue
            if d.endswith(".parquet") or (sub / WORK_MARKER).exists():
                continue  # our own output or scratch space inside the bundle folder
            if _evidence_kind(sub) == "state_dir":
                yield sub
            else:
                if looks_like_log_name(d):
                    yield sub  # reported as a problem; its files are still read below
                keep.append(d)
        dirnames[:] = keep
        if (here / WORK_MARKER).exists():
            continue
        for name in sorted(filenames):
            yield here / name


def _work_dir_for(paths: list[Path]) -> Path:
    digest = hashlib.sha1("\0".join(str(p.resolve()) for p in paths).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / "stream-incident-work" / digest


WORK_MARKER = ".stream-incident-work"


def _fresh_work_dir(work: Path) -> Path:
    """Empty a work directory this tool made earlier; refuse to touch anything else."""
    blocker = next((p for p in (work, *work.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise BundleError(f"cannot use {work} as the work directory: {blocker} is a file, not a directory")
    if work.exists():
        if not (work / WORK_MARKER).exists() and any(work.iterdir()):
            raise BundleError(f"work directory {work} is not empty and was not made by this tool")
        shutil.rmtree(work)
    try:
        work.mkdir(parents=True)
        (work / WORK_MARKER).write_text("scratch space of stream-incident; safe to delete\n")
    except OSError as exc:
        raise BundleError(f"cannot create the work directory {work}: {exc.strerror or exc}") from exc
    return work


def open_bundle(
    paths: Path | str | Iterable[Path | str],
    work_dir: Path | str | None = None,
    *,
    timezone: str | None = None,
    limits: Limits = Limits(),
) -> Bundle:
    """Discover the evidence in a bundle (directory, archive, or loose files).

    ``timezone`` overrides the default zone for hosts without their own setting in ``bundle.toml``.
    Raises :class:`BundleError` only when the bundle as a whole is unusable (nothing exists at the
    path, invalid ``bundle.toml``); everything else becomes a problem row.
    """
    items = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if not items:
        raise BundleError("no bundle given")
    missing = [str(p) for p in items if not p.exists()]
    if missing:
        raise BundleError(f"bundle not found: {', '.join(missing)}")
    root = items[0] if len(items) == 1 and items[0].is_dir() else items[0].parent
    work = _fresh_work_dir(Path(work_dir) if work_dir else _work_dir_for(items))
    meta = read_bundle_toml(root / "bundle.toml", timezone)
    bundle = Bundle(root=root, work_dir=work, hosts=meta["hosts"], defaults=meta["defaults"],
                    app_id=meta["app_id"], notes=meta["notes"])
    extractor = _Extractor(limits, bundle.problems)
    for item in items:
        if item.is_dir():
            _walk(bundle, extractor, item, prefix="", inherited_host=None, depth=0,
                  is_root=(item == root))
        else:
            _add_file(bundle, extractor, item, PurePosixPath(item.name), prefix="", inherited_host=None, depth=0)
    return bundle


def _walk(bundle: Bundle, ex: _Extractor, base: Path, prefix: str, inherited_host: str | None,
          depth: int, is_root: bool = False) -> None:
    for path in _iter_files(base):
        rel = PurePosixPath(path.relative_to(base).as_posix())
        if is_root and len(rel.parts) == 1 and rel.name in BUNDLE_META_FILES:
            continue
        _add_file(bundle, ex, path, rel, prefix, inherited_host, depth)


def _add_file(bundle: Bundle, ex: _Extractor, path: Path, rel: PurePosixPath, prefix: str,
              inherited_host: str | None, depth: int) -> None:
    source = f"{prefix}{rel.as_posix()}"
    host = _attribute_host(rel, bundle.hosts, inherited_host)
    if path.is_symlink():
        bundle.problems.append(IngestProblem(source, "symbolic link not followed", ""))
        return
    if path.is_dir():  # state directories, and directories named like log files
        if _evidence_kind(path) == "state_dir":
            bundle.evidence.append(EvidenceItem(source, path, host, "state_dir"))
        else:
            inside = sum(len(files) for _, _, files in os.walk(path))
            bundle.problems.append(IngestProblem(source, "directory named like a log file",
                                                 f"{inside} files inside, each read on its own"))
        return
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            # Opening a FIFO would block forever; sockets and devices are not evidence files.
            bundle.problems.append(IngestProblem(source, "not a regular file, not read", _file_type(st.st_mode)))
            return
        size = st.st_size
        head = _head(path)
    except OSError as exc:
        bundle.problems.append(IngestProblem(source, "unreadable file", exc.strerror or str(exc)))
        return
    kind = _evidence_kind(path)
    if kind:
        bundle.evidence.append(EvidenceItem(source, path, host, kind))
        return
    if _is_archive(path, head):
        if depth >= ex.limits.max_depth:
            bundle.problems.append(IngestProblem(source, "archive nested too deeply", f"depth limit {ex.limits.max_depth}"))
            return
        dest = bundle.work_dir / "extracted" / _flat_name(source)
        dest.mkdir(parents=True, exist_ok=True)
        if head.startswith(b"PK\x03\x04") or path.name.lower().endswith(".zip"):
            ex.extract_zip(path, dest, source)
        else:
            ex.extract_tar(path, dest, source)
        # Members of an archive that sits in a host folder belong to that host.
        member_host = host if len(rel.parts) > 1 or inherited_host else None
        _walk(bundle, ex, dest, prefix=f"{source}!/", inherited_host=member_host, depth=depth + 1)
        return
    if head.startswith(_GZIP_MAGIC):
        target = bundle.work_dir / "gunzipped" / _flat_name(source).removesuffix(".gz")
        if gunzip_to(path, target, ex.limits, source, bundle.problems):
            inner_head = _head(target)
            if _looks_binary(inner_head):
                bundle.problems.append(IngestProblem(source, "binary content, not read as a log", "after gunzip"))
                return
            bundle.logs.append(LogFile(source, _spark_readable(bundle, target, source), host, target.stat().st_size))
        return
    if size == 0:
        bundle.problems.append(IngestProblem(source, "empty file", ""))
        bundle.logs.append(LogFile(source, path, host, 0))
        return
    if _looks_binary(head):
        bundle.problems.append(IngestProblem(source, "binary content, not read as a log", f"{size} bytes"))
        return
    bundle.logs.append(LogFile(source, _spark_readable(bundle, path, source), host, size))


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "named pipe (FIFO)"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"


# Hadoop picks a decompressor from the file name (a plain 'app.log.gz' or a gunzipped
# 'x.log.bz2' would fail the whole Spark job); Spark reads []{}*?\ in a path as a glob and a
# ':' in a file name breaks Hadoop's Path; a stale '.NAME.crc' beside a file makes Hadoop's local
# file system fail the read with a checksum error. Such files are read through a neutral name.
_HADOOP_CODEC_SUFFIX = re.compile(r"\.(gz|bz2|deflate|lz4|snappy|zst|zstd|br|lzo|xz)$", re.I)
_SPARK_UNSAFE_PATH = re.compile(r"[\[\]{}*?\\:\x00-\x1f\x7f]")


def _spark_readable(bundle: Bundle, path: Path, source: str) -> Path:
    """The path Spark should read for this log: the file itself, or a hard link/copy with a safe name."""
    if not (_HADOOP_CODEC_SUFFIX.search(path.name) or _SPARK_UNSAFE_PATH.search(str(path.resolve()))
            or path.with_name(f".{path.name}.crc").exists()):
        return path
    target = bundle.work_dir / "renamed" / _HADOOP_CODEC_SUFFIX.sub(r"_\1", _flat_name(source))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    try:
        os.link(path, target)
    except OSError:  # another file system, or links not allowed
        shutil.copy2(path, target)
    return target


def _flat_name(source: str) -> str:
    digest = hashlib.sha1(source.encode()).hexdigest()[:8]
    tail = re.sub(r"[^A-Za-z0-9._-]+", "_", source.split("/")[-1])[-80:]
    return f"{digest}-{tail}"
