"""DynamoDB captures of NiFi ConsumeKinesis checkpoint tables -> ``dynamo_tables`` and ``dynamo_items`` rows.

Inputs are the AWS CLI's JSON:

* ``aws dynamodb describe-table --table-name T`` -> ``{"Table": {...}}`` (CLI v2 ISO dates or v1 epoch seconds);
  a captured ``ResourceNotFoundException`` message becomes a row with status ``NOT_FOUND``;
* ``aws dynamodb scan --table-name T`` -> ``{"Items": [{attr: {"S": ...}}, ...], "Count": n, ...}``.

A scan does not name its table. The name is taken, in order, from a ``"TableName"`` key in the file, the file
name (``dynamodb-scan-<table>.json``, ``scan-<table>.json``, ``<table>.scan.json``), or the only
describe-table capture in the same folder; otherwise the rows keep a null table and a problem is reported.
"""

from __future__ import annotations

import base64
import json
import re
from datetime import datetime
from typing import Any

from toolkit.state.timeutil import from_epoch_millis, parse_aws_time

LEGACY_SENTINELS = ("TRIM_HORIZON", "LATEST", "SHARD_END", "AT_TIMESTAMP")
NODE_PREFIX = "__node__#"
MIGRATION_MARKER = "__migration__"
_SCAN_NAME = re.compile(r"^(?:dynamodb-scan-|scan-)(?P<table>.+?)\.json$|^(?P<table2>.+?)\.scan\.json$", re.IGNORECASE)
_DESCRIBE_NAME = re.compile(
    r"^(?:dynamodb-describe-table-|dynamodb-describe-|describe-table-|describe-)(?P<table>.+?)\.json$"
    r"|^(?P<table2>.+?)\.describe(?:-table)?\.json$",
    re.IGNORECASE,
)
_NOT_FOUND = re.compile(r"ResourceNotFoundException\)?[^\n]*?DescribeTable", re.IGNORECASE)
_NOT_FOUND_TABLE = re.compile(r"Table:\s*(?P<table>[A-Za-z0-9_.-]+)\s+not found")


def table_from_scan_name(file_name: str) -> str | None:
    """``dynamodb-scan-orders-app.json`` -> ``orders-app`` (the documented naming convention)."""
    match = _SCAN_NAME.match(file_name)
    return (match.group("table") or match.group("table2")) if match else None


def table_from_describe_name(file_name: str) -> str | None:
    match = _DESCRIBE_NAME.match(file_name)
    return (match.group("table") or match.group("table2")) if match else None


def plain_value(value: Any) -> Any:
    """A DynamoDB typed attribute value (``{"S": "x"}``, ``{"N": "1"}``, ``{"SS": [...]}``...) as plain JSON.

    Numbers stay strings (``N`` is a decimal string of up to 38 digits); binary stays base64 text.
    Values that are not typed wrappers are returned as they are.
    """
    if isinstance(value, dict) and len(value) == 1:
        (tag, inner), = value.items()
        if tag in ("S", "N", "B"):
            return inner
        if tag in ("SS", "NS", "BS"):
            return list(inner) if isinstance(inner, list) else inner
        if tag == "M" and isinstance(inner, dict):
            return {k: plain_value(v) for k, v in inner.items()}
        if tag == "L" and isinstance(inner, list):
            return [plain_value(v) for v in inner]
        if tag == "NULL":
            return None
        if tag == "BOOL":
            return bool(inner)
    return value


def classify_key_schema(key_schema: list[dict[str, Any]]) -> str:
    """NiFi 2.9's ``CheckpointTableUtils`` rule: LEGACY = only ``leaseKey`` HASH; NEW = ``streamName`` HASH +
    ``shardId`` RANGE; anything else UNKNOWN."""
    keys = sorted((str(k.get("AttributeName")), str(k.get("KeyType"))) for k in key_schema if isinstance(k, dict))
    if keys == [("leaseKey", "HASH")]:
        return "LEGACY"
    if keys == [("shardId", "RANGE"), ("streamName", "HASH")]:
        return "NEW"
    return "UNKNOWN"


def _key_schema_text(key_schema: list[dict[str, Any]]) -> str:
    order = {"HASH": 0, "RANGE": 1}
    keys = sorted(
        (k for k in key_schema if isinstance(k, dict)), key=lambda k: order.get(str(k.get("KeyType")), 2)
    )
    return ", ".join(f"{k.get('AttributeName')} {k.get('KeyType')}" for k in keys)


