"""DynamoDB describe-table / scan captures, CloudTrail events and NiFi REST state -> state tables."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

from pyspark.sql import functions as F

from toolkit.state import StateItem, collect_state_rows, detect_evidence_file, read_state

APP = "orders-app"
NODE = "8d3c2f0e-7c6b-4f3e-9a59-2f1d2d7d1c11"
SEQ = "49655550958741229375361339462163826396553217637213356082"
COPY_ERROR = "One or more parameter values were invalid: Missing the key leaseKey in the item"


def ms(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


DESCRIBE_NEW = {
    "Table": {
        "AttributeDefinitions": [{"AttributeName": "streamName", "AttributeType": "S"},
                                 {"AttributeName": "shardId", "AttributeType": "S"}],
        "TableName": APP,
        "KeySchema": [{"AttributeName": "streamName", "KeyType": "HASH"},
                      {"AttributeName": "shardId", "KeyType": "RANGE"}],
        "TableStatus": "ACTIVE",
        "CreationDateTime": "2026-04-08T09:12:30.114000+00:00",
        "ProvisionedThroughput": {"NumberOfDecreasesToday": 0, "ReadCapacityUnits": 0, "WriteCapacityUnits": 0},
        "TableSizeBytes": 0,
        "ItemCount": 0,
        "TableArn": f"arn:aws:dynamodb:eu-west-1:111122223333:table/{APP}",
        "TableId": "0b6c1f3e-1111-4a2b-9c3d-5e6f7a8b9c0d",
        "BillingModeSummary": {"BillingMode": "PAY_PER_REQUEST"},
        "DeletionProtectionEnabled": False,
    }
}
# CLI v1 prints epoch seconds with a fraction.
DESCRIBE_LEGACY_V1 = {
    "Table": {
        "TableName": "legacy-app",
        "KeySchema": [{"AttributeName": "leaseKey", "KeyType": "HASH"}],
        "TableStatus": "ACTIVE",
        "CreationDateTime": 1775639550.114,
        "ItemCount": 2,
        "TableSizeBytes": 812,
    }
}
SCAN_NEW = {
    "Items": [
        {"streamName": {"S": "orders"}, "shardId": {"S": "shardId-000000000003"},
         "sequenceNumber": {"S": SEQ}, "lastUpdateTimestamp": {"N": "1775639551402"},
         "leaseOwner": {"S": NODE}, "leaseExpiry": {"N": "1775639581402"}},
        {"streamName": {"S": "orders"}, "shardId": {"S": f"__node__#{NODE}"},
         "nodeHeartbeat": {"N": "1775639551390"}, "lastUpdateTimestamp": {"N": "1775639551390"}},
        {"streamName": {"S": "orders"}, "shardId": {"S": "__migration__"},
         "migrationStatus": {"S": "COMPLETE"}, "migrationOwner": {"S": NODE},
         "migrationStartedAt": {"N": "1775639540000"}, "migrationCompletedAt": {"N": "1775639545500"},
         "lastUpdateTimestamp": {"N": "1775639545500"}, "renameOwner": {"S": NODE},
         "renameStartedAt": {"N": "1775639546000"}},
    ],
    "Count": 3,
    "ScannedCount": 3,
    "ConsumedCapacity": None,
}
SCAN_LEGACY = {
    "Items": [
        {"leaseKey": {"S": "shardId-000000000000"}, "checkpoint": {"S": "49655550958741229375361339462163826396553217637213356000"},
         "checkpointSubSequenceNumber": {"N": "0"}, "leaseCounter": {"N": "5321"},
         "leaseOwner": {"S": "5f0c2a1e-0190-1000-ffff-ffffb3c0e1a2@node-2"}, "ownerSwitchesSinceCheckpoint": {"N": "0"},
         "childShardIds": {"SS": ["shardId-000000000004", "shardId-000000000003"]}},
        {"leaseKey": {"S": "shardId-000000000001"}, "checkpoint": {"S": "SHARD_END"},
         "checkpointSubSequenceNumber": {"N": "0"}, "leaseCounter": {"N": "17"},
         "parentShardId": {"SS": ["shardId-000000000000"]}, "throughputKBps": {"N": "1.5"}},
        {"leaseKey": {"S": "111122223333:orders:1775000000:shardId-000000000002"}, "checkpoint": {"S": "TRIM_HORIZON"}},
    ],
    "Count": 3,
    "ScannedCount": 3,
}


def trail_event(name: str, table: str, at: str, request_id: str, **extra) -> dict:
    event = {
        "eventVersion": "1.09",
        "userIdentity": {"type": "AssumedRole", "arn": "arn:aws:sts::111122223333:assumed-role/nifi/i-0abc",
                         "accountId": "111122223333"},
        "eventTime": at,
        "eventSource": "dynamodb.amazonaws.com",
        "eventName": name,
        "awsRegion": "eu-west-1",
        "sourceIPAddress": "10.0.3.17",
        "userAgent": "aws-sdk-java/2.31.6 Linux/6.1 OpenJDK_64-Bit_Server_VM/21",
        "requestParameters": {"tableName": table},
        "responseElements": None,
        "requestID": request_id,
        "eventID": f"evt-{request_id}",
        "readOnly": False,
        "eventType": "AwsApiCall",
        "managementEvent": name.endswith("Table"),
        "eventCategory": "Management" if name.endswith("Table") else "Data",
    }
    event.update(extra)
    return event


RECORDS = {
    "Records": [
        trail_event("DeleteTable", APP, "2026-04-08T09:12:26Z", "REQ1"),
        trail_event("CreateTable", APP, "2026-04-08T09:12:30Z", "REQ2"),
        trail_event("PutItem", APP, "2026-04-08T09:12:31Z", "REQ3", errorCode="ValidationException",
                    errorMessage=COPY_ERROR),
    ]
}
LOOKUP = {
    "Events": [
        {"EventId": "evt-REQ4", "EventName": "DeleteTable", "ReadOnly": "false",
         "EventTime": "2026-04-08T09:13:01+00:00", "EventSource": "dynamodb.amazonaws.com",
         "Username": "nifi",
         "CloudTrailEvent": json.dumps(trail_event("DeleteTable", f"{APP}_migration", "2026-04-08T09:13:01Z", "REQ4"))},
        {"EventId": "evt-REQ5", "EventName": "CreateTable",
         "CloudTrailEvent": json.dumps(trail_event("CreateTable", f"{APP}_migration", "2026-04-08T09:12:10Z", "REQ5"))},
    ]
}
NIFI_STATE = {
    "componentState": {
        "componentId": "5f0c2a1e-0190-1000-ffff-ffffb3c0e1a2",
        "stateDescription": "Stores the last listed timestamp",
        "clusterState": {"scope": "CLUSTER", "totalEntryCount": 1, "state": [{"key": "listing.timestamp", "value": "1775639551402"}]},
        "localState": {"scope": "LOCAL", "totalEntryCount": 1, "state": [
            {"key": "id", "value": "7", "clusterNodeId": "node-2", "clusterNodeAddress": "nifi-2:8443"}]},
        "dropStateKeySupported": False,
    }
}


def write(folder: Path, name: str, content, mtime_ns: int = 1_775_640_000_123_456_000) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2))
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def evidence(tmp_path: Path) -> list[StateItem]:
    """The files of one NiFi host's capture, kinds sniffed as the bundle walker would."""
    files = [
        write(tmp_path / "aws", f"dynamodb-describe-{APP}.json", DESCRIBE_NEW),
        write(tmp_path / "aws", f"dynamodb-scan-{APP}.json", SCAN_NEW),
        write(tmp_path / "aws" / "legacy", "describe.json", DESCRIBE_LEGACY_V1),
        write(tmp_path / "aws" / "legacy", "items.json", SCAN_LEGACY),  # table from the sibling describe-table
        write(tmp_path / "aws", f"dynamodb-describe-{APP}_migration.json",
              f"\nAn error occurred (ResourceNotFoundException) when calling the DescribeTable operation: "
              f"Requested resource not found: Table: {APP}_migration not found\n"),
        write(tmp_path / "trail", "trail.json", RECORDS),
        write(tmp_path / "trail", "lookup.json", LOOKUP),
        write(tmp_path / "trail", "single.json", trail_event("DescribeTable", APP, "2026-04-08T09:12:20Z", "REQ6")),
        write(tmp_path / "nifi", "state.json", NIFI_STATE),
    ]
    return [StateItem("nifi-1", p, str(p.relative_to(tmp_path)), detect_evidence_file(p) or "") for p in files]


