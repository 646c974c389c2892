"""Rewrite recognised log-platform exports (``toolkit.bundle.exports``) as runtime JSON log files, one per host,
in bounded driver memory.

An export can be larger than the driver's memory, is often newest first, and overlaps other exports of the
same platform. Each file is read once as a stream and spilled in its own order to a scratch file; then sorted
in runs of at most :data:`RUN_BYTES` of text; then the runs of every file of one format are merged per host
(in passes when there are many), so an entry another file of that format already held (same host, instant and
text) is dropped as it passes, and each kept entry is written to its file's host log. Memory holds one run, a
batch of each run being merged and the entries of one host and instant; a file that alternates entries with
and without an instant also keeps a small record per stretch without one.

The order: per host by the platform's instant, then by the shipper's own tie-break number, then by the file's
order (backwards for ties when the file runs newest first, unless the platform keeps ties as they came). An
entry without an instant stays beside its neighbour in the order the file is read. Both the direction and the
neighbour are the file's as read, duplicates included: what an earlier export also held does not change them.
"""

from __future__ import annotations

import csv
import heapq
import io
import json
import pickle
import re
from array import array
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from tempfile import TemporaryDirectory
from zoneinfo import ZoneInfo

from toolkit.bundle import export_cache
from toolkit.bundle.export_cache import FileResult, entries_file_name, export_folder, host_file_name
from toolkit.bundle.exports import (MAX_DOCUMENT_TOTAL_BYTES, DocumentTooLarge, Entry, PendingExport, Tally,
                                    instant_of, read_entries)
from toolkit.bundle.model import Bundle, IngestProblem, LogFile

#: Characters of entry text one sorted run holds in memory (a Python string costs about its length again in
#: overhead, so a run is about twice this in the driver).
RUN_BYTES = 64 << 20
#: Entry numbers collected before a batch of the entries table is written.
_NUMBER_BATCH = 1 << 20
#: Writers with their files open at once, and runs a merge reads at once (each is a file handle; a format may
#: have a thousand exports, one per log stream or hour).
_OPEN_WRITERS = 64
_MERGE_FAN_IN = 64
#: How many entries rendered without a zone vote on the zone they were rendered in.
_ZONE_VOTERS = 5000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
#: A JSON string as ``json.dumps(..., ensure_ascii=False)`` writes it.
_json_string = json.encoder.encode_basestring
_EPOCH_NAIVE = datetime(1970, 1, 1)
_MICRO = timedelta(microseconds=1)
#: The sort instant of an entry with no instant and no neighbour that has one: before everything.
_FIRST = -(1 << 62)

#: A line's own date and time at its head (Kafka's [yyyy-MM-dd HH:mm:ss,SSS], logback, ISO 8601), to tell the zone
#: an export rendered its stamps in.
_LINE_STAMP = re.compile(r"^\[?(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
                         r"(Z|[+-]\d{2}:?\d{2})?")


def _micros(instant: datetime) -> int:
    """Microseconds since the epoch; a naive instant is counted as printed (its zone is decided later)."""
    return (instant - (_EPOCH_NAIVE if instant.tzinfo is None else _EPOCH)) // _MICRO


def _stamp(micros: int) -> str:
    """As docker's json-file driver writes ``time`` (to microseconds, ``Z``)."""
    return (_EPOCH_NAIVE + micros * _MICRO).isoformat(timespec="microseconds") + "Z"


# ---------------------------------------------------------------------------------------------- one file's read


@dataclass
class _HostCarry:
    """Per host while a file is read: what an entry without an instant needs to be placed."""

    entries: int = 0
    stamped: int = 0
    last: tuple[int, bool] | None = None
    #: instants of the k-th stamped entry that an unstamped entry before it will sort by if the file runs backwards
    wanted: dict[int, tuple[int, bool] | None] = field(default_factory=dict)


