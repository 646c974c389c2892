"""Discovery: walk a bundle, extract its archives, sort files into logs, evidence and problems."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path, PurePosixPath
from typing import Iterable, Iterator

from toolkit.bundle.archives import Extractor, is_archive
from toolkit.bundle.export_rewrite import convert_exports
from toolkit.bundle.exports import SNIFF_BYTES, PendingExport, sniff_export
from toolkit.bundle.files import (flat_name, host_from_file_name, looks_binary, looks_like_log_name, read_head,
                                  spark_readable)
from toolkit.bundle.gzip_logs import GZIP_MAGIC, read_gzip_head, recover_gzip
from toolkit.bundle.model import (BUNDLE_META_FILES, Bundle, BundleError, EvidenceItem, IngestProblem, Limits,
                                  LogFile)
from toolkit.bundle.settings import attribute_host, host_folder, read_bundle_toml

WORK_MARKER = ".stream-incident-work"
#: The file that marks a folder as a command's output (``--out``), so a bundle that holds it skips it.
OUTPUT_MARKER = ".stream-incident-output"


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



#: The problem row of a folder the toolkit wrote, found inside a bundle and not read as evidence.
OWN_FOLDER_SKIPPED = "skipped: a folder stream-incident wrote, not evidence"


def mark_output_dir(out: Path | str) -> Path:
    """Create the output folder ``out`` (if needed) and mark it as written by this tool.

    A later run over a bundle that holds this folder (``cd BUNDLE && stream-incident report . --out out``)
    skips it instead of reading its reports, tables and logs as evidence.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    marker = out / OUTPUT_MARKER
    if not marker.exists():
        marker.write_text("output of stream-incident; a bundle that holds this folder skips it\n")
    return out


def own_folder(path: Path, this_run: frozenset[Path] = frozenset()) -> str | None:
    """Why the folder ``path`` is the toolkit's own output or scratch space rather than evidence, or None.

    ``this_run``: the resolved output and work folders of the running command. Output folders written
    before the marker existed are known by what every command writes into them: ``ingest.json`` beside
    ``records.parquet``.
    """
    try:
        if path.resolve() in this_run:
            return "this run's output or work folder"
        if (path / OUTPUT_MARKER).exists():
            return f"the output folder of an earlier run (marked {OUTPUT_MARKER})"
        if (path / WORK_MARKER).exists():
            return f"the work folder of an earlier run (marked {WORK_MARKER})"
        if (path / "ingest.json").is_file() and (path / "records.parquet").is_dir():
            return "the output folder of an earlier run (holds ingest.json and records.parquet)"
    except OSError:
        return None
    return None


def _iter_files(root: Path, this_run: frozenset[Path] = frozenset()) -> Iterator[Path | tuple[Path, str]]:
    """Files and candidate state directories below root, in a stable order, without following links.

    A folder the toolkit wrote (:func:`own_folder`) is not walked: it comes out as ``(folder, reason)``.
    """
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        here = Path(dirpath)
        keep = []
        for d in dirnames:
            sub = here / d
            if sub.is_symlink():
                yield sub  # refused with a problem row, never walked
                continue
            if d.endswith(".parquet"):
                continue  # a table written by Spark (ours, or one that has no place among logs)
            reason = own_folder(sub, this_run)
            if reason:
                yield sub, reason
                continue
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


#: Sub-folder names a host keeps for itself although they carry digits and a hyphen: days (``2026-03-07``),
#: versions (``nifi-2.9.0``) and numbered runs (``run-1``, ``restart-2``).
_HOST_OWN_FOLDER = re.compile(r"^\d{4}-\d{2}-\d{2}|\d+\.\d+|^(run|restart|attempt|try)[-_]?\d+$", re.IGNORECASE)


def _named_like_a_pod(name: str) -> bool:
    return bool(host_from_file_name(name)) and not _HOST_OWN_FOLDER.search(name)


