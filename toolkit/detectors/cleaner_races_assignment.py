"""The state-directory cleaner deleting a task directory around a (re)assignment of that task.

The cleaner (every ``state.cleanup.delay.ms``) deletes task directories no thread has locked.
A directory deleted while the task is still assigned to the host, or during the rebalance that
brings it back, means a full restore at best; combined with a standby that never got its lock it is
KAFKA-8187, and the cleaner's race with rebalance-time locking is KAFKA-16025. Deleting the directory
of a task that left the host more than ``state.cleanup.delay.ms`` earlier is the cleaner's job: a
routine event, reported as ``info`` even when the task comes back later (it restores from the
changelog, as designed).

Decision per host (one finding listing its tasks): a ``dir_cleanups`` row whose task was still
assigned at the time, or whose task was assigned again within ``REASSIGNED_WITHIN_MIN`` minutes
although it had not left the host ``state.cleanup.delay.ms`` before the deletion: ``warning``.

Up to 2.5 every task gets a directory when it is created, stateless ones included, but only a task with
state stores locks it; nothing is ever written into a stateless task's directory, so the cleaner deletes it
``state.cleanup.delay.ms`` after it was made (or first seen by the cleaner), assigned or not. The directory
holds nothing and the task needs none: ``info``. A task is taken as stateless when the bundle shows state for
other sub-topologies (store or changelog lines, captured checkpoints) and never for its own, and the run is
not known to be 2.6 or later (from 2.6 a stateless task gets no directory).
"""

from __future__ import annotations

from pyspark.sql import functions as F

from toolkit.detectors.base import Finding, Impact, detector
from toolkit.detectors.preconditions import rows_in
from toolkit.detectors.common import (
    bounded,
    evidence_lines,
    fmt_ts,
    known_bug_sentences,
    may_predate,
    missing_steps,
    rows,
    run_rows,
    run_versions,
)

ID = "cleaner-races-assignment"
REASSIGNED_WITHIN_MIN = 30
DEFAULT_CLEANUP_DELAY_MS = 600_000  # state.cleanup.delay.ms default


@detector(id=ID, title="State cleaner deleted a task directory around its assignment", severity="warning",
          needs=("dir_cleanups", "task_lifecycles", "checkpoints", "process_runs", "events", "state"), role="trigger",
          requires=rows_in("dir_cleanups"))
def cleaner_races_assignment(tl) -> list[Finding]:
    """Cleaner deletions of directories that were assigned, or re-assigned soon after; routine ones as info."""
    cleaned = tl.dir_cleanups.join(tl.process_runs.select("run_id", "state_cleanup_delay_ms"), "run_id", "left").alias("c")
    later = tl.task_lifecycles.alias("l")
    joined = cleaned.join(later, (F.col("c.host") == F.col("l.host")) & (F.col("c.task_id") == F.col("l.task_id"))
                          & (F.col("l.start") > F.col("c.ts"))
                          & (F.col("l.start") <= F.col("c.ts") + F.expr(f"INTERVAL {REASSIGNED_WITHIN_MIN} MINUTES")),
                          "left")
    per = joined.groupBy("c.host", "c.run_id", "c.task_id", "c.ts", "c.assigned_at_the_time", "c.last_owner_thread",
                         "c.last_owner_role", "c.last_owner_until", "c.delay_ms", "c.state_cleanup_delay_ms",
                         "c.source", "c.line_no").agg(
        F.min(F.struct(F.col("l.start").alias("at"), F.col("l.stream_thread").alias("thread"),
                       F.col("l.role").alias("role"), F.col("l.source").alias("src"),
                       F.col("l.line_no").alias("line"))).alias("back"))
    got = bounded(per, 200, order=["host", "ts"])
    writes = rows(tl.checkpoints.where(F.col("kind") == "written").join(
        tl.dir_cleanups.select("host", "task_id", F.col("ts").alias("cleaned_at")), ["host", "task_id"]).where(
        F.col("ts") > F.col("cleaned_at")).groupBy("host", "task_id", "cleaned_at").agg(
        F.min(F.struct("ts", "source", "line_no", "offset")).alias("w")), 200)
    wrote = {(w.host, w.task_id, w.cleaned_at): w.w for w in writes}
    stateful = _stateful_subtopologies(tl)
    versions = {run.run_id: (run.version, run.version_range) for run in run_rows(tl)}
    racy, routine, stateless = [], [], []
    for r in got.rows:
        back = r.back if r.back is not None and r.back.at is not None else None
        delay = r.delay_ms or r.state_cleanup_delay_ms or DEFAULT_CLEANUP_DELAY_MS
        left_ms = (r.ts - r.last_owner_until).total_seconds() * 1000 if r.last_owner_until is not None else None
        left_long_ago = left_ms is not None and left_ms >= delay and not r.assigned_at_the_time
        item = (r, back, wrote.get((r.host, r.task_id, r.ts)), left_ms, delay)
        if _stateless(r.task_id, stateful, *versions.get(r.run_id, (None, None))):
            stateless.append(item)
        elif r.assigned_at_the_time or (back is not None and not left_long_ago):
            racy.append(item)
        else:
            routine.append(item)
    findings = []
    for host in sorted({i[0].host for i in racy}):
        findings.append(_finding(tl, host, [i for i in racy if i[0].host == host], racy=True, truncation=got.record("cleanups")))
    for host in sorted({i[0].host for i in routine}):
        findings.append(_finding(tl, host, [i for i in routine if i[0].host == host], racy=False,
                                 truncation=got.record("cleanups")))
    for host in sorted({i[0].host for i in stateless}):
        findings.append(_stateless_finding(host, [i for i in stateless if i[0].host == host], got.record("cleanups")))
    return findings