@dataclass
class _Spill:
    """One export file read to its scratch file, with what ordering it needs."""

    index: int
    item: PendingExport
    tally: Tally
    raw: Path
    total: int = 0
    #: the file's first and last (host, instant) that has an instant, which tell whether it runs newest first
    first: tuple[str, tuple[int, bool]] | None = None
    last: tuple[str, tuple[int, bool]] | None = None
    backwards: bool = False
    hosts: dict[str, _HostCarry] = field(default_factory=dict)
    #: the rendering zone's offset from UTC in seconds, when the lines' own stamps agree on one
    naive_shift: int | None = None
    runs: list[Path] = field(default_factory=list)
    #: characters of JSON document read (the bundle's budget for them)
    document_chars: int = 0
    #: kept entries per host, and the hosts whose rewritten files the merge wrote
    kept: Counter = field(default_factory=Counter)
    written: set[str] = field(default_factory=set)


def _read(spill: _Spill, budget: list[int], zone_of: Callable[[str], ZoneInfo]) -> None:
    """Stream one export's entries to its scratch file in file order, noting per host what ordering needs."""
    item = spill.item
    votes: Counter = Counter()
    voters = 0
    with _Spilling(spill.raw) as out:
        for entry in read_entries(item.format, item, spill.tally, budget):
            host = entry.host or item.host
            carry = spill.hosts.setdefault(host, _HostCarry())
            shipped = None
            if entry.shipped is not None:
                shipped = (_micros(entry.shipped), entry.shipped.tzinfo is None)
                spill.first = spill.first or (host, shipped)
                spill.last = (host, shipped)
                carry.stamped += 1
                if carry.stamped in carry.wanted:
                    carry.wanted[carry.stamped] = shipped
                if shipped[1] and voters < _ZONE_VOTERS:
                    voters += 1
                    _vote(votes, entry, zone_of(host))
                carry.last = shipped
            else:
                carry.wanted.setdefault(carry.stamped + 1, None)
            # host, entry number, own instant, the host's position, instant before it, stamped entries before it
            out.add((host, entry.number, shipped, carry.entries, carry.last if shipped is None else None,
                     carry.stamped, entry.tie, entry.text))
            carry.entries += 1
            spill.total += 1
    if votes:
        offset, count = votes.most_common(1)[0]
        if count * 2 > sum(votes.values()):
            spill.naive_shift = offset


def _vote(votes: Counter, entry: Entry, zone: ZoneInfo) -> None:
    """A stamp rendered without a zone (Kibana renders in the viewer's browser zone) against the line's own dated
    stamp: a line is shipped within moments of being printed, so the difference, to the quarter hour, is the
    rendering zone's offset."""
    m = _LINE_STAMP.match(entry.text)
    if m is None:
        return
    *parts, fraction, offset = m.groups()
    printed = instant_of(tuple(int(p) for p in parts), fraction, offset, zone)
    if printed is None:
        return
    shift = (entry.shipped - printed.replace(tzinfo=None)).total_seconds()
    votes[round(shift / 900) * 900] += 1


def _resolver(spill: _Spill, zone_of: Callable[[str], ZoneInfo]) -> Callable[[str, tuple[int, bool]], int]:
    """Microseconds since the epoch (UTC) of a spilled instant: a zone-less one by the voted offset, else in the
    host's zone from ``bundle.toml``."""
    def resolve(host: str, shipped: tuple[int, bool]) -> int:
        micros, naive = shipped
        if not naive:
            return micros
        if spill.naive_shift is not None:
            return micros - spill.naive_shift * 1_000_000
        printed = (_EPOCH_NAIVE + micros * _MICRO).replace(tzinfo=zone_of(host))
        return _micros(printed.astimezone(timezone.utc))
    return resolve


class _Spilling:
    """Records written to a scratch file in batches, each batch its own pickle (one long pickle stream would keep
    every record it read in the reader's memo)."""

    #: records, and characters of text, a batch: a merge holds one batch of every run it reads
    BATCH = 512
    BATCH_TEXT = 1 << 20

    def __init__(self, path: Path) -> None:
        self._out = path.open("wb")
        self._batch: list[tuple] = []
        self._held = 0

    def add(self, record: tuple) -> None:
        self._batch.append(record)
        self._held += len(record[-1])
        if len(self._batch) >= self.BATCH or self._held >= self.BATCH_TEXT:
            self._flush()

    def _flush(self) -> None:
        if self._batch:
            pickle.dump(self._batch, self._out, protocol=pickle.HIGHEST_PROTOCOL)
            self._batch, self._held = [], 0

    def __enter__(self) -> _Spilling:
        return self

    def __exit__(self, *exc: object) -> None:
        self._flush()
        self._out.close()