def _as_long(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(str(value).split(".")[0]) if str(value).lstrip("-").split(".")[0].isdigit() else None
    except ValueError:
        return None


def describe_table_rows(
    text: str, *, host: str | None, source: str, capture_time: datetime | None
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Rows for one describe-table capture (JSON, or the CLI's not-found error text)."""
    base = {"host": host, "source": source, "capture_time": capture_time}
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        if _NOT_FOUND.search(text):
            match = _NOT_FOUND_TABLE.search(text)
            file_table = table_from_describe_name(source.rsplit("/", 1)[-1])
            return [{**base, "table": match.group("table") if match else file_table, "status": "NOT_FOUND"}], []
        return [], [(source, f"describe-table capture is not valid JSON: {exc.msg} at line {exc.lineno}")]
    tables = document.get("Table") if isinstance(document, dict) else None
    if not isinstance(tables, dict):
        return [], [(source, 'describe-table capture has no "Table" object')]
    key_schema = tables.get("KeySchema") if isinstance(tables.get("KeySchema"), list) else []
    billing = tables.get("BillingModeSummary") if isinstance(tables.get("BillingModeSummary"), dict) else {}
    row = {
        **base,
        "table": tables.get("TableName"),
        "key_schema": _key_schema_text(key_schema),
        "schema_kind": classify_key_schema(key_schema),
        "status": tables.get("TableStatus"),
        "creation_time": parse_aws_time(tables.get("CreationDateTime")),
        "item_count": _as_long(tables.get("ItemCount")),
        "size_bytes": _as_long(tables.get("TableSizeBytes")),
        "billing_mode": billing.get("BillingMode"),
        "table_arn": tables.get("TableArn"),
        "table_id": tables.get("TableId"),
    }
    return [row], []


def scan_rows(
    text: str, *, table: str | None, host: str | None, source: str, capture_time: datetime | None
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Rows for one scan capture; ``table`` is the name resolved by the caller (a ``TableName`` key wins)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        return [], [(source, f"scan capture is not valid JSON: {exc.msg} at line {exc.lineno}")]
    if not isinstance(document, dict) or not isinstance(document.get("Items"), list):
        return [], [(source, 'scan capture has no "Items" list')]
    problems: list[tuple[str, str]] = []
    table = document.get("TableName") if isinstance(document.get("TableName"), str) else table
    if table is None:
        problems.append((source, "scan does not say which table it is: name the file dynamodb-scan-<table>.json"))
    if "NextToken" in document or "LastEvaluatedKey" in document:
        problems.append((source, "scan output is paginated (NextToken/LastEvaluatedKey): items may be missing"))
    rows = []
    for number, item in enumerate(document["Items"], start=1):
        if not isinstance(item, dict):
            problems.append((source, f"item {number} is not an object; skipped"))
            continue
        rows.append(item_row(item, table=table, host=host, source=source, capture_time=capture_time))
    return rows, problems


def item_row(
    item: dict[str, Any], *, table: str | None, host: str | None, source: str, capture_time: datetime | None
) -> dict[str, Any]:
    """One checkpoint-table item: legacy KCL lease (``leaseKey``) or NiFi 2.9+ (``streamName`` + ``shardId``)."""
    plain = {str(k): plain_value(v) for k, v in item.items()}

    def text(name: str) -> str | None:
        value = plain.get(name)
        if value is None:
            return None
        return value if isinstance(value, str) else json.dumps(value)

    def joined(name: str) -> str | None:
        value = plain.get(name)
        if isinstance(value, list):
            return ",".join(str(v) for v in sorted(value))
        return text(name)

    row: dict[str, Any] = {
        "host": host,
        "source": source,
        "table": table,
        "owner": text("leaseOwner"),
        "lease_expiry": from_epoch_millis(plain.get("leaseExpiry")),
        "last_update": from_epoch_millis(plain.get("lastUpdateTimestamp")),
        "lease_counter": _as_long(plain.get("leaseCounter")),
        "owner_switches_since_checkpoint": _as_long(plain.get("ownerSwitchesSinceCheckpoint")),
        "parent_shard_ids": joined("parentShardId"),
        "child_shard_ids": joined("childShardIds"),
        "checkpoint_owner": text("checkpointOwner"),
        "item_json": json.dumps(plain, sort_keys=True, default=_json_default),
        "capture_time": capture_time,
    }
    if "streamName" in plain and "shardId" in plain:
        shard = text("shardId") or ""
        row.update(schema_kind="NEW", stream=text("streamName"), checkpoint=text("sequenceNumber"))
        if shard.startswith(NODE_PREFIX):
            row.update(kind="node_heartbeat", node_id=shard[len(NODE_PREFIX) :],
                       node_heartbeat=from_epoch_millis(plain.get("nodeHeartbeat")))
        elif shard == MIGRATION_MARKER:
            row.update(
                kind="migration_marker",
                migration_status=text("migrationStatus"),
                migration_owner=text("migrationOwner"),
                migration_started_at=from_epoch_millis(plain.get("migrationStartedAt")),
                migration_completed_at=from_epoch_millis(plain.get("migrationCompletedAt")),
                rename_owner=text("renameOwner"),
                rename_started_at=from_epoch_millis(plain.get("renameStartedAt")),
            )
        else:
            row.update(kind="shard", shard_id=shard)
    elif "leaseKey" in plain:
        lease_key = text("leaseKey") or ""
        parts = lease_key.split(":")
        checkpoint = text("checkpoint")
        row.update(
            schema_kind="LEGACY",
            kind="legacy_lease",
            lease_key=lease_key,
            # Multi-stream KCL keys are "<account>:<stream>:<creationEpoch>:<shardId>"; NiFi's migrator keeps
            # the text after the last ':' as the shard id.
            shard_id=parts[-1],
            stream=parts[1] if len(parts) >= 4 else None,
            checkpoint=checkpoint,
            checkpoint_sentinel=checkpoint if checkpoint in LEGACY_SENTINELS else None,
            checkpoint_sub_sequence=_as_long(plain.get("checkpointSubSequenceNumber")),
        )
    else:
        row.update(schema_kind="UNKNOWN", kind="unknown")
    return row


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return str(value)
