"""Column contracts of the state tables (``toolkit.state``): what later stages may rely on.

All timestamps are UTC (TimestampType, session time zone UTC). ``host`` is the bundle's host attribution,
``source`` the path inside the bundle of the evidence (the state folder, capture archive or JSON file).
"""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from toolkit.schemas import struct


S, L, I, T, B = StringType(), LongType(), IntegerType(), TimestampType(), BooleanType()

#: One row per file or folder of a Kafka Streams state directory (read directly, from a capture or a listing).
STATE_FILES_SCHEMA = struct(
    ("host", S),
    ("source", S),
    ("app_id", S),  # application.id folder; null for files directly in state.dir
    ("topology", S),  # named topology (``__name__`` folder), else null
    ("task_id", S),  # ``0_1``; ``global`` for global stores
    ("store", S),
    ("kind", S),  # see KINDS in kafka_state.py
    ("path", S),  # relative to state.dir: ``<app>/<task>/...`` (``.`` for the state.dir itself)
    ("is_dir", B),
    ("size", L),
    ("mode", S),  # ``0644``
    ("mtime", T),
    ("capture_time", T),  # when the capture was taken; null when a copied folder was read
    ("file_count", L),  # folders only: regular files beneath, recursively
    ("sst_count", L),
    ("bytes", L),
    ("newest_mtime", T),  # folders only: newest mtime of the files beneath
    ("offsets_in_store", B),  # RocksDB store with an ``offsets`` column family (KIP-1035, 4.3); null = unknown
    ("process_id", S),  # kafka-streams-process-metadata only
    ("version_hint", S),  # Kafka Streams versions the app folder's layout fits, e.g. ``2.8+``, ``<=2.8``, ``4.3``
    ("note", S),
)

#: One row per entry of a ``.checkpoint``-format file (or one row with ``problem`` for an unreadable file).
#: Captured files that hold changelog offsets a restart reads (a task's ``.checkpoint``, 4.3's ``.checkpoint_<store>``).
#: ``<store>.position`` holds input-topic positions and ``.checkpoint.tmp`` is a write in progress: neither is one.
CHANGELOG_CHECKPOINT_FILES: tuple[str, ...] = ("checkpoint", "store_checkpoint")

CHECKPOINTS_SCHEMA = struct(
    ("host", S),
    ("source", S),
    ("app_id", S),
    ("topology", S),
    ("task_id", S),
    ("store", S),  # from ``.checkpoint_<store>``/``<store>.position``, or ``<app>-<store>-changelog``
    ("file", S),  # same text as state_files.path
    ("file_kind", S),  # checkpoint | checkpoint_tmp | global_checkpoint | store_checkpoint | position | store_offsets
    ("topic", S),
    ("partition", I),
    ("offset", L),  # raw value from the file; -4 kept as is (see sentinel)
    ("sentinel", S),  # OFFSET_UNKNOWN for -4
    ("offset_meaning", S),  # last_applied | next_offset | next_offset_or_last_applied | input_position | in_store
    ("file_mtime", T),
    ("capture_time", T),
    ("problem", S),
)

DYNAMO_TABLES_SCHEMA = struct(
    ("host", S),
    ("source", S),
    ("table", S),
    ("key_schema", S),  # ``streamName HASH, shardId RANGE``
    ("schema_kind", S),  # NEW | LEGACY | UNKNOWN (NiFi 2.9 classification)
    ("status", S),  # TableStatus; NOT_FOUND for a captured ResourceNotFoundException
    ("creation_time", T),
    ("item_count", L),
    ("size_bytes", L),
    ("billing_mode", S),
    ("table_arn", S),
    ("table_id", S),
    ("capture_time", T),  # mtime of the captured file
)

DYNAMO_ITEMS_SCHEMA = struct(
    ("host", S),
    ("source", S),
    ("table", S),
    ("schema_kind", S),  # NEW | LEGACY | UNKNOWN, from the item's key attributes
    ("kind", S),  # shard | node_heartbeat | migration_marker | legacy_lease | unknown
    ("stream", S),
    ("shard_id", S),
    ("lease_key", S),
    ("checkpoint", S),  # NEW: sequenceNumber; LEGACY: checkpoint (a sequence number or a sentinel)
    ("checkpoint_sentinel", S),  # TRIM_HORIZON | LATEST | SHARD_END | AT_TIMESTAMP, when checkpoint is one
    ("checkpoint_sub_sequence", L),
    ("owner", S),  # leaseOwner
    ("lease_expiry", T),
    ("last_update", T),
    ("node_id", S),  # heartbeat rows: the UUID after ``__node__#``
    ("node_heartbeat", T),
    ("lease_counter", L),
    ("owner_switches_since_checkpoint", L),
    ("parent_shard_ids", S),  # comma-separated
    ("child_shard_ids", S),
    ("checkpoint_owner", S),
    ("migration_status", S),
    ("migration_owner", S),
    ("migration_started_at", T),
    ("migration_completed_at", T),
    ("rename_owner", S),
    ("rename_started_at", T),
    ("item_json", S),  # the whole item with type tags removed, for anything not broken out above
    ("capture_time", T),
)

CLOUDTRAIL_SCHEMA = struct(
    ("host", S),
    ("source", S),
    ("line_no", L),  # line of the file where the event's JSON starts
    ("time", T),  # eventTime
    ("event_name", S),  # CloudTrail eventName, e.g. DeleteTable
    ("event", S),  # canonical timeline event (see cloudtrail.py), e.g. CHECKPOINT_TABLE_DELETED
    ("event_source", S),
    ("table", S),
    ("error_code", S),
    ("error_message", S),
    ("request_id", S),
    ("event_id", S),
    ("aws_region", S),
    ("user_arn", S),
    ("user_agent", S),
    ("source_ip", S),
    ("read_only", B),
    ("event_category", S),
)