def _records(path: Path) -> Iterator[tuple]:
    with path.open("rb") as stream:
        while True:
            try:
                batch = pickle.load(stream)
            except EOFError:
                return
            yield from batch


def _sort_runs(spill: _Spill, scratch: Path, zone_of: Callable[[str], ZoneInfo]) -> None:
    """Sort the scratch file into runs ordered by (host, instant, tie, position)."""
    resolve = _resolver(spill, zone_of)
    # The file as read, duplicates and all: its direction is the file's, whatever an earlier file also held.
    spill.backwards = (spill.first is not None and spill.last is not None
                       and resolve(*spill.first) > resolve(*spill.last))
    reverse_ties = spill.backwards and not spill.item.format.ties_in_file_order
    run: list[tuple] = []
    held = 0
    for host, number, shipped, position, before, stamped_before, tie, text in _records(spill.raw):
        own = resolve(host, shipped) if shipped is not None else None
        if own is not None:
            at = own
        else:  # beside the entry before it in the order the file is read (backwards: the one after it)
            neighbour = spill.hosts[host].wanted.get(stamped_before + 1) if spill.backwards else before
            at = resolve(host, neighbour) if neighbour is not None else _FIRST
        run.append((host, at, tie if tie is not None else 0, -position if reverse_ties else position, number, own,
                    text))
        held += len(text) + 64
        if held >= RUN_BYTES:
            spill.runs.append(_write_run(run, scratch / f"{spill.index}-{len(spill.runs)}.run"))
            run, held = [], 0
    if run or not spill.runs:
        spill.runs.append(_write_run(run, scratch / f"{spill.index}-{len(spill.runs)}.run"))
    spill.raw.unlink()


def _write_run(run: list[tuple], path: Path) -> Path:
    run.sort(key=lambda r: r[:4])
    with _Spilling(path) as out:
        for record in run:
            out.add(record)
    return path


# ---------------------------------------------------------------------------------------------- the merge


