"""State captures -> state fact tables.

``read_state(spark, items)`` turns the state evidence the bundle walker found (Kafka Streams state folders,
capture archives and listings, lone checkpoint files, DynamoDB / CloudTrail / NiFi JSON) into small
DataFrames with fixed schemas (:mod:`toolkit.state.schemas`). State metadata is small, so files are read in
Python and the tables built with ``utc.create_frame(spark, rows, schema)``: DataFrame API only, Spark Connect safe.

Bad input never raises: each unreadable file, malformed checkpoint or JSON becomes a ``(source, reason)``
entry in ``StateTables.problems`` (and, for checkpoints, a row with ``problem`` set); the rest is still read.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructType, TimestampType

from toolkit import utc
from toolkit.schemas import table_fields
from toolkit.state import cloudtrail as _cloudtrail
from toolkit.state import dynamodb as _dynamodb
from toolkit.state import kafka_state as _kafka
from toolkit.state import nifi_state as _nifi
from toolkit.state import nifi_wal as _nifi_wal
from toolkit.state import snapshot as _snapshot
from toolkit.state.capture import MANIFEST_FILE_NAME
from toolkit.state.cloudtrail import cloudtrail_as_events
from toolkit.state.offset_checkpoint import MAX_CHECKPOINT_BYTES
from toolkit.state.schemas import PROBLEMS_SCHEMA, STATE_SCHEMAS, STATE_TABLES
from toolkit.state.sniff import detect_evidence_file, detect_nifi_dir, detect_state_dir
from toolkit.state.timeutil import from_ns

__all__ = [
    "StateItem",
    "StateTables",
    "StateRows",
    "read_state",
    "collect_state_rows",
    "cloudtrail_as_events",
    "detect_state_dir",
    "detect_evidence_file",
    "STATE_KINDS",
]

#: Item kinds ``read_state`` understands: ``state_dir`` for folders, the rest from ``detect_evidence_file``.
STATE_KINDS = (
    "state_dir",
    "state_capture",
    "state_listing",
    "checkpoint_file",
    "dynamodb_scan",
    "dynamodb_table",
    "cloudtrail",
    "nifi_state",
    "nifi_wal_file",
)

#: JSON evidence files larger than this are reported, not read (real captures are kilobytes to a few MB).
MAX_JSON_BYTES = 256 << 20
#: JSON evidence (DynamoDB, CloudTrail, NiFi state) is read on the driver: at most this much per bundle.
#: Files past it are reported, not read, so a bundle of many large dumps cannot exhaust the driver.
MAX_JSON_TOTAL_BYTES = 1 << 30


@dataclass(frozen=True)
class StateItem:
    """One piece of state evidence found in the bundle.

    ``path`` is the local file or folder, ``source`` its path inside the bundle (used in every row and problem),
    ``kind`` one of :data:`STATE_KINDS` (an empty kind is sniffed).
    """

    host: str
    path: Path
    source: str
    kind: str


@dataclass
@table_fields(STATE_TABLES, "list[dict[str, Any]]", default_factory=list)
class StateRows:
    """The tables as plain Python rows (dicts), before they become DataFrames.

    One list per name of :data:`toolkit.state.schemas.STATE_TABLES`, in that order.
    """

    # one ``list[dict[str, Any]]`` per state table, added by ``table_fields``
    problems: list[tuple[str, str]] = field(default_factory=list)

    def digest(self) -> str:
        """Identity of the facts (not of the files they came from): equal facts build equal timelines."""
        tables = tuple(getattr(self, name) for name in STATE_TABLES)
        return hashlib.blake2b(repr(tables).encode(), digest_size=12).hexdigest()


@dataclass
@table_fields(STATE_TABLES, "DataFrame")
class StateTables:
    """State fact tables (schemas in :mod:`toolkit.state.schemas`) plus ingest problems ``(source, reason)``.

    One DataFrame per name of :data:`toolkit.state.schemas.STATE_TABLES`, in that order.
    """

    # one DataFrame per state table, first, added by ``table_fields``
    problems: list[tuple[str, str]]
    #: see :meth:`StateRows.digest`
    digest: str = ""
    #: rows of each table (the facts are read on the driver, so this costs no Spark job)
    row_counts: dict[str, int] = field(default_factory=dict)

    def problems_frame(self, spark: SparkSession) -> DataFrame:
        """The problems as a DataFrame (``source``, ``reason``) to union with the bundle's ingest problems."""
        return utc.create_frame(spark, [tuple(p) for p in self.problems], PROBLEMS_SCHEMA)

    def cloudtrail_events(self) -> DataFrame:
        """CloudTrail rows shaped like log events (see :func:`cloudtrail_as_events`)."""
        return cloudtrail_as_events(self.cloudtrail)


