"""Archive members under one policy, extracted safely.

Tar and zip members pass the same checks (:meth:`Extractor.admit`): no links, no device files, no
path that leaves the extraction folder; caps on size, compression ratio and member count stop
bombs before they are written. Every refusal is an :class:`IngestProblem`; the rest is extracted.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import lzma
import os
import re
import stat
import tarfile
import time
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Callable

from toolkit.bundle.model import IngestProblem, Limits

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip", ".tar.bz2", ".tar.xz")


def is_archive(path: Path, head: bytes) -> bool:
    """A tar or zip archive, by name or by its first bytes."""
    name = path.name.lower()
    if name.endswith(ARCHIVE_SUFFIXES):
        return True
    if head.startswith(b"PK\x03\x04"):
        return True
    return len(head) >= 262 and head[257:262] == b"ustar"


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


#: Bytes asked of an archive member at a time.
_COPY_PIECE = 1 << 16
#: What reading a damaged archive raises (truncated stream, corrupt deflate/bzip2/xz data, short tar).
_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, tarfile.ReadError, zipfile.BadZipFile)


class _CutShort(Exception):
    """A member's data broke off; the ``written`` bytes before the break are in its target file."""

    def __init__(self, written: int, cause: BaseException):
        super().__init__(str(cause))
        self.written = written
        self.cause = cause


def _member_reader(tf: tarfile.TarFile, member: tarfile.TarInfo) -> Callable[[int], bytes] | None:
    """``read(n)`` over a regular tar member's bytes that never drops bytes already decompressed.

    ``tarfile.extractfile`` reads through two buffered layers that discard a whole buffer of decoded
    text when the compressed stream ends inside it, so a truncated ``.tar.gz`` lost the readable part
    of the member that was cut. ``read1`` on the archive stream returns what was decoded and raises
    only on a call that decodes nothing. Sparse members keep tarfile's reader (it maps their holes).
    """
    stream = tf.fileobj
    if member.sparse is not None or stream is None or not hasattr(stream, "read1"):
        fh = tf.extractfile(member)
        return None if fh is None else fh.read
    stream.seek(member.offset_data)
    remaining = member.size

    def read(n: int) -> bytes:
        nonlocal remaining
        if remaining <= 0:
            return b""
        chunk = stream.read1(min(n, remaining))
        if not chunk:
            raise EOFError("archive ends inside this member")
        remaining -= len(chunk)
        return chunk

    return read


class Extractor:
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

    def _copy(self, read: Callable[[int], bytes], target: Path, declared: int, compressed: int | None,
              source: str) -> bool:
        """Copy a member's bytes from ``read`` into ``target`` under the size and ratio caps.

        A read that fails (the archive ends or breaks inside this member) leaves every byte read before it
        in ``target`` and raises :class:`_CutShort` with their count: a dying host's archive often holds
        exactly the lines that matter just before the cut.
        """
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
                try:
                    chunk = read(_COPY_PIECE)
                except _READ_ERRORS as exc:
                    self.total_bytes += written
                    raise _CutShort(written, exc) from exc
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

    def admit(self, name: str, kind: str, source: str, link_detail: str = "") -> PurePosixPath | None:
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
                    rel = self.admit(member.name, kind, msource, f"points to {member.linkname}")
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
                    read = _member_reader(tf, member)
                    if read is None:
                        continue
                    try:
                        if self._copy(read, target, member.size, None, msource):
                            extracted += 1
                            os.utime(target, (member.mtime, member.mtime))
                    except _CutShort as cut:
                        os.utime(target, (member.mtime, member.mtime))
                        kept = (f"the first {cut.written} of {member.size} bytes kept" if cut.written
                                else "nothing of it could be read")
                        self._refuse(source, "truncated or corrupt archive",
                                     f"{cut.cause}; {extracted} files recovered whole; {msource} cut short: {kept}")
                        break
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
            except (tarfile.TarError, *_READ_ERRORS) as exc:  # between members: no member's bytes are lost
                self._refuse(source, "truncated or corrupt archive", f"{exc}; {extracted} files recovered")
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
                rel = self.admit(info.filename, kind, msource, "symbolic link")
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
                        ok = self._copy(fh.read, target, info.file_size, info.compress_size, msource)
                except (_CutShort, *_READ_ERRORS, NotImplementedError, RuntimeError) as exc:
                    # RuntimeError: an encrypted member ("password required"). A zip member's CRC is
                    # checked only at its end, so a damaged member is not kept in part.
                    if isinstance(exc, _CutShort):
                        self.total_bytes -= exc.written
                        exc = exc.cause
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
    try:
        return time.mktime(info.date_time + (0, 0, -1))
    except (OverflowError, ValueError):
        return 0.0

