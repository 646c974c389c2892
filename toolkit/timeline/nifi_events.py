"""NiFi process and processor lifecycle events and the steps of a checkpoint-table migration (the
``nifi_processor_events`` and ``migration_steps`` tables), from log lines and, for the migration, CloudTrail.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from toolkit.sqltext import sql_list
from toolkit.timeline.model import StateFacts
from toolkit.timeline.sql import FIRST_LINE, _conform

_MIGRATION_EVENTS = (
    "CHECKPOINT_TABLE_SCHEMA_DETECTED", "CHECKPOINT_TABLE_EXISTS", "CHECKPOINT_TABLE_CREATE_REQUESTED",
    "CHECKPOINT_TABLE_ACTIVE", "CHECKPOINT_TABLE_DELETED", "CHECKPOINT_TABLE_DELETE_CONFIRMED",
    "MIGRATION_TABLE_CREATE_REQUESTED", "MIGRATION_TABLE_DELETED", "MIGRATION_COPY_STARTED",
    "MIGRATION_COPY_COMPLETED", "MIGRATION_DETECTED_LEGACY", "MIGRATION_SCAN_STARTED", "MIGRATION_SCAN_COMPLETED",
    "MIGRATION_LOCK_ACQUIRED", "RENAME_LOCK_ACQUIRED", "RENAME_OBSERVED_COMPLETE", "LINGERING_MIGRATION_DELETED",
    "LINGERING_MIGRATION_RECOPY", "ORPHANED_MIGRATION_FOUND", "CHECKPOINT_TABLE_IN_USE", "MIGRATION_ITEM_SKIPPED",
)


def nifi_processor_events(events: DataFrame) -> DataFrame:
    """NiFi process and processor lifecycle: starts, failures (with the exception class), stops."""
    ev = events.where("product = 'nifi' AND (startswith(event, 'PROCESSOR_') OR startswith(event, 'NIFI_'))")
    return _conform(ev.withColumn("detail", F.expr(FIRST_LINE)), "nifi_processor_events")


def migration_steps(events: DataFrame, state: StateFacts) -> DataFrame:
    """Checkpoint-table migration steps per table, from NiFi lines and CloudTrail records."""
    base_table = "regexp_replace(`table`, '_migration$', '') AS base_table"
    logs = events.where(f"product = 'nifi' AND event IN ({sql_list(_MIGRATION_EVENTS)}) AND `table` IS NOT NULL")
    logs = logs.selectExpr(
        "`table`", "ts", "event AS step", "'log' AS origin", "host",
        "CAST(NULL AS STRING) AS error_code", f"{FIRST_LINE} AS detail", "source", "line_no")
    # The copy failure has no line of its own: the start failure whose cause names DynamoDB stands for it.
    failed = events.where("event = 'PROCESSOR_START_FAILED' AND contains(message, 'DynamoDb')").selectExpr(
        "`table`", "ts", "'PROCESSOR_START_FAILED' AS step", "'log' AS origin", "host",
        "error_class AS error_code", f"{FIRST_LINE} AS detail", "source", "line_no")
    # CloudTrail's caller is known for CloudTrail's steps only
    steps = _conform(logs.unionByName(failed).selectExpr("*", base_table), "migration_steps", absent=("actor",))
    ct = state.cloudtrail
    if "event_name" in ct.columns:
        actor = ", ".join([c for c in ("source_ip", "user_arn") if c in ct.columns] + ["CAST(NULL AS STRING)"])
        trail = ct.where("`table` IS NOT NULL").selectExpr(
            "`table`", "`time` AS ts", "coalesce(event, concat('CLOUDTRAIL_', upper(event_name))) AS step",
            "'cloudtrail' AS origin", "host", "error_code",
            "concat_ws(' ', event_name, error_code, error_message) AS detail", "source", "line_no",
            f"coalesce({actor}) AS actor",
        )
        steps = steps.unionByName(_conform(trail.selectExpr("*", base_table), "migration_steps"))
    return steps
