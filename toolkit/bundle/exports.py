"""Log-platform exports (an Elasticsearch ``_search`` response, Loki ``logcli`` JSON lines, CloudWatch and
``gcloud`` JSON, Splunk and Kibana/Datadog/Logs Insights CSV) read as the log files they stand for.

The formats are data (``toolkit/catalogue/exports.toml``). An export is recognised by its content while the
bundle is opened and then rewritten, per host its labels name, as the container runtime's JSON log file
(``{"log": line, "time": shipped}``, one object per printed line), which the layouts read like any pod's log:
the line's own stamp is the record's time and the platform's stamp fills in when the line has none. Each
host's entries are put in time order (exports are often newest first, and a stack trace shipped one entry
per line must follow its record); an entry that appears again, in the same file or in another export of the
bundle, is read once. Every rewritten file has a small table of its lines' entry numbers, so records and
evidence point into the export (``file#host:entry``) rather than into the rewritten file.

This module knows the formats and reads entries; ``toolkit.bundle.export_rewrite`` writes them out in
bounded memory. JSON-lines, CSV and text exports are streamed; a JSON document is read whole on the driver
within the same limits as JSON state evidence (256 MB a file, 1 GB a bundle).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from zoneinfo import ZoneInfo


#: A JSON-document export is read whole on the driver: at most this many bytes a file ...
MAX_DOCUMENT_BYTES = 256 << 20
#: ... and this many for all of a bundle's JSON-document exports.
MAX_DOCUMENT_TOTAL_BYTES = 1 << 30
#: How much of a file recognition reads.
SNIFF_BYTES = 64 * 1024
#: The rewritten file's name for a host, and its table of entry numbers beside it.
ENTRIES_SUFFIX = ".entries.parquet"
#: A record that starts inside an entry after its first line (a shipper's multiline rule joined two records into
#: one entry) is numbered this plus its line in the rewritten file: record numbers stay unique per file, and the
#: entry's own number stays with its first record.
INNER_RECORD_BASE = 1_000_000_000

_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                       "Dec"), start=1)}
_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?\s*"
                  r"(Z|UTC|GMT|[+-]\d{2}:?\d{2})?$")
# Kibana's default dateFormat ("MMM D, YYYY @ HH:mm:ss.SSS"), rendered in the browser's zone.
_KIBANA = re.compile(r"^([A-Z][a-z]{2}) (\d{1,2}), (\d{4}) @ (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$")
# A spreadsheet guard some exports put before a value that starts like a formula (=, +, -, @).
_FORMULA_GUARD = re.compile(r"^'(?=[=+\-@])")


@dataclass(frozen=True)
class ExportFormat:
    """One platform's export format (see ``toolkit/catalogue/exports.toml``)."""

    id: str
    platform: str
    container: str
    message: tuple[str, ...]
    shipped: tuple[str, ...]
    host: tuple[str, ...]
    entries: str = ""
    unwrap: str = ""
    detect_all: tuple[str, ...] = ()
    detect_any: tuple[str, ...] = ()
    detect_none: tuple[str, ...] = ()
    detect_prefix: tuple[str, ...] = ()
    naive_zone: str = "UTC"
    #: what orders entries of one instant: a number the shipper kept (Filebeat's byte offset in the log file) ...
    tie_break: tuple[str, ...] = ()
    #: ... else the file's order, which a newest-first file keeps for ties unless this is set (a search sorted
    #: by time alone returns ties in the order they were indexed)
    ties_in_file_order: bool = False

    def fits(self, fields: dict) -> bool:
        """Whether an entry (a JSON object, or a CSV header as a dict of names) is one of this format's."""
        if self.unwrap and isinstance(fields.get(self.unwrap), dict) and self.container != "csv":
            # A hit: its own keys (_index, _source) or its source's fields are tested alike.
            return self._fits(fields) or self._fits(fields[self.unwrap])
        return self._fits(fields)

    def _fits(self, fields: dict) -> bool:
        return (all(lookup(fields, key) is not None for key in self.detect_all)
                and (not self.detect_any or any(lookup(fields, key) is not None for key in self.detect_any))
                and not any(lookup(fields, key) is not None for key in self.detect_none))


