"""Lock contention and slow hand-offs of task state directories.

A task moving between threads of one process waits until the old owner releases its directory
lock (``Failed to lock the state directory for task``). Short waits are normal during a
rebalance; long or endless ones stall the task (KAFKA-12679) and, with standbys before 2.2.2, can
leave a standby uninitialised (KAFKA-8187).
Decision per host (one finding per host and kind, listing the tasks): an episode of failed lock attempts
of a task (attempts less than ``EPISODE_GAP_S`` apart; a longer quiet gap starts a new episode) spanning
more than ``SLOW_HANDOFF_S`` seconds, or a hand-off (release -> acquisition) slower than that:
``warning``; shorter contention, routine during a rebalance: ``info``. Short episodes of one task far apart
(two rebalances of a rolling restart) do not add up to one long wait.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from toolkit.detectors.base import Finding, Impact, detector
from toolkit.detectors.preconditions import rows_in
from toolkit.sqltext import earliest
from toolkit.detectors.common import bounded, fmt_ts, known_bug_sentences, log_refs, missing_steps, run_versions

ID = "lock-contention"
SLOW_HANDOFF_S = 60
#: A waiting thread retries every loop iteration, so one contention logs its failures far more often than this; a
#: longer silence between two failures of a task separates two contentions (two rebalances of a rolling restart).
EPISODE_GAP_S = 300


@detector(id=ID, title="State-directory lock contention / slow hand-off", severity="warning",
          needs=("locks", "process_runs"), role="trigger", requires=rows_in("locks", "kind = 'failed'"))
def lock_contention(tl) -> list[Finding]:
    """Failed lock attempts per host and task, with how long the contention lasted."""
    # A failure without a time (a record whose stamp could not be read) can be placed in no episode.
    failed = tl.locks.where((F.col("kind") == "failed") & F.col("ts").isNotNull())
    in_task = Window.partitionBy("host", "run_id", "task_id").orderBy("ts", "source", "line_no")
    gap_s = F.unix_micros("ts") / 1e6 - F.unix_micros(F.lag("ts").over(in_task)) / 1e6
    failed = failed.withColumn("_new", F.coalesce((gap_s > EPISODE_GAP_S).cast("int"), F.lit(1)))
    failed = failed.withColumn("_episode", F.sum("_new").over(in_task.rowsBetween(Window.unboundedPreceding, 0)))
    per_task = failed.groupBy("host", "run_id", "task_id", "_episode").agg(
        F.count(F.lit(1)).alias("attempts"), F.min("ts").alias("first"), F.max("ts").alias("last"),
        F.max("handoff_ms").alias("handoff_ms"), F.expr(earliest("holder_thread")).alias("holder"),
        F.expr(earliest("thread")).alias("waiter"),
        F.slice(F.array_sort(F.collect_list(F.struct("ts", "source", "line_no"))), 1, 3).alias("lines"))
    got = bounded(per_task, 200, order=["host", "first"])
    items = []
    for t in got.rows:
        span_s = (t.last - t.first).total_seconds()
        slow = span_s > SLOW_HANDOFF_S or (t.handoff_ms or 0) > SLOW_HANDOFF_S * 1000
        items.append((t, span_s, slow))
    findings = []
    for host in sorted({t.host for t, _, _ in items}):
        for slow in (True, False):
            mine = [(t, span) for t, span, s in items if t.host == host and s == slow]
            if mine:
                findings.append(_finding(tl, host, mine, slow, got.record("tasks")))
    return findings


def _finding(tl, host: str, mine, slow: bool, truncation: dict) -> Finding:
    tasks = sorted({t.task_id for t, _ in mine})
    attempts = sum(t.attempts for t, _ in mine)
    longest = max(span for _, span in mine)
    parts = [f"{t.waiter or 'a thread'} on task {t.task_id} from {fmt_ts(t.first)} to {fmt_ts(t.last)}"
             + (f" while {t.holder} still held it" if t.holder else "")
             + (f" (hand-off {t.handoff_ms} ms)" if t.handoff_ms is not None else "") for t, _ in mine[:8]]
    return Finding(
        detector=ID, severity="warning" if slow else "info", confidence="confirmed",
        title=(f"{host}: {'slow' if slow else 'short'} lock contention on task(s) {', '.join(tasks)} "
               f"({attempts} failed attempt(s)" + (f", up to {longest:.0f} s)" if slow else ")")),
        explanation=(f"Threads on {host} could not lock task state directories: " + "; ".join(parts) + ". "
                     + ("A hand-off this slow stalls the task and can livelock the waiting thread (KAFKA-12679)."
                        if slow else "Short contention during a rebalance is normal; with standby tasks before 2.2.2 "
                                     "a failed standby lock is not retried (KAFKA-8187).")),
        hosts=[host], tasks=tasks, ts=min(t.first for t, _ in mine),
        evidence=log_refs((line.source, line.line_no) for t, _ in mine for line in (t.lines or [])),
        missing_evidence=[] if all(t.holder for t, _ in mine) else missing_steps(ID),
        impact=Impact(summary=f"task(s) {', '.join(tasks)} could not start on the new thread for up to {longest:.1f} s",
                      figures={"failed_attempts": attempts, "contention_s": round(longest, 3),
                               "tasks": [{"task": t.task_id, "attempts": t.attempts, "contention_s": round(span, 3),
                                          "handoff_ms": t.handoff_ms} for t, span in mine]},
                      method="first to last failed lock line of one episode of the task (attempts less than "
                             f"{EPISODE_GAP_S} s apart); hand-off = holder's release to the waiter's next task phase"),
        known_bugs=known_bug_sentences(ID, run_versions(tl, [host])[:1]), truncation=truncation,
    )
