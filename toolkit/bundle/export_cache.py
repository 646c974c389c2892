"""Rewritten exports kept between runs: a re-run on the same exports links the runtime JSON logs an earlier run
wrote instead of reading, ordering and writing gigabytes again.

One entry per set of exports of one format (an export's rewrite depends on the files of its format read before
it: their repeated entries are dropped), under ``<cache>/exports/<key>/``: the rewritten files in the work
folder's layout, ``manifest.json`` (per export: its problem rows, the hosts written and their entry counts) and
the ``complete`` marker written last, whose modification time is the entry's last use (``stream-incident cache``
lists, prunes and trims these entries with the rest of the parse cache). The key is every export's content
digest, path, host and format, the bundle's host settings (zones) and the code that rewrites; the cache is an
optimisation only: anything it cannot read or write is done afresh.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

from toolkit import __version__
from toolkit.bundle.exports import ENTRIES_SUFFIX, PendingExport
from toolkit.bundle.files import flat_name
from toolkit.bundle.model import Bundle

#: The cache's sub-folder for rewritten exports.
CACHE_FOLDER = "exports"
MANIFEST = "manifest.json"
COMPLETE = "complete"
#: Bump when the rewritten files or the manifest change for the same input.
REWRITE_FORMAT = 1


@dataclass
class FileResult:
    """What rewriting one export gave: its problem rows, and the hosts written (else it is read as a plain log)."""

    source: str
    problems: list[tuple[str, str]] = field(default_factory=list)
    #: (host, entries kept) per rewritten file, by host
    hosts: list[tuple[str, int]] = field(default_factory=list)
    plain: bool = False
    #: characters of JSON document the driver read (the bundle's budget for them)
    document_chars: int = 0
    #: False when the result may not hold next time (the file could not be read from disk): never kept
    lasting: bool = True


def host_file_name(host: str) -> str:
    """The rewritten log's file name for ``host`` (its table of entry numbers: :func:`entries_file_name`)."""
    return (re.sub(r"[^A-Za-z0-9._-]+", "_", host)[:120] or "host") + ".log"


def entries_file_name(host: str) -> str:
    """The file name of the table of entry numbers beside ``host``'s rewritten log."""
    return host_file_name(host).removesuffix(".log") + ENTRIES_SUFFIX


def export_folder(root: Path, source: str) -> Path:
    """Where an export's rewritten files are kept under ``root`` (the work folder's or a cache entry's)."""
    return root / flat_name(source)


def _code_digest() -> str:
    digest = hashlib.sha256(f"{__version__}|{REWRITE_FORMAT}".encode())
    for module in ("exports.py", "export_rewrite.py", "export_cache.py"):
        digest.update((Path(__file__).parent / module).read_bytes())
    digest.update(resources.files("toolkit.catalogue").joinpath("exports.toml").read_bytes())
    return digest.hexdigest()


def _content_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def group_keys(bundle: Bundle, groups: dict[str, list[PendingExport]]) -> dict[str, str | None]:
    """The cache key of each format's exports (in the order they are read); None when a file cannot be read.

    JSON documents share one budget of characters the driver reads (the JSON evidence limits), so whether one is
    read depends on the others: every JSON-document export of the bundle is part of their keys."""
    base = [_code_digest(), repr(bundle.defaults), repr(sorted(bundle.hosts.items()))]
    digests: dict[str, str | None] = {}
    for items in groups.values():
        for item in items:
            try:
                digests[item.source] = _content_digest(item.path)
            except OSError:
                digests[item.source] = None
    documents = [p for p in (i for items in groups.values() for i in items) if p.format.container == "json-document"]
    shared = [f"{p.source}={digests[p.source]}" for p in sorted(documents, key=lambda p: p.source)]
    keys: dict[str, str | None] = {}
    for fmt_id, items in groups.items():
        if any(digests[item.source] is None for item in items):
            keys[fmt_id] = None
            continue
        parts = base + (shared if items[0].format.container == "json-document" else [])
        for item in items:
            parts += [item.source, item.host, item.format.id, str(item.gzip), digests[item.source] or ""]
        keys[fmt_id] = hashlib.blake2b("\0".join(parts).encode(), digest_size=16).hexdigest()
    return keys


def restore(cache_dir: Path, key: str, exports_dir: Path) -> dict[str, FileResult] | None:
    """Link a kept entry's rewritten files into ``exports_dir`` and return its results; None when there is none
    (or it cannot be used)."""
    entry = cache_dir / key
    marker = entry / COMPLETE
    if not marker.is_file():
        return None
    linked: list[Path] = []
    try:
        manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
        results = {r["source"]: FileResult(r["source"], [tuple(p) for p in r["problems"]],
                                           [(h, int(n)) for h, n in r["hosts"]], bool(r["plain"]),
                                           int(r["document_chars"])) for r in manifest["files"]}
        for result in results.values():
            for name in _file_names(result):
                target = export_folder(exports_dir, result.source) / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.unlink(missing_ok=True)
                _link_or_copy(export_folder(entry, result.source) / name, target)
                linked.append(target)
        os.utime(marker)  # its last use, which pruning goes by
    except (OSError, ValueError, KeyError, TypeError):
        for path in linked:
            path.unlink(missing_ok=True)
        return None
    return results


def store(cache_dir: Path, key: str, results: list[FileResult], exports_dir: Path) -> None:
    """Keep one format's rewritten exports under ``key`` (best effort: a full disk leaves no entry)."""
    entry = cache_dir / key
    if (entry / COMPLETE).is_file() or not all(r.lasting for r in results):
        return
    building = cache_dir / f"{key}.{os.getpid()}.tmp"
    try:
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(parents=True)
        for result in results:
            for name in _file_names(result):
                target = export_folder(building, result.source) / name
                target.parent.mkdir(parents=True, exist_ok=True)
                _link_or_copy(export_folder(exports_dir, result.source) / name, target)
        (building / MANIFEST).write_text(json.dumps({"files": [asdict(r) for r in results]}), encoding="utf-8")
        # Complete before it is published: a folder without the marker is only ever a leftover.
        (building / COMPLETE).touch()
        if entry.exists() and not (entry / COMPLETE).is_file():
            stale = cache_dir / f"{key}.{os.getpid()}.stale.tmp"
            os.replace(entry, stale)  # out of the way at once, then deleted
            shutil.rmtree(stale, ignore_errors=True)
        os.replace(building, entry)  # fails when another run kept the same entry meanwhile: theirs stays
    except OSError:
        shutil.rmtree(building, ignore_errors=True)


def _file_names(result: FileResult) -> list[str]:
    return [name for host, _ in result.hosts for name in (host_file_name(host), entries_file_name(host))]


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or links not allowed
        shutil.copyfile(source, target)


__all__ = ["CACHE_FOLDER", "FileResult", "entries_file_name", "export_folder", "group_keys", "host_file_name",
           "restore", "store"]
