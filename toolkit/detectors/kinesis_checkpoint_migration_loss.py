"""NIFI-16003: a failed ConsumeKinesis checkpoint-table migration loses every shard checkpoint.

NiFi 2.9.0 migrates a KCL-era checkpoint table ``<app>`` through ``<app>_migration``: delete
``<app>``, re-create it with the new schema, copy the items from ``<app>_migration``, delete
``<app>_migration``. When the copy fails (DynamoDB's request routers still validate the first
``PutItem`` against the old key schema: ``ValidationException: Missing the key leaseKey in the
item``; any other error between the re-creation and the end of the copy leaves the same state),
NiFi stops the processor quietly and retries ``@OnScheduled`` after the administrative yield (30 s
by default); that retry sees ``<app>`` with the new schema plus a lingering ``<app>_migration``
and deletes the latter without copying it. Every shard restarts from the Initial Stream Position:
``TRIM_HORIZON`` reprocesses the stream's retention, ``LATEST`` skips records (data loss).

Decision, per checkpoint table (CloudTrail and/or NiFi INFO logs via ``migration_steps``): legacy
table deleted -> re-created -> copy failure -> ``<app>_migration`` deleted with no successful copy
in between. All four seen: ``confirmed``. A copy failure with only part of the rest: ``likely``. A
copy failure is a failed ``PutItem`` into the re-created table (any CloudTrail error code), or a
``Copying checkpoint items from [..] to [..]`` line with no ``Copied ..`` line before the processor's
start failure (whatever its error text). Only ERROR lines of nifi-app.log (default logging, no AWS
evidence): ``possible`` with the evidence to collect (``critical`` for the ``Missing the key
leaseKey`` text, ``warning`` for other DynamoDB errors of a ConsumeKinesis start). A migration whose
copy succeeded never matches. On 2.10.0 the retry logs "re-copying before deletion" but, with the rename
lock of the failed attempt still held (NIFI-16066), copies nothing and keeps ``<app>_migration``: that
announcement with no ``Copied ..`` line after it stands in for the deletion.
"""

from __future__ import annotations

import itertools
import math
from datetime import timedelta

from pyspark.sql import functions as F

