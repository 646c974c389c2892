"""The state-directory cleaner deleting a task directory around a (re)assignment of that task.

The cleaner (every ``state.cleanup.delay.ms``) deletes task directories no thread has locked.
A directory deleted while the task is still assigned to the host, or just before the task comes
back to it, means a full restore at best; combined with a standby that never got its lock it is
KAFKA-8187, and the cleaner's race with rebalance-time locking is KAFKA-16025.
Decision per host/task: a ``dir_cleanups`` row whose task was still assigned at the time, or that
the host is assigned again within ``REASSIGNED_WITHIN_MIN`` minutes after the deletion.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from toolkit.detectors.base import Finding, Impact, detector
from toolkit.detectors.common import evidence_lines, fmt_ts, known_bug_sentences, missing_steps, rows, run_versions

ID = "cleaner-races-assignment"
REASSIGNED_WITHIN_MIN = 30


@detector(id=ID, title="State cleaner deleted a task directory around its assignment", severity="warning",
          needs=("dir_cleanups", "task_lifecycles", "checkpoints"))
def cleaner_races_assignment(tl) -> list[Finding]:
    """Cleaner deletions of directories that were assigned, or re-assigned soon after."""
    cleaned = tl.dir_cleanups.alias("c")
    later = tl.task_lifecycles.alias("l")
    joined = cleaned.join(later, (F.col("c.host") == F.col("l.host")) & (F.col("c.task_id") == F.col("l.task_id"))
                          & (F.col("l.start") > F.col("c.ts"))
                          & (F.col("l.start") <= F.col("c.ts") + F.expr(f"INTERVAL {REASSIGNED_WITHIN_MIN} MINUTES")),
                          "left")
    per = joined.groupBy("c.host", "c.task_id", "c.ts", "c.assigned_at_the_time", "c.last_owner_thread",
                         "c.last_owner_role", "c.source", "c.line_no").agg(
        F.min(F.struct(F.col("l.start").alias("at"), F.col("l.stream_thread").alias("thread"),
                       F.col("l.role").alias("role"), F.col("l.source").alias("src"),
                       F.col("l.line_no").alias("line"))).alias("back"))
    racy = per.where(F.col("assigned_at_the_time") | F.col("back").isNotNull() & F.col("back.at").isNotNull())
    findings = []
    for r in rows(racy, 20, order=["host", "ts"]):
        back = r.back if r.back is not None and r.back.at is not None else None
        refs = [(r.source, r.line_no)] + ([(back.src, back.line)] if back else [])
        wrote = rows(tl.checkpoints.where((F.col("host") == r.host) & (F.col("task_id") == r.task_id)
                                          & (F.col("kind") == "written") & (F.col("ts") > r.ts))
                     .select("source", "line_no", "offset"), 1, order=["ts"])
        refs += [(w.source, w.line_no) for w in wrote]
        findings.append(Finding(
            detector=ID, severity="warning", confidence="confirmed" if back or r.assigned_at_the_time else "likely",
            title=f"{r.host}: cleaner deleted task {r.task_id}'s directory "
                  + ("while it was assigned" if r.assigned_at_the_time else "shortly before it was assigned again"),
            explanation=(f"At {fmt_ts(r.ts)} the state-directory cleaner on {r.host} deleted task {r.task_id}'s "
                         f"directory (last owner {r.last_owner_thread or 'unknown'}, {r.last_owner_role or 'role unknown'})"
                         + (f"; the task came back to {back.thread or 'the host'} as {back.role or 'a task'} at "
                            f"{fmt_ts(back.at)}" if back else "")
                         + (f"; a checkpoint (offset {wrote[0].offset}) was written for it after the deletion" if wrote else "")
                         + ". The next owner restores from scratch, or from a stale checkpoint if one is written back "
                           "without the store (KAFKA-8187)."),
            hosts=[r.host], tasks=[r.task_id], ts=r.ts, evidence=evidence_lines(tl, refs),
            missing_evidence=missing_steps(ID),
            impact=Impact(summary=f"local state of task {r.task_id} on {r.host} lost; rebuilt from the changelog",
                          figures={"reassigned_after_s": (back.at - r.ts).total_seconds() if back else None},
                          method="cleaner line to the task's next lifecycle line on the host"),
            known_bugs=known_bug_sentences(ID, run_versions(tl, [r.host])[:1]),
        ))
    return findings
