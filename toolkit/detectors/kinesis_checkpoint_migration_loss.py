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
leaseKey`` text, ``warning`` for other DynamoDB errors of a ConsumeKinesis start; not for a start whose
stack trace shows it failed in the table check before any migration step, e.g. a DNS error on the first
``DescribeTable``). A migration whose
copy succeeded never matches. On 2.10.0 the retry logs "re-copying before deletion" but, with the rename
lock of the failed attempt still held (NIFI-16066), copies nothing and keeps ``<app>_migration``: that
announcement with no ``Copied ..`` line after it stands in for the deletion.
"""

from __future__ import annotations

import itertools
import math
from datetime import timedelta
from types import SimpleNamespace

from pyspark.sql import functions as F

from toolkit.detectors.base import Evidence, Finding, Impact, detector
from toolkit.detectors.common import (
    all_rows,
    bug_status,
    evidence_lines,
    fmt_ts,
    in_spark_order,
    known_bug_sentences,
    merge_evidence,
    missing_steps,
    rows,
    run_versions,
    spark_order,
)
from toolkit.detectors.preconditions import (
    any_of,
    count_rows,
    events_named,
    rows_in,
    sql_timestamp,
)
from toolkit.sqltext import sql_in, sql_list, sql_str

ID = "kinesis-checkpoint-migration-loss"
LEASE_KEY_ERROR = "Missing the key leaseKey"
#: Stack frames of a ConsumeKinesis start (2.9+): the checkpoint-table check every start runs, and the migration
#: it may run (``migrateAndRename``, ``renameMigrationTable``, ``cleanupLingeringMigration``) in this class.
TABLE_CHECK_FRAME = "KinesisShardManager.ensureCheckpointTableExists"
MIGRATION_FRAME = "LegacyCheckpointMigrator."
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


#: The steps compared on the driver: a handful per migration. Successful item writes, which CloudTrail data
#: events log by the thousand, are only counted (:func:`_copies_and_items`).
COMPARED_STEPS = (*DELETED, *CREATED, *COPY_FAILED, *MIGRATION_GONE, *COPIED, *RECOPY_ANNOUNCED,
                  "MIGRATION_COPY_STARTED", "PROCESSOR_START_FAILED")


def _migration_steps(tl) -> list:
    """The migration steps of every table (and the processors' start failures), oldest first."""
    steps = all_rows(tl.migration_steps.where(
        f"step IN ({sql_list(COMPARED_STEPS)}) "
        f"OR (step IN ({sql_list(FAILED_WRITES)}) AND error_code IS NOT NULL)").select(
        "table", "base_table", "ts", "step", "origin", "host", "error_code", "detail", "actor", "source", "line_no"),
        "checkpoint-table migration steps")
    return in_spark_order(steps, key=lambda s: (s.ts, s.source, s.line_no))


def _on_base(step) -> bool:
    """The step is about the checkpoint table itself (``<app>``)."""
    return step.table is not None and step.table == step.base_table


def _on_migration(step) -> bool:
    """The step is about the table the items are copied from (``<app>_migration``)."""
    return step.base_table is not None and step.table == f"{step.base_table}_migration"


def _first_copy_failures(steps: list) -> dict[str, "_Step"]:
    """Per table, the first copy failure into the re-created table: a classified CloudTrail failure, any failed
    item write into it, or a logged copy start with no completion before the processor's start failure."""
    failures: dict[str, list] = {}
    for s in steps:
        if _on_base(s) and (s.step in COPY_FAILED or s.step in FAILED_WRITES and s.error_code is not None):
            failures.setdefault(s.base_table, []).append(s)
    started = [s for s in steps if _on_base(s) and s.step == "MIGRATION_COPY_STARTED"]
    done = [s for s in steps if _on_base(s) and s.step in COPIED]
    start_failed = [s for s in steps if s.step == "PROCESSOR_START_FAILED"]
    for copy in started:
        for fail in start_failed:
            if (None in (copy.host, copy.ts, fail.ts) or fail.host != copy.host
                    or not copy.ts <= fail.ts <= copy.ts + timedelta(seconds=COPY_TO_FAILURE_S)):
                continue
            if not any(d.base_table == copy.base_table and d.ts is not None and copy.ts <= d.ts <= fail.ts
                       for d in done):
                failures.setdefault(copy.base_table, []).append(fail)
    out = {}
    for table, found in failures.items():
        f = min(found, key=lambda f: spark_order(f.ts, f.source, f.line_no, f.origin, f.detail))
        out[table] = _Step(f.ts, f.source, f.line_no, f.origin, f.detail)
    return out


def _nearest_step(steps: list, table: str, names: tuple, on, failed_at, before: bool) -> "_Step | None":
    """The table's last step of ``names`` at or before the failure (``before``), else its first at or after it."""
    if failed_at is None:
        return None
    found = [s for s in steps if s.base_table == table and on(s) and s.step in names and s.ts is not None
             and (s.ts <= failed_at if before else s.ts >= failed_at)]
    if not found:
        return None
    pick = max if before else min
    s = pick(found, key=lambda s: spark_order(s.ts, s.source, s.line_no))
    return _Step(s.ts, s.source, s.line_no)


def _successful_puts(table: str, after, until=None, *, inclusive: bool = False):
    """A check for a successful item write into ``table`` after ``after`` (up to ``until``): a re-copy."""
    low = ">=" if inclusive else ">"
    window = f"ts {low} {sql_timestamp(after)}" + (f" AND ts <= {sql_timestamp(until)}" if until is not None else "")
    return rows_in("migration_steps", f"table = base_table AND base_table = {sql_str(table)} AND "
                                      f"step = 'CLOUDTRAIL_PUT_ITEM' AND error_code IS NULL AND {window}")


def _migrated_items(table: str):
    """A count of the item writes into ``<table>_migration``: the checkpoints the migration had to copy."""
    return rows_in("migration_steps", f"table = {sql_str(table + '_migration')} AND step = 'CLOUDTRAIL_PUT_ITEM'")


def _copied_between(steps: list, table: str, after, until, *, inclusive: bool) -> bool:
    """A logged successful copy into ``table`` after ``after`` (up to ``until`` when given)."""
    return any(s.base_table == table and _on_base(s) and s.step in COPIED and s.ts is not None
               and (s.ts >= after if inclusive else s.ts > after) and (until is None or s.ts <= until)
               for s in steps)


@detector(id=ID, title="ConsumeKinesis checkpoints lost in a failed table migration (NIFI-16003)",
          severity="critical", needs=("migration_steps", "events", "state", "process_runs"), role="root-cause",
          # a step of a checkpoint-table migration, or a processor's failed start (the log-only finding)
          requires=any_of(rows_in("migration_steps", "base_table IS NOT NULL"),
                          events_named("PROCESSOR_START_FAILED", also=False)))
def kinesis_checkpoint_migration_loss(tl) -> list[Finding]:
    """NIFI-16003: legacy table deleted, copy failed, migration table dropped without a re-copy."""
    steps = _migration_steps(tl)
    failures = _first_copy_failures(steps)
    # Every failed table, whatever else is (not) in the evidence.
    every_table = []
    for table in sorted(failures)[:200]:
        f = failures[table]
        every_table.append(SimpleNamespace(
            base_table=table, f=f,
            deleted=_nearest_step(steps, table, DELETED, _on_base, f.ts, before=True),
            created=_nearest_step(steps, table, CREATED, _on_base, f.ts, before=True),
            gone=_nearest_step(steps, table, MIGRATION_GONE, _on_migration, f.ts, before=False),
            retried=_nearest_step(steps, table, RECOPY_ANNOUNCED, _on_base, f.ts, before=False)))
    text = F.concat_ws("\n", F.col("message"), F.coalesce(F.col("stack"), F.lit("")))
    dynamo = text.contains("DynamoDb") | text.contains("dynamodb")
    kinesis = F.coalesce(F.col("component_type"), F.lit("")).contains("ConsumeKinesis") | text.contains("ConsumeKinesis[")
    # A stack that shows the start's call path but no migration frame failed before the migration began (the first
    # DescribeTable of the table check: a DNS, network or credentials error): no checkpoint was touched.
    stack = F.coalesce(F.col("stack"), F.lit(""))
    before_migration = stack.contains(TABLE_CHECK_FRAME) & ~stack.contains(MIGRATION_FRAME)
    errors = rows(tl.events.where((F.col("event") == "PROCESSOR_START_FAILED") & dynamo & kinesis
                                  & (text.contains(LEASE_KEY_ERROR) | ~before_migration)).select(
        "host", "component_id", "ts", "source", "line_no", text.contains(LEASE_KEY_ERROR).alias("lease_key")),
        50, order=["ts"])
    explained = {t.base_table for t in every_table}
    drops = _drops_after_creation(steps, explained) if errors else []
    # One query counts the successful item writes that would be a re-copy, and the items each migration had.
    puts = {t.base_table: _successful_puts(t.base_table, t.f.ts, t.gone.ts if t.gone else None)
            for t in every_table if t.f.ts is not None}
    drop_puts = {(c.base_table, c.ts): _successful_puts(c.base_table, c.ts, drop.ts, inclusive=True)
                 for c, drop in drops}
    items = {table: _migrated_items(table) for table in sorted(explained | {c.base_table for c, _ in drops})}
    counts = count_rows(tl, [*puts.values(), *drop_puts.values(), *items.values()]) if items else {}
    # A successful PutItem into the table between the failure and the drop would be a re-copy.
    for t in every_table:
        t.recopied = int(t.f.ts is not None and (
            _copied_between(steps, t.base_table, t.f.ts, t.gone.ts if t.gone else None, inclusive=False)
            or bool(counts.get(puts[t.base_table]))))
    tables = [t for t in every_table if not t.recopied]
    matched: set[tuple] = set()
    versions = run_versions(tl)
    pairs = []
    for t in tables:
        # The closest unmatched ERROR line within the window is this table's failed start.
        near = [e for e in errors if (e.source, e.line_no) not in matched
                and abs((e.ts - t.f.ts).total_seconds()) <= MATCH_WINDOW_S]
        error = min(near, key=lambda e: abs((e.ts - t.f.ts).total_seconds())) if near else None
        if error is not None:
            matched.add((error.source, error.line_no))
        pairs.append((t, error))
    # A copy that failed and was then re-copied (2.10+) explains its start failure too: not an orphan.
    for t in every_table:
        if t.recopied:
            near = [e for e in errors if (e.source, e.line_no) not in matched
                    and abs((e.ts - t.f.ts).total_seconds()) <= MATCH_WINDOW_S]
            if near:
                best = min(near, key=lambda e: abs((e.ts - t.f.ts).total_seconds()))
                matched.add((best.source, best.line_no))
    recopied_drops = {key for key, check in drop_puts.items() if counts.get(check)}
    for inferred, error in _inferred_failures(steps, drops, recopied_drops, errors, matched):
        matched.add((error.source, error.line_no))
        pairs.append((inferred, error))
    facts = _TableFacts(tl, [t.base_table for t, _ in pairs], {table: counts.get(check) for table, check in items.items()})
    findings = _per_host([_table_finding(t, error, versions, facts) for t, error in pairs])
    orphans = [e for e in errors if (e.source, e.line_no) not in matched]
    # On 2.11+ both the lingering-migration deletion (NIFI-16003) and the rename-lock variant (NIFI-16066) are
    # fixed: a failed start is retried and re-copies, so an unexplained ERROR line alone is no loss.
    fixed_everywhere = bool(versions) and all(
        bug_status("NIFI-16003", v) == "fixed" and bug_status("NIFI-16066", v) == "fixed" for v in versions)
    if orphans and not fixed_everywhere:
        findings.append(_log_only_finding(tl, orphans, versions))
    return findings


def _drops_after_creation(steps: list, explained: set) -> list[tuple]:
    """(re-creation, deletion of ``<app>_migration`` after it) of the tables without a recorded copy failure,
    the deletion at least half an administrative yield later (sooner: a successful migration's clean-up)."""
    gone = [s for s in steps if _on_migration(s) and s.step in MIGRATION_GONE]
    out = []
    for c in steps:
        if not (_on_base(c) and c.step in CREATED) or c.base_table in explained or c.ts is None:
            continue
        drop = next((g for g in gone if g.base_table == c.base_table and g.ts is not None and g.ts >= c.ts), None)
        if drop is not None and (drop.ts - c.ts).total_seconds() >= ADMINISTRATIVE_YIELD_S / 2:
            out.append((c, drop))
    return out


def _inferred_failures(steps: list, drops: list, recopied: set, errors, matched: set):
    """Copy failures that left no record of their own (management-only CloudTrail, default logging).

    ``<app>`` re-created, a ConsumeKinesis start failure with a DynamoDB error after it, and
    ``<app>_migration`` deleted one administrative yield after that failure (the automatic retry),
    with no successful copy in between. Each failure line explains one table: the one whose
    deletion came closest to one yield after it, among the tables whose CloudTrail caller maps to the
    failure's host (see :func:`_consistent_pairs`).
    """
    deleted = [s for s in steps if _on_base(s) and s.step in DELETED]
    candidates = []
    for c, drop in drops:
        if (c.base_table, c.ts) in recopied or _copied_between(steps, c.base_table, c.ts, drop.ts, inclusive=True):
            continue
        for e in errors:
            if (e.source, e.line_no) in matched or not (c.ts <= e.ts <= drop.ts):
                continue
            off = abs((drop.ts - e.ts).total_seconds() - ADMINISTRATIVE_YIELD_S)
            if off <= MATCH_WINDOW_S:
                candidates.append((off, c, drop, e))
    out = []
    for off, c, drop, e in _consistent_pairs(candidates):
        legacy = max((d for d in deleted if d.base_table == c.base_table and d.ts is not None and d.ts <= c.ts),
                     key=lambda d: d.ts, default=None)
        inferred = _InferredTable(
            base_table=c.base_table,
            f=_Step(e.ts, e.source, e.line_no, "log", "start failure between the re-creation and the deletion of "
                                                      f"{c.base_table}_migration one administrative yield later"),
            deleted=_Step(legacy.ts, legacy.source, legacy.line_no) if legacy else None,
            created=_Step(c.ts, c.source, c.line_no), gone=_Step(drop.ts, drop.source, drop.line_no), retried=None,
            recopied=0)
        out.append((inferred, e))
    return out


class _TableFacts:
    """What the impact of the lost tables rests on, read for all of them at once: the shards of each
    re-created table in the captured scan, the initial positions the shards restarted from, and how many
    items each migration had to copy."""

    def __init__(self, tl, tables: list[str], migrated: dict[str, int | None]) -> None:
        self.migrated = migrated
        self.shards: dict[str, list] = {}
        self.positions: list[str] = []
        if not tables:
            return
        items = tl.state.dynamo_items.where(f"{sql_in('table', sorted(set(tables)))} AND kind = 'shard'")
        for r in all_rows(items.groupBy("table", "stream").agg(
                F.count(F.lit(1)).alias("shards"), F.min("source").alias("source")), "streams of the tables"):
            self.shards.setdefault(r.table, []).append(r)
        for found in self.shards.values():
            found.sort(key=lambda r: spark_order(r.stream))
        initial = rows(tl.events.where((F.col("event") == "SHARD_STARTED_FROM_INITIAL_POSITION")
                                       & F.col("position_type").isNotNull()).select("position_type").distinct(), 3)
        self.positions = sorted({r.position_type for r in initial})


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


def _table_finding(t, error, versions, facts: _TableFacts) -> Finding:
    table = t.base_table
    # Without a deletion, a retry that announced the re-copy and copied nothing ends the story just as surely.
    skipped = t.retried if t.gone is None else None
    seen = {"legacy table deleted": t.deleted, "table re-created": t.created, "copy failed": t.f,
            **({"retry skipped the re-copy": skipped} if skipped is not None else {"migration table deleted": t.gone})}
    confirmed = all(v is not None for v in seen.values())
    missing_parts = [k for k, v in seen.items() if v is None]
    shards, positions = facts.shards.get(table, [])[:10], facts.positions
    migrated_items = facts.migrated.get(table) or None
    refs = [(v.source, v.line_no) for v in seen.values() if v is not None]
    aws = [Evidence(v.source, v.line_no, f"CloudTrail: {label} ({table if label != 'migration table deleted' else table + '_migration'}) at {fmt_ts(v.ts)}"
                    + (f": {t.f.detail}" if label == "copy failed" and t.f.detail else ""), "aws", v.ts)
           for label, v in seen.items() if v is not None and v.source and v.source.endswith(".json")]
    log_refs = [r for r in refs if r[0] and not r[0].endswith(".json")]
    if error is not None:
        log_refs.append((error.source, error.line_no))
    evidence = merge_evidence(evidence_lines(None, log_refs), aws)
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