@dataclass(frozen=True)
class ExportCatalogue:
    """Every known export format, in the order they are tried, and the host patterns of container log names."""

    formats: tuple[ExportFormat, ...]
    host_patterns: tuple[re.Pattern, ...]

    def of(self, container: str) -> list[ExportFormat]:
        return [f for f in self.formats if f.container == container]


@cache
def load_export_formats() -> ExportCatalogue:
    """The export formats of ``toolkit/catalogue/exports.toml``."""
    data = tomllib.loads(resources.files("toolkit.catalogue").joinpath("exports.toml").read_text(encoding="utf-8"))
    default_hosts = tuple(data["defaults"]["host"])
    formats = tuple(
        ExportFormat(
            id=item["id"], platform=item["platform"], container=item["container"],
            message=tuple(item["message"]), shipped=tuple(item["shipped"]),
            host=tuple(item.get("host", default_hosts)), entries=item.get("entries", ""), unwrap=item.get("unwrap", ""),
            detect_all=tuple(item.get("detect_all", ())), detect_any=tuple(item.get("detect_any", ())),
            detect_none=tuple(item.get("detect_none", ())), detect_prefix=tuple(item.get("detect_prefix", ())),
            naive_zone=item.get("naive_zone", "UTC"), tie_break=tuple(item.get("tie_break", ())),
            ties_in_file_order=item.get("ties") == "file-order",
        )
        for item in data["export"]
    )
    for f in formats:
        if f.container not in ("json-document", "json-lines", "csv", "grafana-text"):
            raise ValueError(f"exports.toml: {f.id}: unknown container {f.container!r}")
    return ExportCatalogue(formats, tuple(re.compile(p) for p in data["defaults"]["host_patterns"]))


def lookup(obj: object, path: str, keep_empty: bool = False) -> object:
    """The value at a dotted ``path`` of nested objects, where a key may itself hold dots (Filebeat nests
    ``kubernetes.pod.name``; a flattened document or a CSV header names it whole). None when absent or empty
    (``keep_empty``: an empty string is a value, as an empty printed line is)."""
    if not isinstance(obj, dict) or not path:
        return None
    if path in obj:
        value = obj[path]
        return None if value is None or (value == "" and not keep_empty) else value
    parts = path.split(".")
    for cut in range(1, len(parts)):
        head = ".".join(parts[:cut])
        if head in obj:
            found = lookup(obj[head], ".".join(parts[cut:]), keep_empty)
            if found is not None:
                return found
    return None


# ---------------------------------------------------------------------------------------------- recognition


def _strip_bom(text: str) -> str:
    return text[1:] if text.startswith("\ufeff") else text


def sniff_export(head: bytes, cat: ExportCatalogue | None = None) -> ExportFormat | None:
    """The export format a file's first bytes show, or None (a log file, or evidence of another kind)."""
    cat = cat or load_export_formats()
    text = _strip_bom(head.decode("utf-8", errors="replace")).lstrip()
    if not text:
        return None
    for fmt in cat.of("grafana-text"):
        if text.startswith(fmt.detect_prefix):
            return fmt
    if text[0] in "{[":
        return _sniff_json(text, len(head) < SNIFF_BYTES, cat)
    return _sniff_csv(text, cat)


def _sniff_json(text: str, whole: bool, cat: ExportCatalogue) -> ExportFormat | None:
    first = text.split("\n", 1)[0].strip()
    obj = _loads(first)
    if isinstance(obj, dict):
        for fmt in cat.of("json-lines"):
            if fmt.fits(obj):
                return fmt
    # A document: parsed when the head holds it all, else told by the keys its head shows.
    doc = _loads(text) if whole else None
    for fmt in cat.of("json-document"):
        if doc is not None:
            entries = lookup(doc, fmt.entries) if fmt.entries else doc
            if isinstance(entries, list) and entries and isinstance(entries[0], dict) and fmt.fits(entries[0]):
                return fmt
            continue
        if _head_shows(text, fmt):
            return fmt
    return None