def _coerce(value: Any, data_type: Any) -> Any:
    """Fit a value parsed from untrusted JSON to its column type, so odd input never fails the DataFrame."""
    if value is None:
        return None
    if isinstance(data_type, StringType):
        return value if isinstance(value, str) else json.dumps(value, default=str)
    if isinstance(data_type, BooleanType):
        return value if isinstance(value, bool) else None
    if isinstance(data_type, (LongType, IntegerType)):
        limit = 2**63 if isinstance(data_type, LongType) else 2**31
        return value if isinstance(value, int) and not isinstance(value, bool) and -limit <= value < limit else None
    if isinstance(data_type, TimestampType):
        return value if isinstance(value, datetime) else None
    return value


def _frame(spark: SparkSession, rows: list[dict[str, Any]], schema: StructType) -> DataFrame:
    fields = [(f.name, f.dataType) for f in schema.fields]
    return utc.create_frame(spark, [tuple(_coerce(row.get(name), kind) for name, kind in fields) for row in rows], schema)


def read_state(spark: SparkSession, items: list[StateItem]) -> StateTables:
    """Read every state item into the state tables; empty ``items`` give empty tables with the schemas."""
    rows = collect_state_rows(items)
    return StateTables(
        **{name: _frame(spark, getattr(rows, name), schema) for name, schema in STATE_SCHEMAS.items()},
        problems=rows.problems,
        digest=rows.digest(),
        row_counts={name: len(getattr(rows, name)) for name in STATE_SCHEMAS},
    )


def _sniff(item: StateItem) -> str | None:
    path = Path(item.path)
    if path.is_dir():
        return "state_dir" if detect_state_dir(path) else None
    return detect_evidence_file(path)


def _mtime(path: Path) -> Any:
    try:
        return from_ns(os.stat(path).st_mtime_ns)
    except OSError:
        return None


class _JsonBudget:
    """The bytes of JSON evidence the driver may still read for this bundle (``MAX_JSON_TOTAL_BYTES``)."""

    def __init__(self, total: int | None = None) -> None:
        self.left = MAX_JSON_TOTAL_BYTES if total is None else total

    def read_text(self, item: StateItem) -> str:
        size = os.stat(item.path).st_size
        if size > MAX_JSON_BYTES:
            raise ValueError(f"file of {size} bytes is larger than the {MAX_JSON_BYTES}-byte limit for JSON evidence")
        if size > self.left:
            raise ValueError(f"not read: the bundle's JSON evidence passed the {MAX_JSON_TOTAL_BYTES}-byte total "
                             f"read on the driver (this file has {size} bytes); analyse these dumps in a bundle "
                             "of their own")
        self.left -= size
        return Path(item.path).read_bytes().decode("utf-8", errors="replace")