def test_sniffing_names_every_evidence_kind(tmp_path):
    kinds = {item.source: item.kind for item in evidence(tmp_path)}
    assert kinds == {
        f"aws/dynamodb-describe-{APP}.json": "dynamodb_table",
        f"aws/dynamodb-scan-{APP}.json": "dynamodb_scan",
        "aws/legacy/describe.json": "dynamodb_table",
        "aws/legacy/items.json": "dynamodb_scan",
        f"aws/dynamodb-describe-{APP}_migration.json": "dynamodb_table",
        "trail/trail.json": "cloudtrail",
        "trail/lookup.json": "cloudtrail",
        "trail/single.json": "cloudtrail",
        "nifi/state.json": "nifi_state",
    }
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "random.bin").write_bytes(os.urandom(5000))
    (junk / "notes.json").write_text('{"hello": "world"}')
    (junk / "empty.json").write_text("")
    (junk / "app.log").write_text("2026-04-08 09:00:00,000 INFO started\n")
    assert {detect_evidence_file(p) for p in junk.iterdir()} == {None}


def test_describe_table_new_legacy_and_not_found(tmp_path):
    rows = collect_state_rows(evidence(tmp_path))
    tables = {r["table"]: r for r in rows.dynamo_tables}
    new = tables[APP]
    assert (new["key_schema"], new["schema_kind"], new["status"]) == ("streamName HASH, shardId RANGE", "NEW", "ACTIVE")
    assert new["creation_time"] == ms("2026-04-08T09:12:30.114000")
    assert (new["item_count"], new["billing_mode"], new["table_id"]) == (0, "PAY_PER_REQUEST", DESCRIBE_NEW["Table"]["TableId"])
    assert new["capture_time"] == ms("2026-04-08T09:20:00.123456")
    legacy = tables["legacy-app"]
    assert (legacy["key_schema"], legacy["schema_kind"], legacy["item_count"]) == ("leaseKey HASH", "LEGACY", 2)
    assert legacy["creation_time"] == ms("2026-04-08T09:12:30.114000")
    assert tables[f"{APP}_migration"]["status"] == "NOT_FOUND"


