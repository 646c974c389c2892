"""Column contracts of the timeline tables (``Timeline`` attributes).

Every row that rests on a log line carries ``source`` and ``line_no`` (the evidence); rows that
rest on a state capture carry ``source`` (the capture path) and ``line_no`` null. All times UTC.
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

EVIDENCE = (("source", StringType()), ("line_no", LongType()))

#: One JVM / NiFi process lifetime per host.
PROCESS_RUNS = struct(
    ("host", StringType()), ("run_id", StringType()), ("run_no", IntegerType()), ("product", StringType()),
    ("app_id", StringType()), ("client_id", StringType()), ("process_id", StringType()),
    # version: from a banner (`Kafka Streams version: 4.1.2`); version_range: what the log
    # templates seen in the run allow (each template records the versions that print it).
    ("version", StringType()), ("version_range", StringType()), ("version_evidence", StringType()),
    ("start", TimestampType()), ("end", TimestampType()),
    # clean | crash | error | unknown
    ("end_kind", StringType()), ("end_evidence", StringType()), ("end_source", StringType()), ("end_line_no", LongType()),
    ("guarantee", StringType()), ("commit_interval_ms", LongType()), ("num_standby_replicas", IntegerType()),
    ("num_stream_threads", IntegerType()), ("state_dir", StringType()), ("state_cleanup_delay_ms", LongType()),
    ("group_instance_id", StringType()), *EVIDENCE,
)

#: Consumer-group generations seen by each member.
GENERATIONS = struct(
    ("group_id", StringType()), ("generation", IntegerType()), ("protocol", StringType()), ("host", StringType()),
    ("run_id", StringType()), ("stream_thread", StringType()), ("member_id", StringType()),
    ("joined", TimestampType()), ("synced", TimestampType()), ("leader_assignment", TimestampType()),
    ("members", IntegerType()), *EVIDENCE,
)

#: State intervals of stream threads (kind=thread), Streams clients (kind=client), global threads.
STATES = struct(
    ("host", StringType()), ("run_id", StringType()), ("kind", StringType()), ("thread", StringType()),
    ("state", StringType()), ("from_state", StringType()), ("start", TimestampType()), ("end", TimestampType()),
    *EVIDENCE,
)

#: Task phases per host/thread: created, restoring, running, suspended, closed-clean, closed-dirty,
#: migrated, corrupted, revoked, lost.
TASK_LIFECYCLES = struct(
    ("host", StringType()), ("run_id", StringType()), ("stream_thread", StringType()), ("task_id", StringType()),
    ("role", StringType()), ("phase", StringType()), ("start", TimestampType()), ("end", TimestampType()),
    ("event", StringType()), *EVIDENCE,
)

#: State-directory lock evidence per task: acquired / released / failed, with who held it.
LOCKS = struct(
    ("host", StringType()), ("run_id", StringType()), ("task_id", StringType()), ("kind", StringType()),
    ("ts", TimestampType()), ("thread", StringType()), ("role", StringType()), ("holder_thread", StringType()),
    ("holder_since", TimestampType()), ("released", TimestampType()), ("handoff_ms", LongType()), *EVIDENCE,
)

#: One history per host/task/changelog partition, merging logs and state captures.
#: kind: written | read | missing | deleted | corrupt | wiped | file (capture fact)
CHECKPOINTS = struct(
    ("host", StringType()), ("app_id", StringType()), ("task_id", StringType()), ("store", StringType()),
    ("topic", StringType()), ("partition", IntegerType()), ("ts", TimestampType()), ("kind", StringType()),
    ("offset", LongType()), ("origin", StringType()), ("run_id", StringType()), ("event", StringType()),
    ("file_mtime", TimestampType()), ("capture_time", TimestampType()), ("problem", StringType()), *EVIDENCE,
)

#: Changelog restorations per host/task/partition. Before 2.6 no version logs the end of a
#: restoration: there ``completed`` is false and ``end`` null, and a new episode starts at each
#: new checkpoint read or "No checkpoint found" for the partition.
RESTORATIONS = struct(
    ("host", StringType()), ("run_id", StringType()), ("stream_thread", StringType()), ("task_id", StringType()),
    ("store", StringType()), ("topic", StringType()), ("partition", IntegerType()),
    ("start", TimestampType()), ("end", TimestampType()), ("start_offset", LongType()), ("end_offset", LongType()),
    ("records", LongType()), ("from_scratch", BooleanType()), ("completed", BooleanType()),
    ("start_source", StringType()), ("start_line_no", LongType()), *EVIDENCE,
)

#: Local state deleted: reason is task-corrupted, eos-dirty-close, cleaner, user-cleanup, restore-failed.
WIPES = struct(
    ("host", StringType()), ("run_id", StringType()), ("task_id", StringType()), ("ts", TimestampType()),
    ("reason", StringType()), ("event", StringType()), *EVIDENCE,
)

#: State-directory cleaner deletions with the task's last owner on that host.
DIR_CLEANUPS = struct(
    ("host", StringType()), ("run_id", StringType()), ("task_id", StringType()), ("ts", TimestampType()),
    ("age_ms", LongType()), ("delay_ms", LongType()), ("last_owner_thread", StringType()),
    ("last_owner_role", StringType()), ("last_owner_until", TimestampType()), ("assigned_at_the_time", BooleanType()),
    *EVIDENCE,
)

#: NiFi processor starts, failures and stops (one row per event).
NIFI_PROCESSOR_EVENTS = struct(
    ("host", StringType()), ("run_id", StringType()), ("component_type", StringType()), ("component_id", StringType()),
    ("ts", TimestampType()), ("event", StringType()), ("error_class", StringType()), ("detail", StringType()), *EVIDENCE,
)

#: DynamoDB checkpoint-table migration steps per table, from NiFi logs and CloudTrail.
MIGRATION_STEPS = struct(
    ("table", StringType()), ("base_table", StringType()), ("ts", TimestampType()), ("step", StringType()),
    ("origin", StringType()), ("host", StringType()), ("error_code", StringType()), ("detail", StringType()),
    # CloudTrail's caller (source IP, else the identity ARN): the steps one node made share it.
    ("actor", StringType()), *EVIDENCE,
)

#: Per-host clock offset estimate (host clock minus reference clock).
CLOCK_SKEW = struct(
    ("host", StringType()), ("reference_host", StringType()), ("offset_ms", LongType()), ("samples", IntegerType()),
    ("spread_ms", LongType()), ("confidence", StringType()), ("method", StringType()),
)

#: NiFi write-ahead-log life cycle per host and repository (``flowfile``, ``local_state``, ``unknown`` when a
#: line does not say): checkpoints started/done/failed, start-up recovery and restore, journal damage, and the
#: capture's snapshot and journal files (origin ``capture``, ``ts`` = file mtime).
NIFI_CHECKPOINTS = struct(
    ("host", StringType()), ("run_id", StringType()), ("repository", StringType()), ("ts", TimestampType()),
    # checkpoint_started | checkpointed | checkpoint_failed | recovery_started | snapshot_missing |
    # snapshot_recovered | journal_recovered | journal_truncated | journal_nul_bytes | journal_poisoned |
    # snapshot_empty | recovered | restored | orphaned (kept, 1.12+) | orphans_dropped (1.x before 1.12) |
    # initialized | wal_checkpointed (the FlowFile repository's
    # write-ahead-log line next to its own 'checkpointed' line) | snapshot | snapshot_partial | journal (capture)
    ("kind", StringType()), ("records", LongType()), ("swap_files", LongType()), ("duration_ms", LongType()),
    ("max_transaction_id", LongType()), ("origin", StringType()), ("event", StringType()), ("thread", StringType()),
    ("path", StringType()), ("file_mtime", TimestampType()), ("capture_time", TimestampType()), ("complete", BooleanType()),
    ("problem", StringType()), *EVIDENCE,
)

#: NiFi component state changes: from logs (state cleared and detected, save/read failures, listings) and from
#: the local state provider's write-ahead log (each applied record compared with the one before it).
NIFI_STATE_CHANGES = struct(
    ("host", StringType()), ("run_id", StringType()), ("component_type", StringType()), ("component_id", StringType()),
    ("ts", TimestampType()),
    # capture: first_seen | updated | cleared | regressed (listing.timestamp went back) | deleted |
    # not_carried_over; logs: reset_detected | save_failed | read_failed | listed | clear_failed
    ("kind", StringType()), ("origin", StringType()), ("state_version", LongType()),
    ("entries_before", IntegerType()), ("entries_after", IntegerType()),
    # AbstractListProcessor's ``listing.timestamp`` before and after (epoch millis as time): the re-listing window
    ("listing_before", TimestampType()), ("listing_after", TimestampType()),
    ("records", LongType()), ("detail", StringType()), ("event", StringType()), ("file_mtime", TimestampType()), *EVIDENCE,
)

TABLES: dict[str, StructType] = {
    "process_runs": PROCESS_RUNS,
    "generations": GENERATIONS,
    "thread_states": STATES,
    "client_states": STATES,
    "task_lifecycles": TASK_LIFECYCLES,
    "locks": LOCKS,
    "checkpoints": CHECKPOINTS,
    "restorations": RESTORATIONS,
    "wipes": WIPES,
    "dir_cleanups": DIR_CLEANUPS,
    "nifi_processor_events": NIFI_PROCESSOR_EVENTS,
    "migration_steps": MIGRATION_STEPS,
    "clock_skew": CLOCK_SKEW,
    "nifi_checkpoints": NIFI_CHECKPOINTS,
    "nifi_state_changes": NIFI_STATE_CHANGES,
}