def collect_state_rows(items: Iterable[StateItem]) -> StateRows:
    """Python-side half of :func:`read_state` (no Spark): useful for tests and for bounded tooling."""
    out = StateRows()
    budget = _JsonBudget()
    resolved: list[tuple[StateItem, str]] = []
    for item in items:
        kind = item.kind or _sniff(item)
        if kind not in STATE_KINDS:
            out.problems.append((item.source, f"not recognised as state evidence (kind {kind!r})"))
            continue
        resolved.append((item, kind))

    # Describe-table captures first: a scan without a table name borrows the only one in its folder.
    describes_by_folder: dict[str, list[str]] = defaultdict(list)
    for item, kind in resolved:
        if kind != "dynamodb_table":
            continue
        try:
            rows, problems = _dynamodb.describe_table_rows(
                budget.read_text(item), host=item.host, source=item.source, capture_time=_mtime(item.path)
            )
        except (OSError, ValueError) as exc:
            rows, problems = [], [(item.source, f"cannot read describe-table capture: {exc}")]
        out.dynamo_tables.extend(rows)
        out.problems.extend(problems)
        for row in rows:
            if row.get("table"):
                describes_by_folder[str(PurePosixPath(item.source).parent)].append(row["table"])

    ctx = _ReadContext(out, describes_by_folder, budget)
    for item, kind in resolved:
        try:
            _READERS[kind](item, kind, ctx)
        except Exception as exc:  # noqa: BLE001 - the last guard: one bad file must not stop the bundle
            out.problems.append((item.source, f"unexpected error reading {kind}: {type(exc).__name__}: {exc}"))
    # Every row carries every column (None when absent), so Python users see the same shape as the tables.
    for name, schema in STATE_SCHEMAS.items():
        rows = getattr(out, name)
        rows[:] = [{f.name: row.get(f.name) for f in schema.fields} for row in rows]
    return out


@dataclass
class _ReadContext:
    """What the readers of one bundle share: the rows read so far, the tables each folder's describe-table captures
    name (a scan without a table name borrows the only one of its folder), and the JSON bytes left to read."""

    out: StateRows
    describes_by_folder: dict[str, list[str]]
    budget: _JsonBudget


#: A reader adds the rows and problems of one item of the kind it is given to ``ctx.out``; what it raises the
#: caller reports as a problem of that item.
_Reader = Callable[[StateItem, str, _ReadContext], None]
#: Kind -> its reader, in the order of :data:`STATE_KINDS` (filled by :func:`_reads`).
_READERS: dict[str, _Reader] = {}


def _reads(*kinds: str) -> Callable[[_Reader], _Reader]:
    """Register the decorated function as the reader of ``kinds``."""

    def register(fn: _Reader) -> _Reader:
        for kind in kinds:
            if kind in _READERS:
                raise ValueError(f"state kind {kind!r} has two readers")
            _READERS[kind] = fn
        return fn

    return register


@_reads("state_dir", "state_capture", "state_listing")
def _read_snapshot(item: StateItem, kind: str, ctx: _ReadContext) -> None:
    """A state folder (Kafka Streams' or NiFi's), a capture archive or its extracted manifest, or a listing."""
    path = Path(item.path)
    try:
        if kind == "state_dir" and detect_nifi_dir(path):
            snap = _nifi_wal.from_directory(path)
        elif kind == "state_dir":
            snap = _snapshot.from_directory(path)
        elif kind == "state_listing":
            snap = _snapshot.from_listing(path)
        elif path.name == MANIFEST_FILE_NAME:
            snap = _snapshot.from_extracted_manifest(path)
        else:
            snap = _snapshot.from_capture_archive(path)
    except (OSError, ValueError) as exc:
        ctx.out.problems.append((item.source, str(exc)))
        return
    if snap.product == "nifi":
        _add_nifi(ctx.out, snap, item)
        return
    rows = _kafka.read_snapshot(snap, item.host or None, item.source)
    ctx.out.state_files.extend(rows.state_files)
    ctx.out.checkpoints.extend(rows.checkpoints)
    ctx.out.problems.extend(rows.problems)