from toolkit.detectors.base import Evidence, Finding, Impact, detector
from toolkit.detectors.preconditions import any_of, events_named, rows_in
from toolkit.detectors.common import (
    bug_status,
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
#: NiFi's default administrative yield: the automatic @OnScheduled retry after a failed start.
ADMINISTRATIVE_YIELD_S = 30
#: A start failure this soon after a "Copying checkpoint items" line with no "Copied" line is the copy failing.
COPY_TO_FAILURE_S = 120
FAILED_WRITES = ("CLOUDTRAIL_PUT_ITEM", "CLOUDTRAIL_BATCH_WRITE_ITEM")

DELETED = ("CHECKPOINT_TABLE_DELETED", "CHECKPOINT_TABLE_DELETE_CONFIRMED")
CREATED = ("CHECKPOINT_TABLE_CREATED", "CHECKPOINT_TABLE_CREATE_REQUESTED", "CHECKPOINT_TABLE_ACTIVE")
COPY_FAILED = ("MIGRATION_COPY_FAILED",)
MIGRATION_GONE = ("MIGRATION_TABLE_DELETED", "LINGERING_MIGRATION_DELETED")
COPIED = ("MIGRATION_COPY_COMPLETED",)
#: "... still exists from a prior rename; ..., re-copying before deletion": the retry found the lingering table. Only a
#: "Copied .." line after it is a re-copy: on 2.10.0 the rename lock left by the failed attempt (NIFI-16066) makes
#: the retry skip the copy and start on the empty table.
RECOPY_ANNOUNCED = ("LINGERING_MIGRATION_RECOPY",)


def _copy_failures(steps, base):
    """Copy failures into the re-created table: classified CloudTrail failures, any failed item write into
    it, and a logged copy start with no completion before the processor's start failure."""
    cloudtrail = steps.where(base & (F.col("step").isin(*COPY_FAILED)
                                     | (F.col("step").isin(*FAILED_WRITES) & F.col("error_code").isNotNull())))
    started = steps.where(base & (F.col("step") == "MIGRATION_COPY_STARTED")).select(
        "base_table", "host", F.col("ts").alias("copy_at"))
    done = steps.where(base & F.col("step").isin(*COPIED)).select("base_table", F.col("ts").alias("done_at"))
    start_failed = steps.where(F.col("step") == "PROCESSOR_START_FAILED").select(
        "host", "ts", "source", "line_no", "origin", "detail")
    logged = started.join(start_failed, "host").where(
        (F.col("ts") >= F.col("copy_at")) & (F.col("ts") <= F.col("copy_at") + F.expr(f"INTERVAL {COPY_TO_FAILURE_S} SECONDS")))
    logged = logged.join(done, "base_table", "left").groupBy(
        "base_table", "host", "copy_at", "ts", "source", "line_no", "origin", "detail").agg(
        F.max(F.when(F.col("done_at").between(F.col("copy_at"), F.col("ts")), 1).otherwise(0)).alias("_done")).where(
        F.col("_done") == 0)
    columns = ["base_table", "ts", "source", "line_no", "origin", "detail"]
    return cloudtrail.select(*columns).unionByName(logged.select(*columns))


@detector(id=ID, title="ConsumeKinesis checkpoints lost in a failed table migration (NIFI-16003)",
          severity="critical", needs=("migration_steps", "events", "state", "process_runs"), role="root-cause",
          # a step of a checkpoint-table migration, or a processor's failed start (the log-only finding)
          requires=any_of(rows_in("migration_steps", "base_table IS NOT NULL"),
                          events_named("PROCESSOR_START_FAILED", also=False)))
def kinesis_checkpoint_migration_loss(tl) -> list[Finding]:
    """NIFI-16003: legacy table deleted, copy failed, migration table dropped without a re-copy."""
    steps = tl.migration_steps.where(F.col("base_table").isNotNull())
    base = F.col("table") == F.col("base_table")
    migration = F.col("table") == F.concat(F.col("base_table"), F.lit("_migration"))
    failures = _copy_failures(tl.migration_steps, base).groupBy("base_table").agg(
        F.min(F.struct("ts", "source", "line_no", "origin", "detail")).alias("f"))
    per_table = failures
    # Conditional aggregation keeps every failed table, whatever else is (not) in the evidence.
    for name, names, where, before in (("deleted", DELETED, base, True), ("created", CREATED, base, True),
                                       ("gone", MIGRATION_GONE, migration, False),
                                       ("retried", RECOPY_ANNOUNCED, base, False)):
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
    per_table = per_table.join(copied, "base_table", "left").groupBy("base_table", "f", "deleted", "created", "gone",
                                                                    "retried").agg(
        F.max(F.when((F.col("copy_ts") > F.col("f.ts")) & (F.col("gone").isNull() | (F.col("copy_ts") <= F.col("gone.ts"))),
                     F.lit(1)).otherwise(F.lit(0))).alias("recopied"))
    every_table = rows(per_table, 200, order=["base_table"])
    tables = [t for t in every_table if not t.recopied]
    text = F.concat_ws("\n", F.col("message"), F.coalesce(F.col("stack"), F.lit("")))
    dynamo = text.contains("DynamoDb") | text.contains("dynamodb")
    kinesis = F.coalesce(F.col("component_type"), F.lit("")).contains("ConsumeKinesis") | text.contains("ConsumeKinesis[")
    errors = rows(tl.events.where((F.col("event") == "PROCESSOR_START_FAILED") & dynamo & kinesis).select(
        "host", "component_id", "ts", "source", "line_no", text.contains(LEASE_KEY_ERROR).alias("lease_key")),
        50, order=["ts"])
    per_table_findings = []
    matched: set[tuple] = set()
    versions = run_versions(tl)
    for t in tables:
        # The closest unmatched ERROR line within the window is this table's failed start.
        near = [e for e in errors if (e.source, e.line_no) not in matched
                and abs((e.ts - t.f.ts).total_seconds()) <= MATCH_WINDOW_S]
        error = min(near, key=lambda e: abs((e.ts - t.f.ts).total_seconds())) if near else None
        if error is not None:
            matched.add((error.source, error.line_no))
        per_table_findings.append(_table_finding(tl, t, error, versions))
    # A copy that failed and was then re-copied (2.10+) explains its start failure too: not an orphan.
    for t in every_table:
        if t.recopied:
            near = [e for e in errors if (e.source, e.line_no) not in matched
                    and abs((e.ts - t.f.ts).total_seconds()) <= MATCH_WINDOW_S]
            if near:
                best = min(near, key=lambda e: abs((e.ts - t.f.ts).total_seconds()))
                matched.add((best.source, best.line_no))
    explained = {t.base_table for t in every_table}
    for inferred, error in _inferred_failures(steps, base, migration, errors, matched, explained):
        matched.add((error.source, error.line_no))
        per_table_findings.append(_table_finding(tl, inferred, error, versions))
    findings = _per_host(per_table_findings)
    orphans = [e for e in errors if (e.source, e.line_no) not in matched]
    # On 2.11+ both the lingering-migration deletion (NIFI-16003) and the rename-lock variant (NIFI-16066) are
    # fixed: a failed start is retried and re-copies, so an unexplained ERROR line alone is no loss.
    fixed_everywhere = bool(versions) and all(
        bug_status("NIFI-16003", v) == "fixed" and bug_status("NIFI-16066", v) == "fixed" for v in versions)
    if orphans and not fixed_everywhere:
        findings.append(_log_only_finding(tl, orphans, versions))
    return findings


def _inferred_failures(steps, base, migration, errors, matched: set, explained: set):
    """Copy failures that left no record of their own (management-only CloudTrail, default logging).

    ``<app>`` re-created, a ConsumeKinesis start failure with a DynamoDB error after it, and
    ``<app>_migration`` deleted one administrative yield after that failure (the automatic retry),
    with no successful copy in between. Each failure line explains one table: the one whose
    deletion came closest to one yield after it, among the tables whose CloudTrail caller maps to the
    failure's host (see :func:`_consistent_pairs`).
    """
    created = rows(steps.where(base & F.col("step").isin(*CREATED)).select(
        "base_table", "ts", "source", "line_no", "actor"), 500, order=["ts"])
    gone = rows(steps.where(migration & F.col("step").isin(*MIGRATION_GONE)).select(
        "base_table", "ts", "source", "line_no"), 500, order=["ts"])
    copied = rows(steps.where(base & (F.col("step").isin(*COPIED) | ((F.col("step") == "CLOUDTRAIL_PUT_ITEM")
                                                                    & F.col("error_code").isNull()))).select(
        "base_table", "ts"), 2000)
    deleted = rows(steps.where(base & F.col("step").isin(*DELETED)).select("base_table", "ts", "source", "line_no"), 500)
    candidates = []
    for c in created:
        if c.base_table in explained:
            continue
        drop = next((g for g in gone if g.base_table == c.base_table and g.ts >= c.ts), None)
        if drop is None or (drop.ts - c.ts).total_seconds() < ADMINISTRATIVE_YIELD_S / 2:
            continue  # deleted right after the copy: a successful migration
        if any(x.base_table == c.base_table and c.ts <= x.ts <= drop.ts for x in copied):
            continue
        for e in errors:
            if (e.source, e.line_no) in matched or not (c.ts <= e.ts <= drop.ts):
                continue
            off = abs((drop.ts - e.ts).total_seconds() - ADMINISTRATIVE_YIELD_S)
            if off <= MATCH_WINDOW_S:
                candidates.append((off, c, drop, e))
    out = []
    for off, c, drop, e in _consistent_pairs(candidates):
        legacy = max((d for d in deleted if d.base_table == c.base_table and d.ts <= c.ts), key=lambda d: d.ts,
                     default=None)
        inferred = _InferredTable(
            base_table=c.base_table,
            f=_Step(e.ts, e.source, e.line_no, "log", "start failure between the re-creation and the deletion of "
                                                      f"{c.base_table}_migration one administrative yield later"),
            deleted=_Step(legacy.ts, legacy.source, legacy.line_no) if legacy else None,
            created=_Step(c.ts, c.source, c.line_no), gone=_Step(drop.ts, drop.source, drop.line_no), retried=None,
            recopied=0)
        out.append((inferred, e))
    return out


#: Beyond this many caller-to-host mappings, pairs are chosen on timing alone.
MAX_ACTOR_MAPPINGS = 50_000


def _greedy(candidates):
    """Closest-in-time pairs first; each table and each failure line used once."""
    used_tables, used_errors, pairs = set(), set(), []
    for candidate in sorted(candidates, key=lambda x: x[0]):
        _, c, _, e = candidate
        if c.base_table in used_tables or (e.source, e.line_no) in used_errors:
            continue
        used_tables.add(c.base_table)
        used_errors.add((e.source, e.line_no))
        pairs.append(candidate)
    return pairs


def _consistent_pairs(candidates):
    """Pairs of (table, failure line) where every table one CloudTrail caller re-created is paired with
    failures of one host: the node that ran a migration made all of its calls.

    CloudTrail times are whole seconds, so with several tables failing within a second timing alone
    can pair a table with another node's failure. Each mapping of callers to distinct hosts is tried;
    the one pairing the most tables, then closest in time, wins.
    """
    actors = sorted({c.actor for _, c, _, _ in candidates if c.actor})
    hosts = sorted({e.host for _, _, _, e in candidates if e.host})
    if not actors or not hosts:
        return _greedy(candidates)
    slots = hosts + [None] * len(actors)  # a caller may match no host of the logs
    if math.perm(len(slots), len(actors)) > MAX_ACTOR_MAPPINGS:
        return _greedy(candidates)
    best, best_score = _greedy(candidates), None
    for chosen in set(itertools.permutations(slots, len(actors))):
        mapping = dict(zip(actors, chosen))
        allowed = [x for x in candidates if not x[1].actor or mapping[x[1].actor] == x[3].host]
        pairs = _greedy(allowed)
        score = (-len(pairs), sum(x[0] for x in pairs))
        if best_score is None or score < best_score:
            best, best_score = pairs, score
    return best


class _Step:
    """A migration step as the table findings read it (``ts``, ``source``, ``line_no``, ``origin``, ``detail``)."""

    def __init__(self, ts, source, line_no, origin=None, detail=None):
        self.ts, self.source, self.line_no, self.origin, self.detail = ts, source, line_no, origin, detail


class _InferredTable:
    def __init__(self, **fields):
        self.__dict__.update(fields)


def _per_host(findings: list[Finding]) -> list[Finding]:
    """One finding per host (the node whose processor failed) listing its tables."""
    groups: dict[tuple, list[Finding]] = {}
    for f in findings:
        groups.setdefault(tuple(f.hosts), []).append(f)
    merged = []
    for hosts, group in groups.items():
        if len(group) == 1:
            merged.append(group[0])
            continue
        tables = sorted({t for f in group for t in f.tasks})
        worst = min(group, key=lambda f: ("confirmed", "likely", "possible").index(f.confidence))
        weakest = max(group, key=lambda f: ("confirmed", "likely", "possible").index(f.confidence))
        merged.append(Finding(
            detector=ID, severity="critical", confidence=weakest.confidence,
            title=f"Kinesis checkpoints of {', '.join(tables)} lost in failed migrations (NIFI-16003)"
                  + (f" on {', '.join(hosts)}" if hosts else ""),
            explanation=" ".join(f.explanation for f in group),
            hosts=list(hosts), tasks=tables, ts=min((f.ts for f in group if f.ts), default=None),
            evidence=merge_evidence(*(f.evidence for f in group)),
            missing_evidence=list(dict.fromkeys(m for f in group for m in f.missing_evidence)),
            impact=Impact(summary=" ".join(f.impact.summary for f in group if f.impact),
                          figures={"tables": {f.tasks[0]: f.impact.figures for f in group if f.impact and f.tasks},
                                   "shards": sum((f.impact.figures.get("shards") or 0) for f in group if f.impact)},
                          method=worst.impact.method if worst.impact else ""),
            known_bugs=worst.known_bugs,
        ))
    return merged


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
    # Without a deletion, a retry that announced the re-copy and copied nothing ends the story just as surely.
    skipped = t.retried if t.gone is None else None
    seen = {"legacy table deleted": t.deleted, "table re-created": t.created, "copy failed": t.f,
            **({"retry skipped the re-copy": skipped} if skipped is not None else {"migration table deleted": t.gone})}
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
        f"and the copy of the checkpoints from {table}_migration failed at {fmt_ts(t.f.ts)}"
        + (f" ({t.f.detail})" if t.f.detail else "") + ". "
        + (f"On the automatic retry after the administrative yield the processor deleted {table}_migration at "
           f"{fmt_ts(t.gone.ts)} without copying it: "
           if t.gone else
           f"On the automatic retry at {fmt_ts(skipped.ts)} the processor announced a re-copy from {table}_migration "
           f"but copied nothing (the rename lock of the failed attempt was never released, NIFI-16066) and started "
           f"on the empty {table}; the old checkpoints are still in {table}_migration, so they can be restored by "
           f"hand, but NiFi does not use them: "
           if skipped is not None else f"No deletion of {table}_migration is in the evidence yet; on 2.9.0 the automatic "
                          f"@OnScheduled retry after the administrative yield ({ADMINISTRATIVE_YIELD_S} s by default, "
                          f"so from about {fmt_ts(t.f.ts + timedelta(seconds=ADMINISTRATIVE_YIELD_S))}) deletes it "
                          f"without copying: ")
        + ("" if skipped is not None else "no copy of the shard checkpoints exists anymore and ")
        + "every shard restarted from the Initial Stream Position. This is NIFI-16003"
        + (" with the NIFI-16066 retry." if skipped is not None else "."))
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
    lease_key = any(e.lease_key for e in errors)
    what = f"DynamoDB '{LEASE_KEY_ERROR} in the item' (HTTP 400)" if lease_key else "a DynamoDB error"
    return Finding(
        detector=ID, severity="critical" if lease_key else "warning", confidence="possible",
        title=(f"ConsumeKinesis start failed with {'the ' + repr(LEASE_KEY_ERROR) + ' error' if lease_key else 'a DynamoDB error'} "
               f"({len(errors)} processor(s)): checkpoints may be lost (NIFI-16003)"),
        explanation=(
            f"{len(errors)} ConsumeKinesis processor(s) ({', '.join(components) or 'ids unknown'}) failed to start "
            f"with {what}. On NiFi 2.9.0 a failure of the copy step of the checkpoint-table migration, after the "
            f"legacy table was already deleted, looks like this; NiFi then retries @OnScheduled after the "
            f"administrative yield ({ADMINISTRATIVE_YIELD_S} s by default) and that retry deletes <table>_migration "
            f"without copying it (NIFI-16003). With NiFi's default logging neither the copy nor the deletion leaves "
            f"a line in nifi-app.log: CloudTrail and a scan of the tables decide."),
        hosts=sorted({e.host for e in errors if e.host}), tasks=components, ts=errors[0].ts,
        evidence=evidence_lines(tl, [(e.source, e.line_no) for e in errors]),
        missing_evidence=missing_steps(ID),
        impact=Impact(summary="unknown until the tables are checked: possibly every shard checkpoint of the affected "
                              "tables (TRIM_HORIZON -> reprocessing, LATEST -> data loss).",
                      method="no DynamoDB or CloudTrail evidence in the bundle"),
        known_bugs=known_bug_sentences(ID, versions[:1]),
    )