def test_scan_of_new_schema_table(tmp_path):
    rows = collect_state_rows(evidence(tmp_path))
    items = {r["kind"]: r for r in rows.dynamo_items if r["table"] == APP}
    shard = items["shard"]
    assert (shard["schema_kind"], shard["stream"], shard["shard_id"], shard["checkpoint"], shard["owner"]) == (
        "NEW", "orders", "shardId-000000000003", SEQ, NODE)
    assert shard["last_update"] == ms("2026-04-08T09:12:31.402000")
    assert shard["lease_expiry"] == ms("2026-04-08T09:13:01.402000")
    heartbeat = items["node_heartbeat"]
    assert (heartbeat["node_id"], heartbeat["shard_id"]) == (NODE, None)
    assert heartbeat["node_heartbeat"] == ms("2026-04-08T09:12:31.390000")
    marker = items["migration_marker"]
    assert (marker["migration_status"], marker["migration_owner"], marker["rename_owner"]) == ("COMPLETE", NODE, NODE)
    assert marker["migration_completed_at"] == ms("2026-04-08T09:12:25.500000")
    assert json.loads(shard["item_json"])["sequenceNumber"] == SEQ


def test_scan_of_legacy_kcl_table_with_sentinels(tmp_path):
    rows = collect_state_rows(evidence(tmp_path))
    leases = {r["shard_id"]: r for r in rows.dynamo_items if r["table"] == "legacy-app"}
    assert len(leases) == 3 and {r["kind"] for r in leases.values()} == {"legacy_lease"}
    first = leases["shardId-000000000000"]
    assert (first["lease_key"], first["checkpoint"], first["checkpoint_sentinel"]) == (
        "shardId-000000000000", SCAN_LEGACY["Items"][0]["checkpoint"]["S"], None)
    assert (first["lease_counter"], first["checkpoint_sub_sequence"], first["owner"]) == (
        5321, 0, "5f0c2a1e-0190-1000-ffff-ffffb3c0e1a2@node-2")
    assert first["child_shard_ids"] == "shardId-000000000003,shardId-000000000004"
    assert leases["shardId-000000000001"]["checkpoint_sentinel"] == "SHARD_END"
    assert leases["shardId-000000000001"]["parent_shard_ids"] == "shardId-000000000000"
    multi = leases["shardId-000000000002"]
    assert (multi["stream"], multi["checkpoint_sentinel"]) == ("orders", "TRIM_HORIZON")