class _HostWriter:
    """One host's rewritten file of one export and its table of entry numbers, written as entries arrive.

    A format's exports may be many (a dump per log stream or per hour), so a writer can be suspended (its files
    closed) and resumed: the log is appended to, and the entry numbers go to a binary scratch file that becomes
    the parquet table when the writer is closed."""

    def __init__(self, path: Path, entries_path: Path, source: str) -> None:
        self.path, self.entries_path, self.source = path, entries_path, source
        self._numbers_path = entries_path.with_name(entries_path.name + ".numbers")
        for old in (path, entries_path, self._numbers_path):  # never write through a link to a kept copy
            old.unlink(missing_ok=True)
        self._out: io.TextIOBase | None = None
        self._numbers = array("q")

    def write(self, number: int, shipped: int | None, text: str) -> None:
        """Write one entry as runtime JSON lines, one per printed line."""
        if self._out is None:
            # A line that cannot be encoded (a lone surrogate a JSON escape made) is written escaped.
            self._out = self.path.open("a", encoding="utf-8", errors="backslashreplace", newline="\n")
        # {"log": line, "stream": "stdout", "time": shipped, "entry": number} as compact JSON, built by hand: this
        # runs once per line of a multi-GB export
        tail = (f',"stream":"stdout","time":"{_stamp(shipped)}","entry":{number}}}\n' if shipped is not None
                else f',"stream":"stdout","entry":{number}}}\n')
        for line in text.replace("\r\n", "\n").split("\n"):
            self._out.write('{"log":' + _json_string(line + "\n") + tail)
            self._numbers.append(number)
        if len(self._numbers) >= _NUMBER_BATCH:
            self._spill_numbers()

    def _spill_numbers(self) -> None:
        with self._numbers_path.open("ab") as out:
            self._numbers.tofile(out)
        self._numbers = array("q")

    def suspend(self) -> None:
        """Close the files until the next write."""
        if self._out is not None:
            self._out.close()
            self._out = None
        if self._numbers:
            self._spill_numbers()

    def close(self) -> None:
        """Finish the log and write the table of entry numbers (one row per line, in batches)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.suspend()
        schema = pa.schema([("source", pa.string()), ("line_no", pa.int64()), ("entry", pa.int64()),
                            ("entry_start", pa.bool_())])
        lines, previous = 0, None
        with pq.ParquetWriter(self.entries_path, schema) as table, self._numbers_path.open("rb") as stream:
            while True:
                numbers = array("q")
                try:
                    numbers.fromfile(stream, _NUMBER_BATCH)
                except EOFError:  # the last, short batch (read all the same)
                    pass
                if not numbers:
                    break
                starts = [n != (numbers[i - 1] if i else previous) for i, n in enumerate(numbers)]
                table.write_table(pa.table({
                    "source": pa.array([self.source] * len(numbers), pa.string()),
                    "line_no": pa.array(range(lines + 1, lines + len(numbers) + 1), pa.int64()),
                    "entry": pa.array(numbers, pa.int64()), "entry_start": pa.array(starts, pa.bool_())},
                    schema=schema))
                lines, previous = lines + len(numbers), numbers[-1]
        self._numbers_path.unlink()


class _Writers:
    """The open writers of one host, at most :data:`_OPEN_WRITERS` with their files open (least recently used
    suspended first)."""

    def __init__(self) -> None:
        self._all: OrderedDict[tuple[int, str], _HostWriter] = OrderedDict()
        self._open: OrderedDict[tuple[int, str], None] = OrderedDict()

    def get(self, key: tuple[int, str], make: Callable[[], _HostWriter]) -> _HostWriter:
        writer = self._all.get(key)
        if writer is None:
            writer = self._all[key] = make()
        self._open[key] = None
        self._open.move_to_end(key)
        if len(self._open) > _OPEN_WRITERS:
            self._all[self._open.popitem(last=False)[0]].suspend()
        return writer

    def close(self) -> list[tuple[int, str]]:
        """Close every writer; returns their keys."""
        keys = list(self._all)
        for writer in self._all.values():
            writer.close()
        self._all.clear()
        self._open.clear()
        return keys


def _merged(spills: list[_Spill], scratch: Path) -> Iterator[tuple]:
    """Every run of these files in one stream ordered by (host, instant, file, tie, position); more runs than
    :data:`_MERGE_FAN_IN` are first merged in passes into fewer (each open run is a file handle)."""
    runs = [(s.index, run) for s in spills for run in s.runs]
    passes = 0
    while len(runs) > _MERGE_FAN_IN:
        merged = []
        for start in range(0, len(runs), _MERGE_FAN_IN):
            path = scratch / f"merge-{passes}-{start}.run"
            with _Spilling(path) as out:
                for _, index, record in _heads(runs[start:start + _MERGE_FAN_IN]):
                    out.add((index, *record))  # the text stays last, where a batch counts its size
            for _, used in runs[start:start + _MERGE_FAN_IN]:
                used.unlink()
            merged.append((None, path))
        runs, passes = merged, passes + 1
    by_index = {s.index: s for s in spills}
    for key, index, record in _heads(runs):
        yield key, by_index[index], record


def _heads(runs: list[tuple[int | None, Path]]) -> Iterator[tuple]:
    """(merge key, file index, record) of ``runs`` in merge order; a run of a merge pass carries its records'
    file index (its own index is None)."""
    def keyed(index: int | None, run: Path) -> Iterator[tuple]:
        for r in _records(run):
            i, r = (index, r) if index is not None else (r[0], r[1:])
            yield (r[0], r[1], i, r[2], r[3]), i, r

    return heapq.merge(*(keyed(index, run) for index, run in runs), key=lambda k: k[0])


def _merge_format(spills: list[_Spill], folder_of: Callable[[_Spill], Path], scratch: Path) -> None:
    """Write each file's kept entries per host; an entry that an earlier file of the format holds as often (same
    host, instant and text) is dropped. One query never returns an entry twice (a stack's repeated frames are
    separate entries), so only earlier files count."""
    writers = _Writers()
    by_index = {s.index: s for s in spills}
    current_host = None

    def emit(spill: _Spill, record: tuple) -> None:
        host, number, own, text = record[0], record[4], record[5], record[6]

        def make() -> _HostWriter:
            folder = folder_of(spill)
            return _HostWriter(folder / host_file_name(host), folder / entries_file_name(host),
                               f"{spill.item.source}#{host}")

        writers.get((spill.index, host), make).write(number, own, text)
        spill.kept[host] += 1

    def close_host() -> None:
        for index, host in writers.close():
            by_index[index].written.add(host)

    group_key, group = None, []
    alone = len(spills) == 1
    for key, spill, record in _merged(spills, scratch):
        if key[0] != current_host:
            _emit_group(group, emit)
            group, group_key = [], None
            close_host()
            current_host = key[0]
        # The only file of its format repeats nothing read before; an entry with no instant is never a duplicate
        # (and such entries may be the whole file: not held as one group).
        if alone or key[1] == _FIRST:
            _emit_group(group, emit)
            group, group_key = [], None
            emit(spill, record)
            continue
        if key[:2] != group_key:
            _emit_group(group, emit)
            group, group_key = [], key[:2]
        group.append((spill, record))
    _emit_group(group, emit)
    close_host()
    for spill in spills:  # the runs are read: free their space before the next format
        for run in spill.runs:
            run.unlink(missing_ok=True)


def _emit_group(group: list[tuple[_Spill, tuple]], emit: Callable[[_Spill, tuple], None]) -> None:
    """One host's entries of one instant, file by file: drop what earlier files held as often, in file order."""
    if not group:
        return
    if group[0][0] is group[-1][0]:  # one file's entries: none was read before
        for spill, record in group:
            emit(spill, record)
        return
    seen: Counter = Counter()  # per text: the most times one earlier file held it at this instant
    start = 0
    while start < len(group):
        spill = group[start][0]
        end = start
        while end < len(group) and group[end][0] is spill:
            end += 1
        here: Counter = Counter()
        dropped = set()
        # the first occurrences in the file's order are the ones dropped, as the file is read
        for position, (_, record) in sorted(enumerate(group[start:end]), key=lambda p: p[1][1][4]):
            if record[5] is None:
                continue
            here[record[6]] += 1
            if here[record[6]] <= seen[record[6]]:
                dropped.add(position)
        spill.tally.duplicates += len(dropped)
        for position, (_, record) in enumerate(group[start:end]):
            if position not in dropped:
                emit(spill, record)
        for text, count in here.items():
            seen[text] = max(seen[text], count)
        start = end