@_reads("checkpoint_file")
def _read_checkpoint_file(item: StateItem, kind: str, ctx: _ReadContext) -> None:
    """A lone ``.checkpoint`` file (an unreadable one becomes a row with its problem)."""
    path = Path(item.path)
    try:
        with open(path, "rb") as handle:
            data: bytes | None = handle.read(MAX_CHECKPOINT_BYTES + 1)
    except OSError:
        data = None
    rows = _kafka.lone_checkpoint_rows(
        data, path.name, path.parent.name or None, path.parent.parent.name or None, _mtime(path),
        item.host or None, item.source,
    )
    ctx.out.checkpoints.extend(rows.checkpoints)
    ctx.out.problems.extend(rows.problems)


@_reads("dynamodb_scan")
def _read_dynamodb_scan(item: StateItem, kind: str, ctx: _ReadContext) -> None:
    """A DynamoDB scan; its table comes from the file name, else from the only describe-table of its folder."""
    text = _json_text(item, kind, ctx)
    if text is None:
        return
    name = PurePosixPath(item.source).name
    table = _dynamodb.table_from_scan_name(name)
    if table is None:
        siblings = ctx.describes_by_folder.get(str(PurePosixPath(item.source).parent), [])
        table = siblings[0] if len(set(siblings)) == 1 else None
    rows, problems = _dynamodb.scan_rows(text, table=table, host=item.host, source=item.source,
                                         capture_time=_mtime(Path(item.path)))
    ctx.out.dynamo_items.extend(rows)
    ctx.out.problems.extend(problems)


@_reads("dynamodb_table")
def _read_dynamodb_table(item: StateItem, kind: str, ctx: _ReadContext) -> None:
    """Nothing: describe-table captures are read before every other item (:func:`collect_state_rows`)."""


@_reads("cloudtrail")
def _read_cloudtrail(item: StateItem, kind: str, ctx: _ReadContext) -> None:
    """A CloudTrail export."""
    text = _json_text(item, kind, ctx)
    if text is None:
        return
    rows, problems = _cloudtrail.cloudtrail_rows(text, host=item.host, source=item.source)
    ctx.out.cloudtrail.extend(rows)
    ctx.out.problems.extend(problems)


@_reads("nifi_state")
def _read_nifi_state(item: StateItem, kind: str, ctx: _ReadContext) -> None:
    """NiFi component state as the REST API or the toolkit's CLI prints it."""
    text = _json_text(item, kind, ctx)
    if text is None:
        return
    rows, problems = _nifi.nifi_state_rows(text, host=item.host, source=item.source,
                                           capture_time=_mtime(Path(item.path)))
    ctx.out.nifi_state.extend(rows)
    ctx.out.problems.extend(problems)


@_reads("nifi_wal_file")
def _read_nifi_wal_file(item: StateItem, kind: str, ctx: _ReadContext) -> None:
    """One NiFi write-ahead-log file found on its own."""
    try:
        snap = _nifi_wal.lone_file_snapshot(Path(item.path))
    except OSError as exc:
        ctx.out.problems.append((item.source, f"cannot read NiFi write-ahead-log file: {exc}"))
        return
    _add_nifi(ctx.out, snap, item)


def _json_text(item: StateItem, kind: str, ctx: _ReadContext) -> str | None:
    """The text of a JSON capture within the bundle's budget; ``None`` (and a problem) when it cannot be read."""
    try:
        return ctx.budget.read_text(item)
    except (OSError, ValueError) as exc:
        ctx.out.problems.append((item.source, f"cannot read {kind} capture: {exc}"))
        return None


def _add_nifi(out: StateRows, snap: Any, item: StateItem) -> None:
    files, states, problems = _nifi_wal.read_tree(snap, item.host or snap.captured_host or None, item.source)
    out.nifi_repository_files.extend(files)
    out.nifi_local_state.extend(states)
    out.problems.extend(problems)


# Every kind STATE_KINDS names has its reader, and no reader reads a kind it does not name: checked on import, so
# a kind added on one side only fails at once rather than on the first bundle holding it.
if set(_READERS) != set(STATE_KINDS):
    raise RuntimeError(f"state kinds without a reader or readers without a kind: {set(_READERS) ^ set(STATE_KINDS)}")