NIFI_STATE_SCHEMA = struct(
    ("host", S),
    ("source", S),
    ("component_id", S),
    ("scope", S),  # CLUSTER | LOCAL
    ("key", S),
    ("value", S),
    ("cluster_node_id", S),
    ("cluster_node_address", S),
    ("state_description", S),
    ("capture_time", T),
)

#: One row per file or folder of a NiFi write-ahead log (local state provider, FlowFile repository), read from
#: a copied folder or a ``capture-state --product nifi`` archive; header and framing facts, never FlowFile data.
NIFI_REPOSITORY_FILES_SCHEMA = struct(
    ("host", S),
    ("source", S),  # the folder or capture archive
    ("root", S),  # name of the captured folder (``local``, ``flowfile_repository``, a NiFi home)
    ("repository", S),  # local_state | flowfile
    ("path", S),  # relative to the captured folder
    ("is_dir", B),
    ("kind", S),  # snapshot | snapshot_partial | journal | swap | overflow | dir | other
    ("size", L),
    ("mtime", T),
    ("capture_time", T),
    ("wal_class", S),  # org.apache.nifi.wali.HashMapSnapshot | ...LengthDelimitedJournal | org.wali.MinimalLockingWriteAheadLog
    ("wal_version", I),
    ("serde", S),  # StateMapSerDe (local state) or a RepositoryRecordSerde (FlowFiles)
    ("serde_version", I),
    ("max_transaction_id", L),  # snapshots: the last transaction the snapshot includes
    ("records", L),  # snapshots: records it declares (FlowFiles, or components with state)
    ("transactions", L),  # journals: whole transactions
    ("first_transaction_id", L),
    ("last_transaction_id", L),
    ("transaction_bytes", L),  # journals: bytes of whole transactions
    ("complete", B),  # 2.x journals: closed cleanly (trailing marker); false = open or the process died
    ("trailing_nul_bytes", L),  # power loss while writing: NUL bytes NiFi skips
    ("version_hint", S),  # 1.x (MinimalLocking local state) | 2.x | 1.x-2.x
    ("problem", S),  # damage: empty, truncated, unknown marker (what was read before it is kept)
    ("note", S),
)

#: One row per entry of each component-state record in the local state provider's write-ahead log, in replay
#: order (snapshot, then journal transactions). A record without entries (cleared state, DELETE) is one row.
NIFI_LOCAL_STATE_SCHEMA = struct(
    ("host", S),
    ("source", S),
    ("path", S),  # the file holding the record
    ("component_id", S),
    ("update_type", S),  # CREATE | UPDATE | DELETE
    ("state_version", L),  # NiFi's state version (-1 = none); DELETE records have none
    ("entry_count", I),
    ("key", S),
    ("value", S),
    ("transaction_id", L),  # journals only
    ("record_no", L),  # replay order within the folder
    ("origin", S),  # snapshot | journal
    ("applied", B),  # NiFi's recovery applies it (journal transactions after the snapshot's max id)
    ("current", B),  # the component's state after recovery (its last applied record)
    ("cleared", B),  # an update with no entries: state cleared (UI/API) or set empty
    ("file_mtime", T),  # the file's last write: the record was written at or before it
    ("capture_time", T),
    ("version_hint", S),
)

PROBLEMS_SCHEMA = struct(("source", S), ("reason", S))

STATE_FILES_COLUMNS = tuple(f.name for f in STATE_FILES_SCHEMA.fields)
CHECKPOINTS_COLUMNS = tuple(f.name for f in CHECKPOINTS_SCHEMA.fields)
DYNAMO_TABLES_COLUMNS = tuple(f.name for f in DYNAMO_TABLES_SCHEMA.fields)
DYNAMO_ITEMS_COLUMNS = tuple(f.name for f in DYNAMO_ITEMS_SCHEMA.fields)
CLOUDTRAIL_COLUMNS = tuple(f.name for f in CLOUDTRAIL_SCHEMA.fields)
NIFI_STATE_COLUMNS = tuple(f.name for f in NIFI_STATE_SCHEMA.fields)
NIFI_REPOSITORY_FILES_COLUMNS = tuple(f.name for f in NIFI_REPOSITORY_FILES_SCHEMA.fields)
NIFI_LOCAL_STATE_COLUMNS = tuple(f.name for f in NIFI_LOCAL_STATE_SCHEMA.fields)

#: Every state table by name, in the order they are written: the one declaration of the state tables.
STATE_SCHEMAS: dict[str, StructType] = {
    "state_files": STATE_FILES_SCHEMA,
    "checkpoints": CHECKPOINTS_SCHEMA,
    "dynamo_tables": DYNAMO_TABLES_SCHEMA,
    "dynamo_items": DYNAMO_ITEMS_SCHEMA,
    "cloudtrail": CLOUDTRAIL_SCHEMA,
    "nifi_state": NIFI_STATE_SCHEMA,
    "nifi_repository_files": NIFI_REPOSITORY_FILES_SCHEMA,
    "nifi_local_state": NIFI_LOCAL_STATE_SCHEMA,
}

#: The state table names, in order.
STATE_TABLES: tuple[str, ...] = tuple(STATE_SCHEMAS)