# ---------------------------------------------------------------------------------------------- the bundle


def convert_exports(bundle: Bundle, pending: list[PendingExport], cache_dir: Path | None = None) -> None:
    """Rewrite each export as one runtime JSON log file per host (see the module's docstring) and add them to
    ``bundle.logs``; what could not be read, and duplicates, become problem rows. With ``cache_dir``, exports
    rewritten by an earlier run are linked from there (:mod:`toolkit.bundle.export_cache`)."""
    if not pending:
        return
    ordered = sorted(pending, key=lambda p: p.source)
    exports_dir = bundle.work_dir / "exports"
    exports_dir.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[PendingExport]] = {}
    for item in ordered:
        groups.setdefault(item.format.id, []).append(item)
    keys = export_cache.group_keys(bundle, groups) if cache_dir else dict.fromkeys(groups)
    results: dict[str, FileResult] = {}
    for fmt_id, key in keys.items():
        kept = export_cache.restore(cache_dir, key, exports_dir) if key else None
        if kept is not None and set(kept) == {item.source for item in groups[fmt_id]}:
            results.update(kept)
    fresh = [item for item in ordered if item.source not in results]
    results.update(_rewrite(bundle, ordered, fresh, results, exports_dir))
    for fmt_id, key in keys.items():
        if key and any(item in fresh for item in groups[fmt_id]):
            export_cache.store(cache_dir, key, [results[item.source] for item in groups[fmt_id]], exports_dir)
    for item in ordered:
        _add(bundle, item, results[item.source], exports_dir)