def host_containers(base: Path) -> frozenset[str]:
    """The top folders of ``base`` that hold hosts rather than name one: two or more sub-folders named like pods
    or hosts (``orders-agg-0``, ``web-7f9c6d-x2k4q``: letters, digits and a hyphen), each with a file in it.

    A folder itself named like a pod is a host, whatever its sub-folders; a host's own sub-folders (``logs``,
    ``conf``, ``state``, ``current``, ``previous``, days, versions, numbered runs) are not named like pods.
    """
    found = set()
    try:
        tops = [d for d in base.iterdir() if d.is_dir() and not d.is_symlink() and not _named_like_a_pod(d.name)]
    except OSError:
        return frozenset()
    for top in tops:
        try:
            pods = [d for d in top.iterdir() if d.is_dir() and not d.is_symlink() and _named_like_a_pod(d.name)
                    and _holds_a_file(d)]
        except OSError:
            continue
        if len(pods) >= 2:
            found.add(top.name)
    return frozenset(found)


def _holds_a_file(folder: Path) -> bool:
    return any(files for _, _, files in os.walk(folder))


def _work_dir_for(paths: list[Path]) -> Path:
    digest = hashlib.sha1("\0".join(str(p.resolve()) for p in paths).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / "stream-incident-work" / digest


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
    out_dir: Path | str | None = None,
    export_cache: Path | str | None = None,
) -> Bundle:
    """Discover the evidence in a bundle (directory, archive, or loose files).

    ``timezone`` (``--timezone``) is the zone of hosts ``bundle.toml`` gives none: a ``[hosts.NAME]`` or
    ``[defaults]`` timezone wins over it.
    ``out_dir``: the running command's output folder, never read as evidence (nor is ``work_dir``, nor
    any folder an earlier run wrote: :func:`own_folder`); each such folder inside the bundle is a
    problem row that says it was skipped.
    ``export_cache``: where log-platform exports rewritten by earlier runs are kept (the parse cache's
    ``exports`` folder; None: every export is rewritten).
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
                    app_id=meta["app_id"], notes=meta["notes"], limits=limits, inputs=items)
    bundle.problems.extend(meta["problems"])
    extractor = Extractor(limits, bundle.problems)
    this_run = frozenset(p.resolve() for p in (work, Path(out_dir) if out_dir else None) if p is not None)
    for item in items:
        if item.is_dir():
            _walk(bundle, extractor, item, prefix="", inherited_host=None, depth=0,
                  is_root=(item == root), this_run=this_run)
        else:
            _add_file(bundle, extractor, item, PurePosixPath(item.name), prefix="", inherited_host=None, depth=0)
    # Exports are rewritten once all are known: an entry repeated by another export is read once.
    convert_exports(bundle, bundle.pending_exports, Path(export_cache) if export_cache else None)
    bundle.pending_exports.clear()
    return bundle


def _walk(bundle: Bundle, ex: Extractor, base: Path, prefix: str, inherited_host: str | None,
          depth: int, is_root: bool = False, this_run: frozenset[Path] = frozenset()) -> None:
    containers = host_containers(base) if inherited_host is None else frozenset()
    for found in _iter_files(base, this_run):
        if isinstance(found, tuple):
            folder, reason = found
            source = f"{prefix}{folder.relative_to(base).as_posix()}"
            bundle.problems.append(IngestProblem(source, OWN_FOLDER_SKIPPED, reason))
            bundle.skipped_folders.append(source)
            continue
        path = found
        rel = PurePosixPath(path.relative_to(base).as_posix())
        if is_root and len(rel.parts) == 1 and rel.name in BUNDLE_META_FILES:
            continue
        _add_file(bundle, ex, path, rel, prefix, inherited_host, depth, containers)


def _add_file(bundle: Bundle, ex: Extractor, path: Path, rel: PurePosixPath, prefix: str,
              inherited_host: str | None, depth: int, containers: frozenset[str] = frozenset()) -> None:
    source = f"{prefix}{rel.as_posix()}"
    host = attribute_host(rel, bundle.hosts, inherited_host, containers)
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
        head = read_head(path)
    except OSError as exc:
        bundle.problems.append(IngestProblem(source, "unreadable file", exc.strerror or str(exc)))
        return
    kind = _evidence_kind(path)
    if kind:
        bundle.evidence.append(EvidenceItem(source, path, host, kind))
        return
    if is_archive(path, head):
        if depth >= ex.limits.max_depth:
            bundle.problems.append(IngestProblem(source, "archive nested too deeply", f"depth limit {ex.limits.max_depth}"))
            return
        dest = bundle.work_dir / "extracted" / flat_name(source)
        dest.mkdir(parents=True, exist_ok=True)
        if head.startswith(b"PK\x03\x04") or path.name.lower().endswith(".zip"):
            ex.extract_zip(path, dest, source)
        else:
            ex.extract_tar(path, dest, source)
        # Members of an archive that sits in a host folder belong to that host.
        member_host = host if inherited_host else host_folder(rel, bundle.hosts, containers)
        _walk(bundle, ex, dest, prefix=f"{source}!/", inherited_host=member_host, depth=depth + 1)
        return
    if head.startswith(GZIP_MAGIC):
        _add_gzip(bundle, LogFile(source, path, host, size, gzip=True))
        return
    if size == 0:
        bundle.problems.append(IngestProblem(source, "empty file", ""))
        bundle.logs.append(LogFile(source, path, host, 0))
        return
    if looks_binary(head):
        bundle.problems.append(IngestProblem(source, "binary content, not read as a log", f"{size} bytes"))
        return
    if _may_be_export(head):
        fmt = sniff_export(read_head(path, SNIFF_BYTES))
        if fmt is not None:
            bundle.pending_exports.append(PendingExport(source, path, host, size, fmt))
            return
    bundle.logs.append(LogFile(source, spark_readable(bundle.work_dir, path, source), host, size))


def _may_be_export(head: bytes) -> bool:
    """Whether a text file's start could be a log-platform export (JSON, or a CSV header): most logs are not."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:1] == b"{" or (text[:1] == b"[" and text[1:].lstrip()[:1] in (b"{", b"]")):
        return True  # a JSON object or an array of objects (not Kafka's "[2024-03-07 ...]" head)
    first = head.split(b"\n", 1)[0]
    if first.startswith((b"Common labels: ", b"Line limit: ")):  # Grafana's text download
        return True
    return b"," in first and not first[:1].isdigit()


def _add_gzip(bundle: Bundle, log: LogFile) -> None:
    """A gzip log: Spark reads it as it is, unless its start already shows damage or a bomb."""
    checked = read_gzip_head(log.local_path, bundle.limits)
    if checked.damage or checked.bomb_like:
        recovered = recover_gzip(bundle, log)
        if recovered is not None:
            bundle.logs.append(recovered)
        return
    if checked.complete and not checked.head:  # a valid gzip of nothing: say so rather than drop it silently
        bundle.problems.append(IngestProblem(log.source, "empty file", "empty after gunzip"))
        return
    if looks_binary(checked.head[:8192]):
        bundle.problems.append(IngestProblem(log.source, "binary content, not read as a log", "after gunzip"))
        return
    if _may_be_export(checked.head):
        fmt = sniff_export(read_gzip_head(log.local_path, bundle.limits, SNIFF_BYTES).head)
        if fmt is not None:
            bundle.pending_exports.append(PendingExport(log.source, log.local_path, log.host, log.size, fmt, gzip=True))
            return
    readable = spark_readable(bundle.work_dir, log.local_path, log.source, gzip=True)
    bundle.logs.append(LogFile(log.source, readable, log.host, log.size, gzip=True))


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "named pipe (FIFO)"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"


