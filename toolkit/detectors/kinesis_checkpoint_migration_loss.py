"""NIFI-16003: a failed ConsumeKinesis checkpoint-table migration loses every shard checkpoint.

NiFi 2.9.0 migrates a KCL-era checkpoint table ``<app>`` through ``<app>_migration``: delete
``<app>``, re-create it with the new schema, copy the items from ``<app>_migration``, delete
``<app>_migration``. When the copy fails (DynamoDB's request routers still validate the first
``PutItem`` against the old key schema: ``ValidationException: Missing the key leaseKey in the
item``), the next start sees ``<app>`` with the new schema plus a lingering ``<app>_migration``
and deletes the latter without copying it. Every shard restarts from the Initial Stream Position:
``TRIM_HORIZON`` reprocesses the stream's retention, ``LATEST`` skips records (data loss).

Decision, per checkpoint table (CloudTrail and/or NiFi INFO logs via ``migration_steps``): legacy
table deleted -> re-created -> copy failure -> ``<app>_migration`` deleted with no successful copy
in between. All four seen: ``confirmed``. A copy failure (CloudTrail ``ValidationException`` or the
processor's ``Missing the key leaseKey`` ERROR) with only part of the rest: ``likely``. Only the
ERROR line of nifi-app.log (default logging, no AWS evidence): ``possible`` with the evidence
to collect. A migration whose copy succeeded never matches.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from toolkit.detectors.base import Evidence, Finding, Impact, detector
from toolkit.detectors.common import (
    evidence_lines,
    fmt_int,
    fmt_ts,
    known_bug_sentences,
    merge_evidence,
    missing_steps,
    rows,
    run_versions,
)

ID = "kinesis-checkpoint-migration-loss"
LEASE_KEY_ERROR = "Missing the key leaseKey"
#: Log clock vs CloudTrail clock: an ERROR line and its failed PutItem are this close.
MATCH_WINDOW_S = 10

DELETED = ("CHECKPOINT_TABLE_DELETED", "CHECKPOINT_TABLE_DELETE_CONFIRMED")
CREATED = ("CHECKPOINT_TABLE_CREATED", "CHECKPOINT_TABLE_CREATE_REQUESTED", "CHECKPOINT_TABLE_ACTIVE")
COPY_FAILED = ("MIGRATION_COPY_FAILED",)
MIGRATION_GONE = ("MIGRATION_TABLE_DELETED", "LINGERING_MIGRATION_DELETED")
COPIED = ("MIGRATION_COPY_COMPLETED", "LINGERING_MIGRATION_RECOPY")


@detector(id=ID, title="ConsumeKinesis checkpoints lost in a failed table migration (NIFI-16003)",
          severity="critical", needs=("migration_steps", "nifi_processor_events", "events", "state"))
def kinesis_checkpoint_migration_loss(tl) -> list[Finding]:
    """NIFI-16003: legacy table deleted, copy failed, migration table dropped without a re-copy."""
    steps = tl.migration_steps.where(F.col("base_table").isNotNull())
    base = F.col("table") == F.col("base_table")
    migration = F.col("table") == F.concat(F.col("base_table"), F.lit("_migration"))
    failures = steps.where(base & F.col("step").isin(*COPY_FAILED)).groupBy("base_table").agg(
        F.min(F.struct("ts", "source", "line_no", "origin", "detail")).alias("f"))
    per_table = failures
    # Conditional aggregation keeps every failed table, whatever else is (not) in the evidence.
    for name, names, where, before in (("deleted", DELETED, base, True), ("created", CREATED, base, True),
                                       ("gone", MIGRATION_GONE, migration, False)):
        part = steps.where(where & F.col("step").isin(*names)).select(
            "base_table", F.struct("ts", "source", "line_no").alias("s"))
        joined = per_table.join(part, "base_table", "left")
        in_order = (F.col("s.ts") <= F.col("f.ts")) if before else (F.col("s.ts") >= F.col("f.ts"))
        pick = F.max(F.when(in_order, F.col("s"))) if before else F.min(F.when(in_order, F.col("s")))
        per_table = joined.groupBy(*per_table.columns).agg(pick.alias(name))
    # A successful PutItem into the table between the failure and the drop would be a re-copy.
    copied = steps.where(base & (F.col("step").isin(*COPIED) | ((F.col("step") == "CLOUDTRAIL_PUT_ITEM")
                                                               & F.col("error_code").isNull()))).select(
        "base_table", F.col("ts").alias("copy_ts"))
    per_table = per_table.join(copied, "base_table", "left").groupBy("base_table", "f", "deleted", "created", "gone").agg(
        F.max(F.when((F.col("copy_ts") > F.col("f.ts")) & (F.col("gone").isNull() | (F.col("copy_ts") <= F.col("gone.ts"))),
                     F.lit(1)).otherwise(F.lit(0))).alias("recopied"))
    tables = [t for t in rows(per_table, 50, order=["base_table"]) if not t.recopied]
    lease_key = (F.coalesce(F.col("message").contains(LEASE_KEY_ERROR), F.lit(False))
                 | F.coalesce(F.col("stack").contains(LEASE_KEY_ERROR), F.lit(False)))
    errors = rows(tl.events.where((F.col("event") == "PROCESSOR_START_FAILED") & lease_key).select(
        "host", "component_id", "ts", "source", "line_no"), 50, order=["ts"])
    findings = []
    matched: set[tuple] = set()
    versions = run_versions(tl)
    for t in tables:
        # The closest unmatched ERROR line within the window is this table's failed start.
        near = [e for e in errors if (e.source, e.line_no) not in matched
                and abs((e.ts - t.f.ts).total_seconds()) <= MATCH_WINDOW_S]
        error = min(near, key=lambda e: abs((e.ts - t.f.ts).total_seconds())) if near else None
        if error is not None:
            matched.add((error.source, error.line_no))
        findings.append(_table_finding(tl, t, error, versions))
    orphans = [e for e in errors if (e.source, e.line_no) not in matched]
    if orphans:
        findings.append(_log_only_finding(tl, orphans, versions))
    return findings


def _shard_facts(tl, table: str):
    items = tl.state.dynamo_items.where((F.col("table") == table) & (F.col("kind") == "shard"))
    summary = rows(items.groupBy("stream").agg(F.count(F.lit(1)).alias("shards"), F.first("source").alias("source")), 10)
    initial = rows(tl.events.where((F.col("event") == "SHARD_STARTED_FROM_INITIAL_POSITION")
                                   & F.col("position_type").isNotNull()).select("position_type").distinct(), 3)
    return summary, sorted({r.position_type for r in initial})


def _impact(table: str, shards, positions, migrated_items) -> Impact:
    streams = ", ".join(f"{s.stream}: {s.shards} shard(s)" for s in shards) or "shard count unknown (no scan)"
    shard_total = sum(s.shards for s in shards) if shards else None
    position = positions[0] if len(positions) == 1 else None
    effect = {"TRIM_HORIZON": "every shard re-read from the oldest record kept (up to the stream retention, 24 h by "
                              "default): downstream duplicates",
              "LATEST": "every shard resumed at the newest record: records written between the last checkpoint and "
                        "the restart were never read (data loss)"}
    what = effect.get(position, "TRIM_HORIZON -> the retention is reprocessed (duplicates); LATEST -> records "
                                "between the last checkpoint and the restart are skipped (data loss); AT_TIMESTAMP -> "
                                "depends on the timestamp")
    return Impact(
        summary=f"all shard checkpoints of {table} lost ({streams}); {what}.",
        figures={"table": table, "shards": shard_total, "streams": {s.stream: s.shards for s in shards},
                 "checkpoint_items_copied_to_migration_table": migrated_items, "initial_position": position},
        method=("shards = shard items in the captured scan of the re-created table (each restarted without a "
                "checkpoint); checkpoints lost = all items of the legacy table (CloudTrail PutItem data events into "
                "<table>_migration count them when data events are logged); the initial position comes from "
                "'type [TRIM_HORIZON|LATEST]' lines when INFO logging was on, else both outcomes are given."),
    )


def _table_finding(tl, t, error, versions) -> Finding:
    table = t.base_table
    seen = {"legacy table deleted": t.deleted, "table re-created": t.created, "copy failed": t.f,
            "migration table deleted": t.gone}
    confirmed = all(v is not None for v in seen.values())
    missing_parts = [k for k, v in seen.items() if v is None]
    shards, positions = _shard_facts(tl, table)
    migrated_items = rows(tl.migration_steps.where((F.col("table") == f"{table}_migration")
                                                   & (F.col("step") == "CLOUDTRAIL_PUT_ITEM")).agg(
        F.count(F.lit(1)).alias("n")), 1)[0].n or None
    refs = [(v.source, v.line_no) for v in seen.values() if v is not None]
    aws = [Evidence(v.source, v.line_no, f"CloudTrail: {label} ({table if label != 'migration table deleted' else table + '_migration'}) at {fmt_ts(v.ts)}"
                    + (f": {t.f.detail}" if label == "copy failed" and t.f.detail else ""), "aws", v.ts)
           for label, v in seen.items() if v is not None and v.source and v.source.endswith(".json")]
    log_refs = [r for r in refs if r[0] and not r[0].endswith(".json")]
    if error is not None:
        log_refs.append((error.source, error.line_no))
    evidence = merge_evidence(evidence_lines(tl, log_refs), aws)
    component = f" (processor {error.component_id})" if error is not None and error.component_id else ""
    explanation = (
        f"The checkpoint table {table}{component} was migrated from the KCL schema: the legacy table was deleted"
        f"{' at ' + fmt_ts(t.deleted.ts) if t.deleted else ''}, re-created{' at ' + fmt_ts(t.created.ts) if t.created else ''}, "
        f"and the copy of the checkpoints from {table}_migration failed at {fmt_ts(t.f.ts)} "
        f"(DynamoDB still validated the item against the old key schema: '{LEASE_KEY_ERROR} in the item'). "
        + (f"On the retry the processor deleted {table}_migration at {fmt_ts(t.gone.ts)} without copying it: "
           if t.gone else f"No deletion of {table}_migration is in the evidence yet; on 2.9.0 the next start deletes it "
                          f"without copying: ")
        + "no copy of the shard checkpoints exists anymore and every shard restarted from the Initial Stream "
          "Position. This is NIFI-16003.")
    missing = [] if confirmed else missing_steps(
        ID, *[f"evidence of '{k}' for {table} (CloudTrail DeleteTable/CreateTable/PutItem events, or INFO logging of "
              f"org.apache.nifi.processors.aws.kinesis)" for k in missing_parts])
    return Finding(
        detector=ID, severity="critical", confidence="confirmed" if confirmed else "likely",
        title=f"Kinesis checkpoints of {table} lost in a failed migration (NIFI-16003)",
        explanation=explanation, hosts=sorted({error.host} if error is not None and error.host else set()),
        tasks=[table], ts=(t.deleted or t.f).ts, evidence=evidence, missing_evidence=missing,
        impact=_impact(table, shards, positions, migrated_items),
        known_bugs=known_bug_sentences(ID, versions[:1]),
    )


def _log_only_finding(tl, errors, versions) -> Finding:
    components = sorted({e.component_id for e in errors if e.component_id})
    return Finding(
        detector=ID, severity="critical", confidence="possible",
        title=f"ConsumeKinesis start failed with '{LEASE_KEY_ERROR}' ({len(errors)} processor(s)): checkpoints may be lost (NIFI-16003)",
        explanation=(
            f"{len(errors)} ConsumeKinesis processor(s) ({', '.join(components) or 'ids unknown'}) failed to start "
            f"with DynamoDB '{LEASE_KEY_ERROR} in the item' (HTTP 400). On NiFi 2.9.0 this is the copy step of the "
            f"checkpoint-table migration failing after the legacy table was already deleted; the automatic retry "
            f"then deletes <table>_migration without copying it (NIFI-16003). With NiFi's default logging the "
            f"deletion leaves no line in nifi-app.log: CloudTrail and a scan of the tables decide."),
        hosts=sorted({e.host for e in errors if e.host}), tasks=components, ts=errors[0].ts,
        evidence=evidence_lines(tl, [(e.source, e.line_no) for e in errors]),
        missing_evidence=missing_steps(ID),
        impact=Impact(summary="unknown until the tables are checked: possibly every shard checkpoint of the affected "
                              "tables (TRIM_HORIZON -> reprocessing, LATEST -> data loss).",
                      method="no DynamoDB or CloudTrail evidence in the bundle"),
        known_bugs=known_bug_sentences(ID, versions[:1]),
    )
