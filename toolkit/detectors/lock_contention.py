"""Lock contention and slow hand-offs of task state directories.

A task moving between threads of one process waits until the old owner releases its directory
lock (``Failed to lock the state directory for task``). Short waits are normal during a
rebalance; long or endless ones stall the task (KAFKA-12679) and, with standbys before 2.2.2, can
leave a standby uninitialised (KAFKA-8187).
Decision per host/task: failed lock attempts spanning more than ``SLOW_HANDOFF_S`` seconds, or a
hand-off (release -> acquisition) slower than that: ``warning``; shorter contention: ``info``.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from toolkit.detectors.base import Finding, Impact, detector
from toolkit.detectors.common import evidence_at, fmt_int, fmt_ts, known_bug_sentences, missing_steps, rows, run_versions

ID = "lock-contention"
SLOW_HANDOFF_S = 60


@detector(id=ID, title="State-directory lock contention / slow hand-off", severity="warning", needs=("locks",))
def lock_contention(tl) -> list[Finding]:
    """Failed lock attempts per host and task, with how long the contention lasted."""
    failed = tl.locks.where(F.col("kind") == "failed")
    per_task = failed.groupBy("host", "run_id", "task_id").agg(
        F.count(F.lit(1)).alias("attempts"), F.min("ts").alias("first"), F.max("ts").alias("last"),
        F.max("handoff_ms").alias("handoff_ms"), F.first("holder_thread", ignorenulls=True).alias("holder"),
        F.first("thread", ignorenulls=True).alias("waiter"))
    findings = []
    for t in rows(per_task, 30, order=["host", "first"]):
        span_s = (t.last - t.first).total_seconds()
        slow = span_s > SLOW_HANDOFF_S or (t.handoff_ms or 0) > SLOW_HANDOFF_S * 1000
        refs = failed.where((F.col("host") == t.host) & (F.col("run_id") == t.run_id) & (F.col("task_id") == t.task_id))
        findings.append(Finding(
            detector=ID, severity="warning" if slow else "info", confidence="confirmed",
            title=f"{t.host}: task {t.task_id} lock contention ({t.attempts} failed attempt(s)"
                  + (f", {span_s:.0f} s)" if slow else ")"),
            explanation=(f"{t.waiter or 'a thread'} could not lock task {t.task_id}'s state directory on {t.host} "
                         f"from {fmt_ts(t.first)} to {fmt_ts(t.last)}"
                         + (f" while {t.holder} still held it" if t.holder else "")
                         + (f"; hand-off took {fmt_int(t.handoff_ms)} ms" if t.handoff_ms is not None else "")
                         + ". " + ("A hand-off this slow stalls the task and can livelock the waiting thread "
                                   "(KAFKA-12679)." if slow else "Short contention during a rebalance is normal; "
                                   "with standby tasks before 2.2.2 a failed standby lock is not retried (KAFKA-8187).")),
            hosts=[t.host], tasks=[t.task_id], ts=t.first, evidence=evidence_at(tl, refs.orderBy("ts").limit(6)),
            missing_evidence=[] if t.holder else missing_steps(ID),
            impact=Impact(summary=f"task {t.task_id} could not start on the new thread for {span_s:.1f} s",
                          figures={"failed_attempts": t.attempts, "contention_s": round(span_s, 3),
                                   "handoff_ms": t.handoff_ms},
                          method="first to last failed lock line of the task in the run; hand-off = holder's release "
                                 "to the waiter's next task phase"),
            known_bugs=known_bug_sentences(ID, run_versions(tl, [t.host])[:1]),
        ))
    return findings
