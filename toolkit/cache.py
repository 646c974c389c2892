"""Parse cache: re-running on an unchanged bundle reuses the parsed records.

Each log file gets a key from its content (a SHA-256 of every byte) plus everything that
changes how it parses: its path in the bundle, host, time zone, clock offset and date settings,
the layout catalogue (a user catalogue's files too: :meth:`ParseCache.use_catalogue`) and the toolkit version. Records of all files parsed in one run are written
once, partitioned by key, under ``<cache>/records/cache_key=<key>/``; a small JSON file per key
holds the file's layout and line count. A changed or added file gets a new key and is parsed
alone; the rest is read back from parquet. A file whose lines name their host (``kubectl --prefix``,
docker compose) also depends on the ``bundle.toml`` sections of the hosts it may name: its entry keeps
their identity (:func:`line_hosts_identity`) and is parsed again when that changes. Tables derived from all records of a bundle (events,
config dumps, unknown shapes) and the timeline tables (which also depend on the state evidence) are kept
under ``<cache>/derived/<key>/``, keyed by every file's key and the toolkit's own code, so a second run on an
unchanged bundle copies them instead of classifying and rebuilding the timeline again.

A file's content digest is remembered under ``<cache>/digests/`` with the file's identity (device, inode,
size, modification and status-change times, as ``git`` keeps its index): a re-run on files that were not
touched reads no byte of them before it reads their records.

The cache lives in ``$STREAM_INCIDENT_CACHE`` or ``~/.cache/stream-incident`` and is safe to delete. A run
that reads an entry sets its last use (a file's modification time), by which runs keep the cache within its
size limit and ``stream-incident cache prune`` removes what recent runs did not need (:mod:`toolkit.cache_admin`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from pyspark.sql.types import StructType

from toolkit import __version__
from toolkit.bundle import HostSettings, LogFile
from toolkit.shipped import default_cache_dir

KEY_COLUMN = "cache_key"
#: Spark schemas of a kept set of derived tables (reading them back then needs no job).
SCHEMAS_FILE = "schemas.json"
#: A derived entry of the ``findings`` stage: the detectors' results, pickled (they hold datetimes and figures
#: JSON would turn into strings).
FINDINGS_FILE = "findings.pickle"
#: The empty file that makes a kept set of derived tables usable; written last, removed first.
COMPLETE_MARKER = "complete"
#: Bump when the records a parse produces, or what an entry keeps beside them, change (cached
#: entries become stale). 4: entries keep the file's longest line. 5: content digests are SHA-256.
#: 6: records are partitioned by ``candidate`` (the classifier's gate, which the template catalogue decides).
PARSE_FORMAT = 6
#: A file whose status changed this recently when it was hashed may still change within the same clock
#: tick, unseen by its times: its digest is not remembered (git's "racily clean" entries).
RACY_SECONDS = 2.0


def link_tree(source: Path | str, target: Path | str) -> None:
    """Copy a folder of parquet files by hard links (a copy where links are impossible).

    Spark never rewrites a parquet file in place (overwrite replaces the folder), so a linked file
    cannot change under the cache or under an output folder.
    """
    shutil.copytree(source, target, copy_function=_link_or_copy)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system, or links not allowed
        shutil.copy2(src, dst)


def _catalogue_digest() -> str:
    """Digest of the catalogue's data files: the layouts read the lines, the templates decide which records are
    candidates for classification (``records.parquet``'s partitions)."""
    h = hashlib.blake2b(digest_size=8)
    folder = resources.files("toolkit.catalogue")
    for name in sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".toml")):
        h.update(name.encode() + b"\0" + folder.joinpath(name).read_bytes())
    return h.hexdigest()