def _head_shows(text: str, fmt: ExportFormat) -> bool:
    """Whether a document's head looks like ``fmt`` (its entry array opens, its first entry's keys appear)."""
    if fmt.entries:
        array_key = fmt.entries.rsplit(".", 1)[-1]
        if not re.search(r'"%s"\s*:\s*\[' % re.escape(array_key), text):
            return False
    elif not text.startswith("["):
        return False
    keys = set(re.findall(r'"([^"\\]+)"\s*:', text))

    def present(key: str) -> bool:
        return key in keys or key.rsplit(".", 1)[-1] in keys

    return (all(present(k) for k in fmt.detect_all) and (not fmt.detect_any or any(present(k) for k in fmt.detect_any))
            and not any(k in keys for k in fmt.detect_none))


def _loads(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _header_names(row: list[str]) -> dict:
    return {_FORMULA_GUARD.sub("", name).strip(): i for i, name in enumerate(row)}


def _sniff_csv(text: str, cat: ExportCatalogue) -> ExportFormat | None:
    try:
        row = next(csv.reader(io.StringIO(text.split("\n", 1)[0])))
    except (csv.Error, StopIteration):
        return None
    if len(row) < 2:
        return None
    names = _header_names(row)
    return next((fmt for fmt in cat.of("csv") if fmt.fits(names)), None)


# ---------------------------------------------------------------------------------------------- reading


@dataclass
class Entry:
    """One entry of an export: its number in the file, host, shipped instant and printed text."""

    number: int
    host: str | None
    shipped: datetime | None
    text: str
    #: orders entries of one instant (see :attr:`ExportFormat.tie_break`)
    tie: float | None = None


@dataclass
class Tally:
    """What one export file held that the user should hear about."""

    not_entries: int = 0
    no_message: int = 0
    no_host: int = 0
    duplicates: int = 0


def _open_text(path: Path, gzipped: bool) -> io.TextIOBase:
    if gzipped:
        return gzip.open(path, "rt", encoding="utf-8", errors="replace", newline="")
    return path.open(encoding="utf-8", errors="replace", newline="")


def read_entries(fmt: ExportFormat, item: PendingExport, tally: Tally, budget: list[int]) -> Iterator[Entry]:
    """One export file's entries in the file's order (``budget``: characters of JSON documents still allowed)."""
    if fmt.container == "json-lines":
        yield from _json_line_entries(fmt, item, tally)
    elif fmt.container == "csv":
        yield from _csv_entries(fmt, item, tally)
    elif fmt.container == "grafana-text":
        yield from _grafana_text_entries(fmt, item, tally)
    else:
        yield from _document_entries(fmt, item, tally, budget)


def _json_line_entries(fmt: ExportFormat, item: PendingExport, tally: Tally) -> Iterator[Entry]:
    with _open_text(item.path, item.gzip) as stream:
        for number, line in enumerate(stream, start=1):
            line = line.rstrip("\r\n")
            if number == 1:
                line = _strip_bom(line)
            obj = _loads(line) if line.lstrip().startswith("{") else None
            if not isinstance(obj, dict):
                # Not an entry (a blank line, a note a tool printed): read as a plain line of the file's host.
                tally.not_entries += 1
                yield Entry(number, None, None, line)
                continue
            yield _entry(fmt, number, obj, tally)


def _grafana_text_entries(fmt: ExportFormat, item: PendingExport, tally: Tally) -> Iterator[Entry]:
    """Grafana's text download: ``Common labels: {json}`` and other ``Name: value`` lines, blank lines, then one
    ``<epoch ms>TAB<ISO 8601>TAB<line>`` per entry. The head is the export's envelope, not log lines."""
    labels: dict = {}
    host = None
    in_head = True
    with _open_text(item.path, item.gzip) as stream:
        for number, line in enumerate(stream, start=1):
            line = line.rstrip("\r\n")
            if number == 1:
                line = _strip_bom(line)
            stamp, tab, rest = line.partition("\t")
            if tab and stamp.isdigit():
                in_head = False
                shipped, _, text = rest.partition("\t")
                entry = Entry(number, host, parse_shipped(int(stamp)) or parse_shipped(shipped), text)
                if host is None:
                    tally.no_host += 1
                yield entry
                continue
            if in_head and (not line or re.match(r"^[A-Z][\w ]*: ", line)):
                if line.startswith("Common labels: "):
                    found = _loads(line[len("Common labels: "):])
                    labels = found if isinstance(found, dict) else {}
                    host = _host_of(fmt, labels, None)
                continue
            tally.not_entries += 1
            yield Entry(number, None, None, line)


def _csv_entries(fmt: ExportFormat, item: PendingExport, tally: Tally) -> Iterator[Entry]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # a stack trace in one cell passes the default 128 KB
    with _open_text(item.path, item.gzip) as stream:
        rows = csv.reader(stream)
        header = next(rows, None)
        if not header:
            return
        names = [_FORMULA_GUARD.sub("", _strip_bom(name)).strip() for name in header]
        for number, row in enumerate(rows, start=2):
            values = {name: _FORMULA_GUARD.sub("", value) for name, value in zip(names, row)}
            yield _entry(fmt, number, values, tally)


class DocumentTooLarge(ValueError):
    """A JSON-document export past the driver's limits."""


def _document_entries(fmt: ExportFormat, item: PendingExport, tally: Tally, budget: list[int]) -> Iterator[Entry]:
    limit = min(MAX_DOCUMENT_BYTES, budget[0])
    with _open_text(item.path, item.gzip) as stream:
        text = stream.read(limit + 1)
    if len(text) > limit:
        raise DocumentTooLarge(f"more than {limit} characters; the limit is {MAX_DOCUMENT_BYTES} a file and "
                               f"{MAX_DOCUMENT_TOTAL_BYTES} for a bundle's JSON documents (export as JSON lines "
                               "instead: see collect-guide)")
    budget[0] -= len(text)
    doc = json.loads(_strip_bom(text))
    entries = lookup(doc, fmt.entries) if fmt.entries else doc
    if not isinstance(entries, list):
        raise ValueError(f"no {fmt.entries or 'top-level'} array of entries")
    for number, obj in enumerate(entries, start=1):
        if isinstance(obj, dict):
            yield _entry(fmt, number, obj, tally)
        else:
            tally.not_entries += 1
            yield Entry(number, None, None, json.dumps(obj, ensure_ascii=False))


def _entry(fmt: ExportFormat, number: int, obj: dict, tally: Tally) -> Entry:
    fields = obj[fmt.unwrap] if fmt.unwrap and isinstance(obj.get(fmt.unwrap), dict) else obj
    key = raw = None
    for name in fmt.message:
        raw = lookup(fields, name, keep_empty=True)
        if raw is not None:
            key = name
            break
    # A runtime's "log" (and Cloud Logging's textPayload) keeps the line's terminator; a shipper's "message" does
    # not, so a newline at its end is an empty line the multiline rule joined.
    terminated = key is not None and key.rsplit(".", 1)[-1] in ("log", "textPayload")
    inner = None
    if raw is None:
        tally.no_message += 1
        text = json.dumps(obj, ensure_ascii=False)
    elif isinstance(raw, (dict, list)):  # a structured payload: one JSON line for the jsonl layout
        text = json.dumps(raw, ensure_ascii=False)
    else:
        text = str(raw)
        inner = _inner_record(text)
        if inner is not None:  # a shipper's record inside the message (Fluent Bit to CloudWatch)
            text, terminated = inner["log"], True
    host = _host_of(fmt, fields, inner)
    if host is None:
        tally.no_host += 1
    stamp = next((v for v in (lookup(fields, key) for key in fmt.shipped) if v is not None), None)
    # A stamp without a zone that the platform rendered in a viewer's zone stays naive here (its zone: export_rewrite._vote).
    zone = None if fmt.naive_zone == "host" else timezone.utc
    if terminated:
        text = text.removesuffix("\n").removesuffix("\r")
    tie = next((v for v in (lookup(fields, k) for k in fmt.tie_break) if isinstance(v, (int, float))), None)
    return Entry(number, host, parse_shipped(stamp, zone), text, tie)


def _inner_record(text: str) -> dict | None:
    """A container runtime's or Fluent Bit's record shipped as the message (``{"log": ..., "kubernetes": ...}``)."""
    if not text.startswith('{"') or '"log"' not in text:
        return None
    obj = _loads(text)
    return obj if isinstance(obj, dict) and isinstance(obj.get("log"), str) else None


def _host_of(fmt: ExportFormat, fields: dict, inner: dict | None) -> str | None:
    for key in fmt.host:
        value = lookup(inner, key[len("inner."):]) if key.startswith("inner.") else lookup(fields, key)
        if isinstance(value, (str, int)):
            host = _host_named(str(value), key.endswith(".path"))
            if host is not None:
                return host
    return None


@lru_cache(maxsize=4096)  # an export names few hosts, once per entry
def _host_named(value: str, is_path: bool) -> str | None:
    """The host a label's value names: the pod of a container log file or stream name, else the value itself
    (a path that names no pod is no host)."""
    value = value.strip()
    if not value:
        return None
    for pattern in load_export_formats().host_patterns:
        m = pattern.search(value)
        if m:
            return m.group("pod")
    return None if is_path or "/" in value else value


def parse_shipped(value: object, zone: timezone | ZoneInfo | None = timezone.utc) -> datetime | None:
    """A platform's timestamp as an aware UTC instant: ISO 8601 / RFC 3339 (to nanoseconds), epoch numbers (s, ms,
    µs or ns, told by their size) or Kibana's rendered ``Mar 7, 2024 @ 14:02:11.408``. A stamp printed without a
    zone is read in ``zone`` (``None``: returned naive, as printed). None when it is none of these."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str) and re.fullmatch(r"\d{9,19}(?:\.\d+)?", value.strip()):
        value = float(value) if "." in value else int(value)
    if isinstance(value, (int, float)):
        seconds = float(value)
        for scale in (1e9, 1e6, 1e3):
            if abs(seconds) >= scale * 1e8:  # past 1973 in that unit
                seconds /= scale
                break
        try:
            return datetime.fromtimestamp(seconds, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str):
        return None
    text = value.strip()
    m = _ISO.match(text)
    if m:
        year, month, day, hour, minute, second, fraction, offset = m.groups()
        parts = (int(year), int(month), int(day), int(hour), int(minute), int(second))
        return instant_of(parts, fraction, offset, zone)
    m = _KIBANA.match(text)
    if m and m.group(1) in _MONTHS:
        month, day, year, hour, minute, second, fraction = m.groups()
        return instant_of((int(year), _MONTHS[month], int(day), int(hour), int(minute), int(second)), fraction, None, zone)
    return None


def instant_of(parts: tuple, fraction: str | None, offset: str | None, zone) -> datetime | None:
    """The UTC instant of printed date and time parts, a fraction's digits and an offset (else ``zone``; with
    neither, the naive time as printed). None when the parts are no date."""
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    try:
        if offset in (None, "") and zone is None:
            return datetime(*parts, micros)
        if offset in (None, ""):
            local = datetime(*parts, micros, tzinfo=zone)
        elif offset in ("Z", "UTC", "GMT"):
            local = datetime(*parts, micros, tzinfo=timezone.utc)
        else:
            sign = -1 if offset[0] == "-" else 1
            digits = offset[1:].replace(":", "")
            local = datetime(*parts, micros, tzinfo=timezone(sign * timedelta(hours=int(digits[:2]),
                                                                              minutes=int(digits[2:]))))
    except ValueError:
        return None
    return local.astimezone(timezone.utc)


# ---------------------------------------------------------------------------------------------- rewriting


@dataclass(frozen=True)
class PendingExport:
    """An export found while the bundle was opened, rewritten once every file is known."""

    source: str
    path: Path
    host: str
    size: int
    format: ExportFormat
    #: the export is gzip (read decompressed)
    gzip: bool = False


__all__ = ["ENTRIES_SUFFIX", "INNER_RECORD_BASE", "DocumentTooLarge", "Entry", "ExportCatalogue", "ExportFormat",
           "PendingExport", "Tally", "instant_of", "load_export_formats", "lookup", "parse_shipped", "read_entries",
           "sniff_export"]