#: Tables of state evidence read at most to tell stateful sub-topologies from stateless ones.
MAX_SUBTOPOLOGIES = 1000


def _subtopology(task_id: str | None) -> str | None:
    """``1`` of ``1_3``; ``orders__1`` of a named topology's ``orders__1_3``."""
    return task_id.rsplit("_", 1)[0] if task_id and "_" in task_id else None


def _stateful_subtopologies(tl) -> set[str]:
    """Sub-topologies the bundle shows state for: a store or changelog named on a task's line, or a captured
    checkpoint of one of its tasks."""
    sub = F.regexp_extract("task_id", r"^(.*)_[0-9]+$", 1).alias("sub")
    logged = tl.events.where(F.col("task_id").isNotNull() & (F.col("store").isNotNull()
                                                             | F.col("topic").endswith("-changelog"))).select(sub)
    captured = tl.state.checkpoints.where(F.col("task_id").isNotNull()).select(sub)
    return {r.sub for r in rows(logged.unionByName(captured).distinct(), MAX_SUBTOPOLOGIES) if r.sub}


def _stateless(task_id: str | None, stateful: set[str], version: str | None, version_range: str | None) -> bool:
    """The task's sub-topology shows no state while others do, in a run that may still make its directory (< 2.6)."""
    sub = _subtopology(task_id)
    if not stateful or sub is None or sub in stateful:
        return False
    return may_predate(version, version_range, "2.6")


def _stateless_finding(host: str, items, truncation: dict) -> Finding:
    tasks = sorted({r.task_id for r, *_ in items})
    refs = [(r.source, r.line_no) for r, *_ in items]
    assigned = sorted({r.task_id for r, *_ in items if r.assigned_at_the_time})
    return Finding(
        detector=ID, severity="info", confidence="likely",
        title=f"{host}: cleaner deleted the empty directories of stateless task(s) {', '.join(tasks)}",
        explanation=(f"On {host} the state-directory cleaner deleted the directories of task(s) {', '.join(tasks)}"
                     + (f" ({', '.join(assigned)} still assigned)" if assigned else "")
                     + ". Their sub-topology shows no state store anywhere in the bundle while others do: up to 2.5 "
                       "a stateless task still gets a directory but never locks it or writes into it, so the cleaner "
                       "removes it once it is older than state.cleanup.delay.ms. Nothing was lost."),
        hosts=[host], tasks=tasks, ts=min(r.ts for r, *_ in items), evidence=evidence_lines(None, refs),
        impact=Impact(summary="none: the directories held no state", figures={"cleanups": len(items)},
                      method="sub-topologies with store, changelog or checkpoint evidence versus the cleaned task's"),
        truncation=truncation,
    )


def _finding(tl, host: str, items, *, racy: bool, truncation: dict) -> Finding:
    tasks = sorted({r.task_id for r, *_ in items})
    refs, parts = [], []
    for r, back, write, left_ms, delay in items:
        refs += [(r.source, r.line_no)] + ([(back.src, back.line)] if back else [])
        if write is not None:
            refs.append((write.source, write.line_no))
        state = ("while it was assigned" if r.assigned_at_the_time else
                 f"{left_ms / 1000:.0f} s after it left the host (cleanup delay {delay / 1000:.0f} s)"
                 if left_ms is not None else "after its last owner on the host was gone")
        parts.append(f"task {r.task_id} at {fmt_ts(r.ts)} {state}"
                     + (f"; it came back to {back.thread or 'the host'} as {back.role or 'a task'} at {fmt_ts(back.at)}"
                        if back else "")
                     + (f"; a checkpoint (offset {write.offset}) was written for it after the deletion"
                        if write is not None else ""))
    first = min(r.ts for r, *_ in items)
    if racy:
        title = f"{host}: cleaner deleted the directory of task(s) {', '.join(tasks)} around their assignment"
        explanation = (f"On {host} the state-directory cleaner deleted task directories that were assigned or came "
                       f"back right away: " + "; ".join(parts) + ". The next owner restores from scratch, or from a "
                       "stale checkpoint if one is written back without the store (KAFKA-8187); the cleaner racing "
                       "rebalance-time locking is KAFKA-16025.")
    else:
        title = f"{host}: routine cleanup of the directory of task(s) {', '.join(tasks)}"
        explanation = (f"On {host} the state-directory cleaner deleted the directories of tasks that had left the "
                       f"host more than state.cleanup.delay.ms earlier (or whose last owner was gone): "
                       + "; ".join(parts) + ". This is the cleaner's job; a task that returns later restores from "
                       "its changelog.")
    return Finding(
        detector=ID, severity="warning" if racy else "info",
        confidence="confirmed" if racy and any(r.assigned_at_the_time or back for r, back, *_ in items) else "likely",
        title=title, explanation=explanation, hosts=[host], tasks=tasks, ts=first,
        evidence=evidence_lines(None, refs), missing_evidence=missing_steps(ID) if racy else [],
        impact=Impact(summary=f"local state of task(s) {', '.join(tasks)} on {host} deleted; rebuilt from the changelog",
                      figures={"cleanups": len(items),
                               "reassigned_after_s": [(b.at - r.ts).total_seconds() if b else None
                                                      for r, b, *_ in items]},
                      method="cleaner line to the task's next lifecycle line on the host"),
        known_bugs=known_bug_sentences(ID, run_versions(tl, [host])[:1]) if racy else [],
        truncation=truncation,
    )