def test_cloudtrail_delete_create_and_failed_put(tmp_path):
    rows = collect_state_rows(evidence(tmp_path))
    by_request = {r["request_id"]: r for r in rows.cloudtrail}
    assert len(rows.cloudtrail) == 6
    delete = by_request["REQ1"]
    assert (delete["event_name"], delete["event"], delete["table"], delete["error_code"]) == (
        "DeleteTable", "CHECKPOINT_TABLE_DELETED", APP, None)
    assert delete["time"] == ms("2026-04-08T09:12:26")
    assert delete["line_no"] == 3  # the pretty-printed file's first record starts on line 3
    assert by_request["REQ2"]["event"] == "CHECKPOINT_TABLE_CREATED"
    put = by_request["REQ3"]
    assert (put["event_name"], put["error_code"], put["error_message"], put["event"]) == (
        "PutItem", "ValidationException", COPY_ERROR, "MIGRATION_COPY_FAILED")
    assert put["event_category"] == "Data" and put["user_arn"].endswith("assumed-role/nifi/i-0abc")
    assert by_request["REQ4"]["event"] == "MIGRATION_TABLE_DELETED"
    assert by_request["REQ4"]["table"] == f"{APP}_migration"
    assert by_request["REQ5"]["event"] == "MIGRATION_TABLE_CREATE_REQUESTED"
    assert by_request["REQ6"]["event"] == "CHECKPOINT_TABLE_SCHEMA_DETECTED"


def test_nifi_rest_state(tmp_path):
    rows = collect_state_rows(evidence(tmp_path))
    state = {(r["scope"], r["key"]): r for r in rows.nifi_state}
    assert state[("CLUSTER", "listing.timestamp")]["value"] == "1775639551402"
    local = state[("LOCAL", "id")]
    assert (local["value"], local["cluster_node_id"], local["cluster_node_address"]) == ("7", "node-2", "nifi-2:8443")


def test_malformed_json_and_unnamed_scans_are_problems(tmp_path):
    folder = tmp_path / "bad"
    items = [
        StateItem("h", write(folder, "dynamodb-scan-x.json", '{"Items": [{"leaseKey": {"S": "sh'), "bad/scan", "dynamodb_scan"),
        StateItem("h", write(folder, "describe.json", "{]"), "bad/describe", "dynamodb_table"),
        StateItem("h", write(folder, "trail.json", '{"Records": [{"eventName": '), "bad/trail", "cloudtrail"),
        StateItem("h", write(folder, "state.json", "[1, 2]"), "bad/state", "nifi_state"),
        StateItem("h", write(folder / "other", "items.json", SCAN_NEW), "other/items.json", "dynamodb_scan"),
        StateItem("h", write(folder, "x.bin", "\x00\x01"), "bad/x.bin", ""),
        StateItem("h", folder / "gone.json", "bad/gone.json", "cloudtrail"),
    ]
    rows = collect_state_rows(items)
    sources = [s for s, _ in rows.problems]
    for source in ("bad/scan", "bad/describe", "bad/trail", "bad/state", "other/items.json", "bad/x.bin", "bad/gone.json"):
        assert source in sources, source
    assert len(rows.dynamo_items) == 3 and {r["table"] for r in rows.dynamo_items} == {None}