def _rewrite(bundle: Bundle, ordered: list[PendingExport], fresh: list[PendingExport],
             kept: dict[str, FileResult], exports_dir: Path) -> dict[str, FileResult]:
    """Read, sort and merge the ``fresh`` exports into ``exports_dir``; the ``kept`` ones (read before) take
    their share of the JSON-document budget in the order every export is read."""
    budget = [MAX_DOCUMENT_TOTAL_BYTES]  # characters of JSON documents the driver may still read
    results: dict[str, FileResult] = {}
    spills: list[_Spill] = []
    with TemporaryDirectory(prefix="sorting-", dir=exports_dir) as scratch_name:
        scratch = Path(scratch_name)
        for index, item in enumerate(ordered):
            if item.source in kept:
                budget[0] -= kept[item.source].document_chars
                continue
            if item not in fresh:
                continue
            zone_of = _zones(bundle, item.host)
            spill = _Spill(index, item, Tally(), scratch / f"{index}.raw")
            before = budget[0]
            try:
                _read(spill, budget, zone_of)
            except (ValueError, OSError, EOFError, csv.Error) as exc:
                spill.raw.unlink(missing_ok=True)
                what = "too large to read as one JSON document" if isinstance(exc, DocumentTooLarge) else "not readable"
                results[item.source] = FileResult(item.source, [(f"{item.format.platform} export {what}: read as a "
                                                                 "plain log", str(exc)[:300])], plain=True,
                                                  document_chars=before - budget[0],
                                                  lasting=not isinstance(exc, OSError))
                continue
            _sort_runs(spill, scratch, zone_of)
            spill.document_chars = before - budget[0]
            spills.append(spill)
        for fmt_id in dict.fromkeys(s.item.format.id for s in spills):
            _merge_format([s for s in spills if s.item.format.id == fmt_id],
                          lambda s: _folder(exports_dir, s.item.source), scratch)
    for spill in spills:
        results[spill.item.source] = FileResult(
            spill.item.source, _problems(spill.item, spill.tally, spill.total),
            [(host, spill.kept[host]) for host in sorted(spill.written)], document_chars=spill.document_chars)
    return results


def _add(bundle: Bundle, item: PendingExport, result: FileResult, exports_dir: Path) -> None:
    """One export's problem rows and files into the bundle."""
    bundle.problems.extend(IngestProblem(item.source, problem, detail) for problem, detail in result.problems)
    if result.plain:
        bundle.logs.append(LogFile(item.source, item.path, item.host, item.size, gzip=item.gzip))
        return
    folder = export_folder(exports_dir, item.source)
    for host, entries in result.hosts:
        path = folder / host_file_name(host)
        source = f"{item.source}#{host}"
        bundle.logs.append(LogFile(source, path, host, path.stat().st_size, entries=folder / entries_file_name(host)))
        bundle.exported[source] = {"file": item.source, "format": item.format.id, "entries": entries}


def _folder(exports_dir: Path, source: str) -> Path:
    folder = export_folder(exports_dir, source)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _zones(bundle: Bundle, file_host: str) -> Callable[[str], ZoneInfo]:
    cache: dict[str, ZoneInfo] = {}

    def zone_of(host: str | None) -> ZoneInfo:
        host = host or file_host
        if host not in cache:
            cache[host] = ZoneInfo(bundle.settings_for(host).timezone)
        return cache[host]
    return zone_of


def _problems(item: PendingExport, tally: Tally, total: int) -> list[tuple[str, str]]:
    """The problem rows (problem, detail) of one export's read."""
    rows = []
    if tally.duplicates:
        rows.append((f"{tally.duplicates} of {total} entries are also in an export read before (same platform, host, "
                     "time and line): read once", "overlapping exports, or a query exported twice"))
    if tally.not_entries:
        rows.append((f"{tally.not_entries} of {total} lines are not {item.format.platform} entries: read as plain "
                     "lines", f"host {item.host}"))
    if tally.no_message:
        rows.append((f"{tally.no_message} of {total} entries carry no message field ({', '.join(item.format.message)})",
                     "each kept whole as its line"))
    if tally.no_host:
        labels = ", ".join(item.format.host[:4]) + (", ..." if len(item.format.host) > 4 else "")
        rows.append((f"{tally.no_host} of {total} entries name no host ({labels}): given the file's host {item.host}",
                     ""))
    return rows


__all__ = ["RUN_BYTES", "convert_exports"]
