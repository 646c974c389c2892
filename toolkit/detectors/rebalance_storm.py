"""Rebalance storms: many consumer-group generations in a short time.

Every generation revokes and re-assigns tasks; under EOS each can close tasks dirty, and each
restarts restorations and lock hand-offs (KAFKA-12679 livelocks need back-to-back rebalances).
Decision: within any window of ``WINDOW_MINUTES``, at least ``STORM_GENERATIONS`` distinct
generations of one group (from ``generations``, all hosts merged). A rolling restart of a few
pods stays below the threshold. A storm that cost nothing (no partitions or tasks lost, no thread fenced, no
task corrupted or wiped during it; partitions lost by a thread whose last summary counted no records cost
nothing) is ``info``; one that did is ``warning``.

Under the streams rebalance protocol (KIP-1071, 4.1+) there is no JoinGroup: ``generations`` holds the member
epochs the threads reconciled, and a loss of tasks (a member fenced or gone stale, with its lost-task lines) is
counted once, from its first line.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from toolkit import utc
from toolkit.detectors.base import Finding, Impact, detector
from toolkit.detectors.preconditions import rows_in
from toolkit.detectors.common import (
    evidence_at,
    fmt_ts,
    known_bug_sentences,
    log_refs,
    streams_task_losses,
    missing_steps,
    rows,
    run_versions,
    summary_before,
)

ID = "rebalance-storm"
WINDOW_MINUTES = 10
STORM_GENERATIONS = 6


#: Events that show a rebalance cost more than a pause.
COSTLY = ("PARTITIONS_LOST", "TASK_MIGRATED", "TASK_CORRUPTED", "TASK_CLOSED_DIRTY")
#: Of those (and the streams protocol's ``TASKS_LOST``), the ones that cost nothing when the thread had processed
#: no input just before.
IDLE_HARMLESS = ("PARTITIONS_LOST", "TASK_MIGRATED", "TASK_CLOSED_DIRTY", "TASKS_LOST")
#: Wipe reasons (``wipes.reason``) that are housekeeping, not damage: the state cleaner, a user's cleanUp(), the
#: start-up purge of unassigned task folders.
ROUTINE_WIPES = ("cleaner", "user-cleanup", "startup-purge")


@detector(id=ID, title="Rebalance storm", severity="warning", needs=("generations", "process_runs", "events", "wipes"),
          role="trigger",
          # a storm needs that many distinct generations, each seen on at least one row
          requires=rows_in("generations", "generation IS NOT NULL AND joined IS NOT NULL", min_rows=STORM_GENERATIONS))
def rebalance_storm(tl) -> list[Finding]:
    """Many generations of one consumer group within a few minutes."""
    gens = tl.generations.where(F.col("generation").isNotNull() & F.col("joined").isNotNull()).groupBy(
        "group_id", "generation").agg(F.min("joined").alias("at"), F.min(F.struct("joined", "source", "line_no")).alias("first"))
    seconds = F.unix_timestamp("at")
    window = Window.partitionBy("group_id").orderBy(seconds).rangeBetween(0, WINDOW_MINUTES * 60)
    dense = gens.withColumn("in_window", F.count(F.lit(1)).over(window)).withColumn(
        "last_in_window", F.max("generation").over(window))
    worst = dense.where(F.col("in_window") >= STORM_GENERATIONS).groupBy("group_id").agg(
        F.max(F.struct("in_window", "at", "generation", "last_in_window")).alias("w"),
        F.count(F.lit(1)).alias("storm_starts"))
    findings = []
    for g in rows(worst, 10, order=["group_id"]):
        start, end_gen = g.w.at, g.w.last_in_window
        members = tl.generations.where((F.col("group_id") == g.group_id)
                                       & F.col("generation").between(g.w.generation, end_gen))
        hosts = sorted({r.host for r in rows(members.select("host").distinct(), 50) if r.host})
        until = utc.lit(start) + F.expr(f"INTERVAL {WINDOW_MINUTES} MINUTES")
        in_storm = F.col("ts").between(utc.lit(start), until)
        costly = tl.events.where(F.col("event").isin(*COSTLY) & in_storm).select(*tl.events.columns)
        # Streams protocol: one row per loss, not one per line that reports it.
        costly = costly.unionByName(streams_task_losses(tl).where(in_storm).select(*tl.events.columns))
        # A thread that lost or dirty-closed its tasks while its last summary counted no records had nothing
        # uncommitted: no reprocessing, no damage.
        idle = summary_before(tl, costly.where(F.col("event").isin(*IDLE_HARMLESS))).where(
            F.col("summary.records") == 0).select("source", "line_no")
        costs = rows(costly.join(idle, ["source", "line_no"], "left_anti").select("event", "source", "line_no")
                     # The cleaner's deletions (and a user's cleanUp) are routine, not a cost of the storm.
                     .unionByName(tl.wipes.where(in_storm & ~F.col("reason").isin(*ROUTINE_WIPES))
                                  .select(F.col("reason").alias("event"), "source", "line_no")),
                     6, order=["source", "line_no"])
        findings.append(Finding(
            detector=ID, severity="warning" if costs else "info", confidence="confirmed",
            title=f"Rebalance storm in group {g.group_id}: {g.w.in_window} generations within {WINDOW_MINUTES} min",
            explanation=(f"Group {g.group_id} went through generations {g.w.generation}..{end_gen} "
                         f"({g.w.in_window} rebalances) within {WINDOW_MINUTES} minutes from {fmt_ts(start)}. Each "
                         f"rebalance revokes and reassigns tasks: lock hand-offs, restorations and, under EOS, "
                         f"dirty closes multiply. Look for the member that keeps rejoining (poll timeouts, "
                         f"crash loops, static membership misconfiguration)."
                         + (f" During it: {', '.join(sorted({c.event for c in costs}))}." if costs else
                            " Nothing was lost or wiped during it: a pause, not damage.")),
            hosts=hosts, ts=start,
            evidence=evidence_at(tl, members.orderBy("joined").limit(12)) + log_refs((c.source, c.line_no) for c in costs),
            missing_evidence=missing_steps(ID) if len(hosts) < 2 else [],
            impact=Impact(summary=f"{g.w.in_window} rebalances in {WINDOW_MINUTES} minutes; processing paused during each",
                          figures={"generations": g.w.in_window, "first_generation": g.w.generation,
                                   "last_generation": end_gen},
                          method="distinct generations (classic: JoinGroup; streams protocol: member epoch) whose first join "
                   "falls within the window"),
            known_bugs=known_bug_sentences(ID, run_versions(tl, hosts)[:1]),
        ))
    return findings
