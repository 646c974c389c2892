"""CloudTrail evidence -> ``cloudtrail`` rows (and event-like rows the timeline can merge with log events).

Accepted file shapes (all JSON):

* a trail log file ``{"Records": [event, ...]}``;
* ``aws cloudtrail lookup-events`` output ``{"Events": [{"EventName", "EventTime", "CloudTrailEvent": "<json>"}]}``;
* one event object, a JSON array of events, JSON lines (one event per line);
* an EventBridge envelope ``{"detail-type": "AWS API Call via CloudTrail", "detail": event}``.

Event mapping (``event`` column), from the NiFi reference's canonical vocabulary:

=========================  ==========================================================================
eventName (no errorCode)   event
=========================  ==========================================================================
CreateTable                ``MIGRATION_TABLE_CREATE_REQUESTED`` for ``*_migration``, else ``CHECKPOINT_TABLE_CREATED``
DeleteTable                ``MIGRATION_TABLE_DELETED`` for ``*_migration``, else ``CHECKPOINT_TABLE_DELETED``
DescribeTable              ``CHECKPOINT_TABLE_SCHEMA_DETECTED``
UpdateItem                 ``CHECKPOINT_WRITTEN``
RegisterStreamConsumer     ``EFO_CONSUMER_REGISTERED``
PutItem + ValidationException  ``MIGRATION_COPY_FAILED`` (the NIFI-16003 copy failure)
anything else              ``CLOUDTRAIL_<EVENT_NAME_IN_SNAKE_CASE>`` (e.g. ``CLOUDTRAIL_PUT_ITEM``)
=========================  ==========================================================================

A call that failed (``errorCode`` set) never maps to a "done" event: it keeps the ``CLOUDTRAIL_*`` name.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from toolkit.state.timeutil import parse_aws_time

_SNAKE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WHITESPACE = re.compile(r"[\s,]*")
MIGRATION_SUFFIX = "_migration"


def cloudtrail_event_name(event_name: str | None) -> str:
    """``DeleteTable`` -> ``CLOUDTRAIL_DELETE_TABLE``."""
    return "CLOUDTRAIL_" + _SNAKE.sub("_", event_name or "UNKNOWN").upper()


def canonical_event(event_name: str | None, table: str | None, error_code: str | None) -> str:
    """The timeline event for one CloudTrail record (see the module docstring for the table)."""
    is_migration = bool(table and table.endswith(MIGRATION_SUFFIX))
    if error_code:
        if event_name == "PutItem" and error_code == "ValidationException":
            return "MIGRATION_COPY_FAILED"
        return cloudtrail_event_name(event_name)
    if event_name == "CreateTable":
        return "MIGRATION_TABLE_CREATE_REQUESTED" if is_migration else "CHECKPOINT_TABLE_CREATED"
    if event_name == "DeleteTable":
        return "MIGRATION_TABLE_DELETED" if is_migration else "CHECKPOINT_TABLE_DELETED"
    if event_name == "DescribeTable":
        return "CHECKPOINT_TABLE_SCHEMA_DETECTED"
    if event_name == "UpdateItem":
        return "CHECKPOINT_WRITTEN"
    if event_name == "RegisterStreamConsumer":
        return "EFO_CONSUMER_REGISTERED"
    return cloudtrail_event_name(event_name)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _array_elements(text: str, key: str | None) -> Iterator[tuple[Any, int]]:
    """Elements of the top-level ``key`` array (or of a top-level array) with the line each starts on."""
    decoder = json.JSONDecoder()
    match = re.search(r'"%s"\s*:\s*\[' % re.escape(key), text) if key else re.search(r"\[", text)
    if match is None:
        return
    position = match.end()
    while True:
        position = _WHITESPACE.match(text, position).end()
        if position >= len(text) or text[position] == "]":
            return
        value, end = decoder.raw_decode(text, position)
        yield value, _line_of(text, position)
        position = end


def _with_lines(text: str, key: str | None, parsed: list[Any]) -> list[tuple[Any, int | None]]:
    """Pair each parsed element with its start line; without line numbers if locating them fails."""
    try:
        located = list(_array_elements(text, key))
    except (json.JSONDecodeError, ValueError, AttributeError):
        located = []
    if len(located) == len(parsed):
        return located
    return [(value, None) for value in parsed]


def _events(text: str) -> tuple[list[tuple[Any, int]], list[str]]:
    """(event-like objects with their line numbers, problems) for one file."""
    problems: list[str] = []
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        # JSON lines: every non-blank line an event.
        lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        found = []
        for number, line in lines:
            try:
                found.append((json.loads(line), number))
            except json.JSONDecodeError:
                return [], [f"not valid JSON: {exc.msg} at line {exc.lineno}"]
        return found, problems
    for key in ("Records", "Events"):
        if isinstance(document, dict) and isinstance(document.get(key), list):
            return _with_lines(text, key, document[key]), problems
    if isinstance(document, list):
        return _with_lines(text, None, document), problems
    if isinstance(document, dict):
        return [(document, 1)], problems
    return [], ["JSON is neither an event, a Records/Events list nor an array"]


def _unwrap(event: Any) -> tuple[dict[str, Any] | None, str | None]:
    """A CloudTrail record from a trail record, a lookup-events entry or an EventBridge envelope."""
    if not isinstance(event, dict):
        return None, "event is not an object"
    if "CloudTrailEvent" in event:
        inner = event["CloudTrailEvent"]
        if isinstance(inner, str):
            try:
                inner = json.loads(inner)
            except json.JSONDecodeError as exc:
                return None, f"CloudTrailEvent string is not valid JSON: {exc.msg}"
        if isinstance(inner, dict):
            return inner, None
        return None, "CloudTrailEvent is not an object"
    if isinstance(event.get("detail"), dict) and "eventName" in event["detail"]:
        return event["detail"], None
    if "eventName" in event:
        return event, None
    return None, "object has no eventName"


def _table_of(record: dict[str, Any]) -> str | None:
    params = record.get("requestParameters")
    if isinstance(params, dict):
        for key in ("tableName", "TableName"):
            if isinstance(params.get(key), str):
                return params[key].rsplit("/", 1)[-1]  # a table ARN is accepted as a name too
    for resource in record.get("resources") or []:
        if isinstance(resource, dict) and str(resource.get("type", "")).endswith("Table"):
            arn = str(resource.get("ARN") or resource.get("arn") or "")
            if "/" in arn:
                return arn.rsplit("/", 1)[-1]
    return None


def cloudtrail_rows(text: str, *, host: str | None, source: str) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Rows for one CloudTrail capture file; never raises on bad JSON."""
    try:
        found, file_problems = _events(text)
    except (json.JSONDecodeError, ValueError) as exc:
        return [], [(source, f"CloudTrail capture is not valid JSON: {exc}")]
    problems = [(source, p) for p in file_problems]
    rows = []
    for raw, line_no in found:
        record, why = _unwrap(raw)
        if record is None:
            problems.append((source, f"line {line_no}: {why}"))
            continue
        identity = record.get("userIdentity") if isinstance(record.get("userIdentity"), dict) else {}
        table = _table_of(record)
        error_code = record.get("errorCode")
        event_name = record.get("eventName")
        read_only = record.get("readOnly")
        if isinstance(read_only, str):
            read_only = read_only.lower() == "true"
        rows.append(
            {
                "host": host,
                "source": source,
                "line_no": line_no,
                "time": parse_aws_time(record.get("eventTime")),
                "event_name": event_name,
                "event": canonical_event(event_name, table, error_code),
                "event_source": record.get("eventSource"),
                "table": table,
                "error_code": error_code,
                "error_message": record.get("errorMessage"),
                "request_id": record.get("requestID"),
                "event_id": record.get("eventID"),
                "aws_region": record.get("awsRegion"),
                "user_arn": identity.get("arn"),
                "user_agent": record.get("userAgent"),
                "source_ip": record.get("sourceIPAddress"),
                "read_only": read_only if isinstance(read_only, bool) else None,
                "event_category": record.get("eventCategory"),
            }
        )
    return rows, problems


def cloudtrail_as_events(cloudtrail: DataFrame) -> DataFrame:
    """CloudTrail rows shaped like log events so the timeline can union them with ``toolkit.events`` output.

    Columns: source, line_no, host, ts, product (``aws``), event, table, error_class (the errorCode),
    message (errorMessage, else ``<eventName> <table>``), request_id, event_name.
    """
    return cloudtrail.select(
        "source",
        "line_no",
        "host",
        F.col("time").alias("ts"),
        F.lit("aws").alias("product"),
        "event",
        "table",
        F.col("error_code").alias("error_class"),
        F.coalesce(F.col("error_message"), F.concat_ws(" ", "event_name", "table")).alias("message"),
        "request_id",
        "event_name",
    )
