"""What the parse cache holds, pruning it (``stream-incident cache info | prune | clear``), and the size limit
runs keep it within.

The cache (:mod:`toolkit.cache`) grows with every run: every new or changed log file adds its records,
every bundle its derived tables, and a new toolkit version keys everything afresh. Its entries are:

* **records**: one log file's parsed records (``records/cache_key=K/``) with the small JSON files under
  ``meta/`` that describe them; a records folder without its ``meta/K.json`` is the leftover of an
  interrupted run and is never read;
* **derived**: the events or timeline tables of one set of files (``derived/D/``; a ``.tmp`` folder is
  one being built, or the leftover of a run that stopped while building it);
* **digest**: one remembered content digest (``digests/``), a few hundred bytes;
* **exports**: the log-platform exports of one format rewritten as runtime logs (``exports/E/``,
  :mod:`toolkit.bundle.export_cache`; a ``.tmp`` folder is one being kept, or a leftover).

Each entry's last use is a file's modification time, set again whenever a run reads the entry, so pruning
by age or size keeps what recent runs used. Removing any entry is safe: a later run parses or derives
again what it misses. Prune by hand while no analysis is using the same cache: a run that has just looked up
an entry would then parse its file again, or fail to read records removed under it.

A run also keeps the cache within a size limit by itself (:func:`trim_if_due`, ``$STREAM_INCIDENT_CACHE_MAX_SIZE``,
10 GB unless set): at most once an hour, at the end of its parse or analysis, it removes the least recently used
entries until the rest fits, never one that a run used within the last hour (a run links what it reads into its
own output folder within seconds of looking it up, so nothing another run still needs is removed under it).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import humanfriendly

from toolkit.bundle.export_cache import CACHE_FOLDER as EXPORTS_FOLDER
from toolkit.bundle.export_cache import COMPLETE as EXPORTS_COMPLETE
from toolkit.cache import COMPLETE_MARKER, KEY_COLUMN, ParseCache, remove_path

KINDS = ("records", "derived", "digest", "exports")
#: The size a run keeps the cache within (a size such as ``20GB``, or ``none`` to let it grow).
MAX_SIZE_ENV = "STREAM_INCIDENT_CACHE_MAX_SIZE"
DEFAULT_MAX_SIZE = "10GB"
#: A run trims the cache at most this often: listing the entries walks every file of the cache.
TRIM_INTERVAL_S = 3600.0
#: Entries used this recently are never trimmed (another run may be about to read them).
TRIM_GRACE_S = 3600.0
#: File in the cache's root whose modification time is the last trim.
TRIM_STAMP = "last-trim"


@dataclass(frozen=True)
class CacheEntry:
    """One removable unit of the parse cache."""

    kind: str
    name: str
    #: files and folders that make up the entry, the one that says it is usable first
    paths: tuple[Path, ...]
    bytes: int
    #: seconds since the epoch of the entry's last use (its last write, for one never read since)
    last_used: float
    #: False for leftovers of an interrupted run (records without their metadata, a half-built table set)
    complete: bool = True


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _existing(paths: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(p for p in paths if p.exists())


def entries(cache: ParseCache) -> list[CacheEntry]:
    """Every entry of ``cache``, least recently used first."""
    found: list[CacheEntry] = []
    metas = {p.name[:-len(".json")] for p in cache.meta_dir.glob("*.json")
             if p.name.count(".") == 1} if cache.meta_dir.is_dir() else set()
    folders = {p.name.split("=", 1)[1]: p for p in cache.records_dir.glob(f"{KEY_COLUMN}=*")} \
        if cache.records_dir.is_dir() else {}
    for key in sorted(metas | set(folders)):
        meta = cache.meta_dir / f"{key}.json"
        paths = _existing(cache.key_paths(key))
        found.append(CacheEntry("records", key, paths, sum(_size(p) for p in paths),
                                _mtime(meta) if key in metas else max(map(_mtime, paths), default=0.0),
                                complete=key in metas and key in folders))
    if cache.records_dir.is_dir():  # a Spark write's staging folder, left by a run that stopped while writing
        for staging in cache.records_dir.glob("_temporary"):
            found.append(CacheEntry("records", staging.name, (staging,), _size(staging), _mtime(staging), False))
    derived = cache.derived_root
    for folder in sorted(derived.iterdir()) if derived.is_dir() else []:
        marker = folder / COMPLETE_MARKER
        complete = marker.is_file() and not folder.name.endswith(".tmp")
        found.append(CacheEntry("derived", folder.name, (marker, folder) if complete else (folder,), _size(folder),
                                _mtime(marker) if complete else _mtime(folder), complete))
    rewritten = cache.root / EXPORTS_FOLDER
    for folder in sorted(rewritten.iterdir()) if rewritten.is_dir() else []:
        marker = folder / EXPORTS_COMPLETE
        complete = marker.is_file() and not folder.name.endswith(".tmp")
        found.append(CacheEntry("exports", folder.name, (marker, folder) if complete else (folder,), _size(folder),
                                _mtime(marker) if complete else _mtime(folder), complete))
    digests = cache.digests.root
    for memo in sorted(digests.glob("*.json")) if digests.is_dir() else []:
        found.append(CacheEntry("digest", memo.stem, (memo,), _size(memo), _mtime(memo)))
    return sorted(found, key=lambda e: (e.last_used, e.kind, e.name))


def choose(found: list[CacheEntry], *, older_than_s: float | None = None, max_bytes: int | None = None,
           now: float | None = None) -> list[CacheEntry]:
    """The entries to remove: those unused for more than ``older_than_s`` seconds, then, least recently
    used first, as many as bring the rest to at most ``max_bytes``. ``found`` is sorted as :func:`entries`
    returns it."""
    now = time.time() if now is None else now
    chosen = [e for e in found if older_than_s is not None and now - e.last_used > older_than_s]
    if max_bytes is not None:
        taken = {id(e) for e in chosen}
        left = sum(e.bytes for e in found) - sum(e.bytes for e in chosen)
        for entry in found:
            if left <= max_bytes:
                break
            if id(entry) not in taken:
                chosen.append(entry)
                left -= entry.bytes
    return chosen


def remove(entry: CacheEntry) -> None:
    """Delete one entry, the file that makes it usable first, so an interrupted removal leaves a leftover
    no run reads, never a usable entry with missing parts."""
    for path in entry.paths:
        remove_path(path)


def prune(cache: ParseCache, *, older_than_s: float | None = None, max_bytes: int | None = None,
          dry_run: bool = False) -> list[CacheEntry]:
    """Remove (or with ``dry_run`` only choose) entries as :func:`choose` picks them; returns them."""
    chosen = choose(entries(cache), older_than_s=older_than_s, max_bytes=max_bytes)
    if not dry_run:
        for entry in chosen:
            remove(entry)
    return chosen


def size_limit() -> int | None:
    """The size a run keeps the cache within (``$STREAM_INCIDENT_CACHE_MAX_SIZE``, else 10 GB), or None when
    set to ``none``. Raises ValueError, saying what was expected, for a value that is not a size."""
    text = os.environ.get(MAX_SIZE_ENV, "").strip() or DEFAULT_MAX_SIZE
    if text.lower() == "none":
        return None
    try:
        return parse_size(text)
    except argparse.ArgumentTypeError:
        raise ValueError(f"${MAX_SIZE_ENV}={text!r} is not a size such as 20GB or 8GiB (or none)") from None


def trim(cache: ParseCache, max_bytes: int, *, grace_s: float = TRIM_GRACE_S,
         now: float | None = None) -> list[CacheEntry]:
    """Remove the least recently used entries until the cache holds at most ``max_bytes``, sparing those
    used within ``grace_s`` seconds (so the cache may stay above the limit); returns what was removed."""
    now = time.time() if now is None else now
    found = entries(cache)
    old = [e for e in found if now - e.last_used > grace_s]
    recent_bytes = sum(e.bytes for e in found) - sum(e.bytes for e in old)
    chosen = choose(old, max_bytes=max(max_bytes - recent_bytes, 0), now=now)
    for entry in chosen:
        remove(entry)
    return chosen


def trim_if_due(cache: ParseCache, progress: Callable[[str], None] | None = None,
                now: float | None = None) -> list[CacheEntry]:
    """Trim ``cache`` to :func:`size_limit` if no run did within the last hour; what a run calls after
    writing to the cache. Never fails the run: a bad setting or an unwritable cache is said and skipped."""
    say = progress or (lambda _m: None)
    now = time.time() if now is None else now
    stamp = cache.root / TRIM_STAMP
    if not cache.root.is_dir() or now - _mtime(stamp) < TRIM_INTERVAL_S:
        return []
    try:
        limit = size_limit()
    except ValueError as problem:
        say(f"{problem}; the parse cache is not trimmed")
        return []
    if limit is None:
        return []
    try:
        stamp.touch()
        os.utime(stamp, (now, now))
        gone = trim(cache, limit, now=now)
    except OSError as problem:  # a read-only or vanished cache: this run's results do not depend on it
        say(f"the parse cache at {cache.root} could not be trimmed: {problem}")
        return []
    if gone:
        say(f"parse cache above {humanfriendly.format_size(limit)} (${MAX_SIZE_ENV}): removed {len(gone)} "
            f"entries no run used within the last hour, {_total_size(gone)}")
    return gone


# --- the command -------------------------------------------------------------------------------------

def parse_duration(text: str) -> float:
    """Seconds in ``30d``, ``12h``, ``90m``, ``45s`` or ``2w``. A bare number is refused: days or seconds,
    a reader cannot tell."""
    if text.strip()[-1:].isalpha():
        try:
            return humanfriendly.parse_timespan(text)
        except humanfriendly.InvalidTimespan:
            pass
    raise argparse.ArgumentTypeError(f"{text!r} is not a duration with its unit, such as 30d, 12h or 90m")


def parse_size(text: str) -> int:
    """Bytes in ``20GB``, ``500M``, ``1.5T`` (powers of 1000) or ``8GiB`` (powers of 1024); a bare number is bytes."""
    try:
        return humanfriendly.parse_size(text)
    except humanfriendly.InvalidSize:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 20GB, 500MB or 8GiB") from None


def _total_size(found: Iterable[CacheEntry]) -> str:
    return humanfriendly.format_size(sum(e.bytes for e in found))


def _age(seconds: float) -> str:
    return humanfriendly.format_timespan(round(max(seconds, 0)), max_units=1)


def summary(cache: ParseCache, found: list[CacheEntry], now: float | None = None) -> str:
    """What ``cache info`` prints: the location, then per kind the entries, their size and oldest use."""
    now = time.time() if now is None else now
    lines = [f"parse cache at {cache.root}" + ("" if cache.root.exists() else " (empty: nothing written yet)")]
    for kind in KINDS:
        mine = [e for e in found if e.kind == kind]
        leftovers = sum(1 for e in mine if not e.complete)
        oldest = f", oldest use {_age(now - min(e.last_used for e in mine))} ago" if mine else ""
        extra = f" ({leftovers} left by interrupted runs)" if leftovers else ""
        lines.append(f"  {kind:8} {len(mine):6} entries {_total_size(mine):>10}{oldest}{extra}")
    lines.append(f"  {'total':8} {len(found):6} entries {_total_size(found):>10}")
    try:
        limit = size_limit()
        lines.append(f"runs keep it within {humanfriendly.format_size(limit)} (${MAX_SIZE_ENV})" if limit is not None
                     else f"runs let it grow (${MAX_SIZE_ENV}=none)")
    except ValueError as problem:
        lines.append(f"runs let it grow: {problem}")
    return "\n".join(lines)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add the ``cache`` arguments to ``parser`` (a sub-parser of ``stream-incident``) and return it."""
    p = parser or argparse.ArgumentParser(prog="stream-incident cache")
    p.description = ("Show what the parse cache holds, or remove what recent runs did not use. "
                     "Anything removed is parsed or derived again when a run needs it.")
    p.add_argument("action", nargs="?", choices=("info", "prune", "clear"), default="info",
                   help="info (the default): size and age by kind; prune: remove by --older-than and/or "
                        "--max-size; clear: remove every entry")
    p.add_argument("--cache-dir", help="parse cache location (default: $STREAM_INCIDENT_CACHE or ~/.cache/stream-incident)")
    p.add_argument("--older-than", type=parse_duration, metavar="AGE",
                   help="prune: remove entries no run used for longer than AGE (30d, 12h, 90m, 2w)")
    p.add_argument("--max-size", type=parse_size, metavar="SIZE",
                   help="prune: then remove the least recently used entries until the rest fits in SIZE (20GB, 8GiB)")
    p.add_argument("--dry-run", action="store_true", help="prune, clear: say what would go, remove nothing")
    return p


def run(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    """Run ``cache ACTION``: 0 done, 2 ``prune`` without a rule (or a rule given to another action)."""
    cache = ParseCache(Path(args.cache_dir).expanduser() if args.cache_dir else None)
    if args.action != "prune" and (args.older_than is not None or args.max_size is not None):
        print(f"stream-incident: --older-than and --max-size go with cache prune, not cache {args.action}",
              file=sys.stderr)
        return 2
    if args.action == "info":
        out(summary(cache, entries(cache)))
        return 0
    if args.action == "prune" and args.older_than is None and args.max_size is None:
        print("stream-incident: cache prune needs --older-than AGE, --max-size SIZE or both", file=sys.stderr)
        return 2
    rules = {"older_than_s": args.older_than, "max_bytes": args.max_size} if args.action == "prune" \
        else {"max_bytes": 0}
    gone = prune(cache, dry_run=args.dry_run, **rules)
    verb = "would remove" if args.dry_run else "removed"
    out(f"{verb} {len(gone)} entries, {_total_size(gone)}")
    out(summary(cache, entries(cache)))
    return 0