ODD_TYPES = {"Table": {"TableName": 5, "KeySchema": [{"AttributeName": ["x"], "KeyType": "HASH"}],
                       "TableStatus": {"odd": True}, "ItemCount": "many", "CreationDateTime": "yesterday"}}


def test_garbage_of_every_kind_never_raises(tmp_path):
    samples = [b"", b"\x00" * 10, os.urandom(3000), b"{", b"[]", b"null", b'{"Items": 5}', b'"text"', b"12",
               b'{"Items": [1, {"x": {"S": 1}}]}', b'{"Records": [1, "a", {"CloudTrailEvent": "{bad"}]}',
               b'{"componentState": {"componentId": 1, "localState": {"state": [1, {"key": [1]}]}}}',
               b'{"format": "stream-incident-state-capture", "entries": [1, {"path": null}]}',
               b"# stream-incident state listing v1\nf x y z\n"]
    kinds = ("state_capture", "state_listing", "checkpoint_file", "dynamodb_scan", "dynamodb_table",
             "cloudtrail", "nifi_state")
    items = []
    for number, data in enumerate(samples):
        path = tmp_path / f"sample-{number}.json"
        path.write_bytes(data)
        detect_evidence_file(path)
        items += [StateItem("h", path, f"{kind}/{number}", kind) for kind in kinds]
    rows = collect_state_rows(items)
    assert rows.problems and not [p for p in rows.problems if "unexpected error" in p[1]]


def test_read_state_aws_tables_and_timeline_events(spark, tmp_path):
    odd = write(tmp_path / "odd", "describe-odd.json", ODD_TYPES)
    tables = read_state(spark, [*evidence(tmp_path), StateItem("h", odd, "odd/describe-odd.json", "dynamodb_table")])
    assert tables.problems == []
    odd_row = tables.dynamo_tables.where("source LIKE 'odd/%'").first()
    assert (odd_row.table, odd_row.schema_kind, odd_row.item_count, odd_row.creation_time) == ("5", "UNKNOWN", None, None)
    events = (
        tables.cloudtrail_events()
        .select("ts", "event", "table", "error_class", "message", "product", F.unix_micros("ts").alias("us"))
        .orderBy("ts")
        .collect()
    )
    assert [e.event for e in events] == [
        "MIGRATION_TABLE_CREATE_REQUESTED", "CHECKPOINT_TABLE_SCHEMA_DETECTED", "CHECKPOINT_TABLE_DELETED",
        "CHECKPOINT_TABLE_CREATED", "MIGRATION_COPY_FAILED", "MIGRATION_TABLE_DELETED"]
    failed = events[4]
    assert (failed.error_class, failed.message, failed.product) == ("ValidationException", COPY_ERROR, "aws")
    assert failed.us == int(ms("2026-04-08T09:12:31").timestamp() * 1_000_000)
    lease = tables.dynamo_items.where("kind = 'legacy_lease' AND checkpoint_sentinel IS NULL").first()
    assert lease.lease_counter == 5321 and lease.table == "legacy-app"


def test_json_evidence_past_the_bundle_total_is_reported_not_read(tmp_path, monkeypatch):
    """The driver reads JSON evidence up to a total per bundle; later files become problem rows."""
    import toolkit.state as state

    events = [trail_event("DeleteTable", APP, "2026-04-08T09:12:26Z", f"REQ{n}") for n in range(3)]
    files = [write(tmp_path / "trail", f"trail-{n}.json", {"Records": [event]}) for n, event in enumerate(events)]
    items = [StateItem("h", f, f"trail/{f.name}", "cloudtrail") for f in files]
    first_two = sum(f.stat().st_size for f in files[:2])
    monkeypatch.setattr(state, "MAX_JSON_TOTAL_BYTES", first_two)
    rows = collect_state_rows(items)
    assert sorted(r["request_id"] for r in rows.cloudtrail) == ["REQ0", "REQ1"]
    assert [(source, "passed the" in reason) for source, reason in rows.problems] == [("trail/trail-2.json", True)]