def code_files(root: Path) -> list[Path]:
    """The package's code and data files under ``root``, relative and sorted (the sample generator is not used)."""
    found = (p.relative_to(root) for p in root.rglob("*") if p.suffix in (".py", ".toml"))
    return sorted(rel for rel in found if rel.parts[0] != "samples")


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """Digest of the toolkit's code and data files: derived tables are rebuilt after any change to either."""
    root = Path(__file__).resolve().parent
    h = hashlib.blake2b(digest_size=12)
    for rel in code_files(root):
        h.update(str(rel).encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return h.hexdigest()


def content_digest(path: Path) -> str:
    """SHA-256 of the file's bytes: 1.7 GB/s on a core with SHA instructions (most x86 and ARM servers)."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def file_identity(status: os.stat_result) -> str:
    """What changes whenever a file's content may have: device, inode, size, modification and status-change
    times (the last is set by the kernel on every write and cannot be set back)."""
    return f"{status.st_dev}:{status.st_ino}:{status.st_size}:{status.st_mtime_ns}:{status.st_ctime_ns}"


class DigestMemo:
    """Content digests remembered by file identity (:func:`file_identity`), one small JSON file per path."""

    def __init__(self, root: Path):
        self.root = root

    def _entry(self, path: Path) -> Path:
        name = hashlib.blake2b(str(path).encode(), digest_size=12).hexdigest()
        return self.root / f"{name}.json"

    def digest(self, path: Path) -> str:
        """The content digest of ``path``: remembered if the file is untouched since, else read and hashed."""
        path = path.resolve()
        status = path.stat()  # before reading: a write during the hash changes the identity kept with it
        identity, entry = file_identity(status), self._entry(path)
        try:
            kept = json.loads(entry.read_text(encoding="utf-8"))
            if kept["path"] == str(path) and kept["identity"] == identity:
                _mark_used(entry)
                return str(kept["digest"])
        except (OSError, ValueError, KeyError, TypeError):  # none kept yet (or unreadable): hash the file
            pass
        digest = content_digest(path)
        if time.time() - max(status.st_mtime, status.st_ctime) > RACY_SECONDS:
            _write_json(entry, {"path": str(path), "identity": identity, "digest": digest})
        return digest


def remove_path(path: Path) -> None:
    """Delete a file or a folder tree; one already gone is no error."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _publish(kept: Path, fill: Callable[[Path], object]) -> None:
    """Build a derived entry aside (``fill`` writes its files into the folder it is given), mark it complete and
    rename it to ``kept``: readers never see half of it, and the first of two runs keeping the same entry wins."""
    building = kept.with_name(f"{kept.name}.{os.getpid()}.tmp")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    fill(building)
    (building / COMPLETE_MARKER).write_text("")
    if not (kept / COMPLETE_MARKER).is_file():
        shutil.rmtree(kept, ignore_errors=True)  # leftovers of an interrupted older layout
        try:
            building.rename(kept)
            return
        except OSError:  # another run kept the same entry first
            pass
    shutil.rmtree(building, ignore_errors=True)


def _mark_used(marker: Path) -> None:
    """Set ``marker``'s modification time to now: the entry's last use, which ``cache prune`` goes by."""
    try:
        os.utime(marker)
    except OSError:  # pruned meanwhile, or a read-only cache: the entry still answers this run
        pass


def _write_json(target: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` as JSON to ``target`` whole or not at all, even with another run writing it too."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(dict(data), default=str), encoding="utf-8")
    tmp.replace(target)


@dataclass(frozen=True)
class CachedFile:
    """What the cache remembers about one parsed file besides its records."""

    key: str
    source: str
    layout: str | None
    wrappers: tuple[str, ...]
    start_share: float
    lines_read: int
    #: characters in the file's longest line; None when kept by a run that did not measure it
    longest_line: int | None = None
    #: for a file whose lines name their host: :func:`line_hosts_identity` of the settings it was parsed with
    line_hosts: str = ""


def line_hosts_identity(settings: Sequence[tuple]) -> str:
    """Identity of the host sections a file whose lines name their host was parsed with
    (:meth:`toolkit.bundle.Bundle.line_host_settings`); "" when ``bundle.toml`` has none.

    Such a file's records depend on the sections of every host its lines may name, not only on its own
    host's (which :meth:`ParseCache.key_for` covers): its entry is used only while this is unchanged.
    """
    if not settings:
        return ""
    text = "\0".join("|".join(str(v) for v in row) for row in settings)
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


class ParseCache:
    """Parsed records per file content, stored as partitioned parquet."""

    def __init__(self, root: Path | str | None = None, catalogue: str = ""):
        self.root = Path(root) if root else default_cache_dir()
        self.records_dir = self.root / "records"
        self.meta_dir = self.root / "meta"
        self.derived_root = self.root / "derived"
        self.digests = DigestMemo(self.root / "digests")
        self._salt = ""
        self.use_catalogue(catalogue)

    def use_catalogue(self, digest: str) -> None:
        """Key every entry from now on by the user catalogue in use too (its digest, "" for the shipped catalogue
        alone): its layouts read the lines and its templates classify them, so tables kept under another catalogue
        are never read back."""
        self._salt = f"{__version__}|{PARSE_FORMAT}|{_catalogue_digest()}" + (f"|user:{digest}" if digest else "")

    def key_for(self, log: LogFile, settings: HostSettings, redact: bool = True) -> str:
        """Key of one file: its content plus everything that changes how it parses."""
        parts = [self._salt, self.digests.digest(log.local_path), log.source, log.host,
                 settings.timezone, str(settings.clock_offset_ms), settings.date or "",
                 "redacted" if redact else "raw"]
        if settings.date is None:  # time-only layouts borrow the file's date
            parts.append(str(int(log.local_path.stat().st_mtime // 86400)))
        return hashlib.blake2b("\0".join(parts).encode(), digest_size=12).hexdigest()

    def lookup(self, key: str) -> CachedFile | None:
        """The cached metadata of a key, if its records were written completely."""
        meta = self.meta_dir / f"{key}.json"
        if not meta.is_file():
            return None
        try:
            data = json.loads(meta.read_text())
            longest = data.get("longest_line")
            _mark_used(meta)
            return CachedFile(key, data["source"], data["layout"], tuple(data["wrappers"]),
                              float(data["start_share"]), int(data["lines_read"]),
                              int(longest) if longest is not None else None, str(data.get("line_hosts", "")))
        except (ValueError, KeyError, TypeError):
            return None

    def records_path(self, key: str) -> Path:
        return self.records_dir / f"{KEY_COLUMN}={key}"

    def remember(self, entries: list[CachedFile]) -> None:
        """Write metadata after the records are on disk: a key without metadata is never used."""
        for e in entries:
            _write_json(self.meta_dir / f"{e.key}.json",
                        {"source": e.source, "layout": e.layout, "wrappers": list(e.wrappers),
                         "start_share": e.start_share, "lines_read": e.lines_read, "longest_line": e.longest_line,
                         "line_hosts": e.line_hosts, "written": time.time()})

    def derived_dir(self, inputs: Sequence[str], stage: str) -> Path:
        """Where the tables of ``stage`` derived from exactly ``inputs`` (file keys, state digest) are kept.

        The toolkit's code is part of the key, so a changed detector or timeline rule never reads
        tables an older version derived.
        """
        joined = "\0".join([self._salt, stage, code_digest(), *sorted(inputs)])
        return self.derived_root / hashlib.blake2b(joined.encode(), digest_size=12).hexdigest()

    @staticmethod
    def restore_derived(kept: Path, paths: Mapping[str, str]) -> dict[str, StructType] | None:
        """Link the kept tables to ``paths`` (name -> parquet path) and return their schemas.

        None when nothing complete is kept (or it was pruned: the tables are derived again).
        """
        if not (kept / COMPLETE_MARKER).is_file():
            return None
        try:
            saved = json.loads((kept / SCHEMAS_FILE).read_text())
            schemas = {name: StructType.fromJson(saved[name]) for name in paths}
            for name, path in paths.items():
                shutil.rmtree(path, ignore_errors=True)
                link_tree(kept / f"{name}.parquet", path)
        except (OSError, ValueError, KeyError, TypeError):  # pruned by hand, or kept by an older version
            shutil.rmtree(kept, ignore_errors=True)
            return None
        _mark_used(kept / COMPLETE_MARKER)
        return schemas

    @staticmethod
    def store_derived(kept: Path, paths: Mapping[str, str], schemas: Mapping[str, StructType]) -> None:
        """Keep the tables at ``paths`` (as hard links) with their schemas; built aside and renamed,
        so readers never see half of it."""
        def fill(building: Path) -> None:
            for name, path in paths.items():
                link_tree(path, building / f"{name}.parquet")
            (building / SCHEMAS_FILE).write_text(json.dumps({name: schemas[name].jsonValue() for name in paths}))

        _publish(kept, fill)

    @staticmethod
    def restore_findings(kept: Path) -> Any | None:
        """The detectors' results kept under ``kept`` (:meth:`store_findings`), or None."""
        import pickle

        if not (kept / COMPLETE_MARKER).is_file():
            return None
        try:
            # Written by this code version only: the code digest is part of the entry's key (derived_dir).
            value = pickle.loads((kept / FINDINGS_FILE).read_bytes())
        except Exception:  # pruned by hand, cut short, or classes that changed: the detectors run again
            shutil.rmtree(kept, ignore_errors=True)
            return None
        _mark_used(kept / COMPLETE_MARKER)
        return value

    @staticmethod
    def store_findings(kept: Path, value: Any) -> None:
        """Keep the detectors' results under ``kept``; built aside and renamed, as :meth:`store_derived`."""
        import pickle

        _publish(kept, lambda building: (building / FINDINGS_FILE).write_bytes(
            pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)))

    def link_records(self, keys: Sequence[str], target: Path) -> int:
        """Make ``target`` a parquet folder of the cached records of ``keys`` (hard links, no Spark job).

        The cached files hold the record columns only (the key is the folder name) in the folders of the
        ``candidate`` partition, so ``target`` reads as a plain records table. Returns the number of files linked.
        """
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        linked = 0
        for key in keys:
            for part in sorted(self.records_path(key).glob("*=*/*.parquet")):
                folder = target / part.parent.name
                folder.mkdir(exist_ok=True)
                # Files of one Spark write share names across key folders: prefix the key.
                _link_or_copy(str(part), str(folder / f"{key}-{part.name}"))
                linked += 1
        (target / "_SUCCESS").write_text("")
        return linked

    def _problems_path(self, key: str) -> Path:
        return self.meta_dir / f"{key}.problems.json"

    def remember_problems(self, key: str, problems: Sequence[dict]) -> None:
        """Keep the problems found while parsing a file (a gzip recovered on the driver) beside its
        cached records, so a run that reads the records from the cache reports them too."""
        target = self._problems_path(key)
        if not problems:
            target.unlink(missing_ok=True)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(list(problems)), encoding="utf-8")

    def recall_problems(self, key: str) -> list[dict]:
        """The problems kept by :meth:`remember_problems` (none for most files)."""
        try:
            return list(json.loads(self._problems_path(key).read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):  # none kept (the usual case), or unreadable: nothing to add
            return []

    def _accounting_path(self, key: str) -> Path:
        return self.meta_dir / f"{key}.accounting.json"

    def remember_accounting(self, key: str, figures: Mapping[str, Any]) -> None:
        """Keep one file's line-accounting figures (what :func:`toolkit.ingest.summarize` aggregates from its
        records), so a run that reads the records from the cache does not aggregate them again."""
        _write_json(self._accounting_path(key), figures)

    def recall_accounting(self, key: str) -> dict | None:
        """The figures kept by :meth:`remember_accounting`, or None (not kept, or unreadable)."""
        try:
            data = json.loads(self._accounting_path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def key_paths(self, key: str) -> list[Path]:
        """Every file and folder kept for ``key``, its metadata (which makes the rest usable) first."""
        return [self.meta_dir / f"{key}.json", self._problems_path(key), self._accounting_path(key),
                self.records_path(key)]

    def forget(self, key: str) -> None:
        """Remove everything kept for ``key`` (its file is parsed again by the next run that needs it)."""
        for path in self.key_paths(key):
            remove_path(path)
