"""KAFKA-7672: a task returns to a thread that restored it before and goes RUNNING unrestored.

In 1.1-2.1 each StreamThread's changelog reader keeps the set of partitions it has restored
(``completedRestorers``) for its whole life. When a task comes back to that thread without a
checkpoint (under EOS the state is wiped and reset to the changelog start), the reader believes
the partition is already restored and the thread goes straight to RUNNING with an empty store.

Decision, per host, thread and changelog partition: ``CHECKPOINT_MISSING`` (no checkpoint / reset
to the beginning) for a task on thread T; T restored the same changelog partition earlier; T's
next transition to RUNNING follows with no restoration line for that partition in between
(no per-partition ``RESTORE_START`` with offsets, no ``RESTORE_PROGRESS``/``RESTORE_END``, no
state-updater hand-over). ``confirmed`` when the restore lines are visible elsewhere in that log
(their logger is on, so their absence means something), else ``likely``.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from toolkit.detectors.base import Finding, Impact, detector
from toolkit.detectors.common import (
    evidence_lines,
    fmt_int,
    fmt_ts,
    known_bug_sentences,
    missing_steps,
    rows,
    run_versions,
)

ID = "restore-skipped-after-reassignment"


def _real_restores(events):
    """Lines that prove a partition was actually being restored (not just 'Start restoring ... topics')."""
    per_partition_start = (F.col("event") == "RESTORE_START") & (F.col("offset").isNotNull() | F.col("end_offset").isNotNull()
                                                                  | F.col("message").rlike("from (the )?beginning"))
    progress = F.col("event").isin("RESTORE_PROGRESS", "RESTORE_END")
    return events.where((per_partition_start | progress) & F.col("topic").isNotNull() & F.col("partition").isNotNull())


@detector(id=ID, title="Task went RUNNING without restoring its changelog (KAFKA-7672)", severity="critical",
          needs=("events", "thread_states"))
def restore_skipped_after_reassignment(tl) -> list[Finding]:
    """KAFKA-7672: no checkpoint, state reset, and the thread reaches RUNNING without restoring."""
    ev = tl.events.where(F.col("product").isNull() | (F.col("product") != "nifi"))
    missing = ev.where((F.col("event") == "CHECKPOINT_MISSING") & F.col("task_id").isNotNull()
                       & F.col("topic").isNotNull() & F.col("stream_thread").isNotNull()).select(
        "host", "run_id", "stream_thread", "task_id", "topic", "partition",
        F.col("ts").alias("missing_at"), F.col("source").alias("missing_source"), F.col("line_no").alias("missing_line"))
    restores = _real_restores(ev).select(
        "host", "run_id", "stream_thread", "topic", "partition", F.col("ts").alias("restore_at"),
        F.col("end_offset").alias("restore_end_offset"), F.col("source").alias("restore_source"),
        F.col("line_no").alias("restore_line"))
    # 1. The same thread restored this changelog partition before.
    before = missing.join(restores, ["host", "run_id", "stream_thread", "topic", "partition"]).where(
        F.col("restore_at") < F.col("missing_at")).groupBy(
        "host", "run_id", "stream_thread", "task_id", "topic", "partition", "missing_at", "missing_source",
        "missing_line").agg(F.max(F.struct("restore_at", "restore_source", "restore_line", "restore_end_offset")).alias("prev"))
    # 2. The thread's next RUNNING after the missing checkpoint.
    running = ev.where((F.col("event") == "THREAD_STATE") & (F.col("to_state") == "RUNNING")).select(
        "host", "run_id", "stream_thread", F.col("ts").alias("running_at"),
        F.col("source").alias("running_source"), F.col("line_no").alias("running_line"))
    nxt = before.join(running, ["host", "run_id", "stream_thread"]).where(F.col("running_at") >= F.col("missing_at")).groupBy(
        *before.columns).agg(F.min(F.struct("running_at", "running_source", "running_line")).alias("run"))
    # 3. No restoration of that partition (by any thread of the host, or the state updater) in between.
    later = restores.select("host", "run_id", "topic", "partition", "restore_at")
    queued = ev.where(F.col("event") == "RESTORE_QUEUED").select("host", "run_id", "task_id", F.col("ts").alias("queued_at"))
    gap = nxt.join(later, ["host", "run_id", "topic", "partition"], "left").groupBy(*nxt.columns).agg(
        F.max(F.when((F.col("restore_at") >= F.col("missing_at")) & (F.col("restore_at") <= F.col("run.running_at")),
                     F.lit(1)).otherwise(F.lit(0))).alias("restored_between"))
    gap = gap.join(queued, ["host", "run_id", "task_id"], "left").groupBy(*nxt.columns, "restored_between").agg(
        F.max(F.when((F.col("queued_at") >= F.col("missing_at")) & (F.col("queued_at") <= F.col("run.running_at")),
                     F.lit(1)).otherwise(F.lit(0))).alias("queued_between"))
    skipped = gap.where((F.col("restored_between") == 0) & (F.col("queued_between") == 0))
    hits = rows(skipped, 20, order=["host", "missing_at"])
    if not hits:
        return []
    debug_visible = {r.host for r in rows(restores.where(F.col("restore_end_offset").isNotNull()).select("host").distinct(), 50)}
    findings = []
    for h in hits:
        confirmed = h.host in debug_visible
        changelog = f"{h.topic}-{h.partition}"
        refs = [(h.prev.restore_source, h.prev.restore_line), (h.missing_source, h.missing_line),
                (h.run.running_source, h.run.running_line)]
        reset = ev.where((F.col("event") == "OFFSET_RESET") & (F.col("host") == h.host) & (F.col("topic") == h.topic)
                         & (F.col("partition") == h.partition) & F.col("ts").between(h.missing_at, h.run.running_at))
        refs += [(r.source, r.line_no) for r in rows(reset.select("source", "line_no"), 2)]
        end = h.prev.restore_end_offset
        findings.append(Finding(
            detector=ID, severity="critical", confidence="confirmed" if confirmed else "likely",
            title=f"{h.host}: task {h.task_id} went RUNNING on {h.stream_thread.rsplit('-', 1)[-1] if '-' in h.stream_thread else h.stream_thread} "
                  f"without restoring {changelog} (KAFKA-7672)",
            explanation=(
                f"On {h.host}, {h.stream_thread} found no checkpoint for task {h.task_id} at {fmt_ts(h.missing_at)} "
                f"(state reset to the beginning of {changelog}) and reached RUNNING at {fmt_ts(h.run.running_at)} "
                f"with no restoration of that changelog in between. The same thread had restored {changelog} "
                f"before (at {fmt_ts(h.prev.restore_at)}), so its changelog reader still counted the partition as "
                f"restored: KAFKA-7672. The task runs on an empty store."),
            hosts=[h.host], tasks=[h.task_id], ts=h.missing_at,
            evidence=evidence_lines(tl, refs),
            missing_evidence=[] if confirmed else missing_steps(
                ID, "DEBUG StoreChangelogReader ('Restoring partition ... from offset ... to endOffset ...') to prove "
                    "that no restoration ran (see playbooks/collecting-evidence.md)"),
            impact=Impact(
                summary=(f"the whole history of {changelog} is missing from task {h.task_id}'s store on {h.host}: "
                         f"at least {fmt_int(end)} changelog offsets (the end offset when it was last restored); "
                         f"lookups for older keys return nothing until they are written again."),
                figures={"changelog": changelog, "offsets_missing_at_least": end},
                method="lower bound = changelog end offset of the thread's previous restoration of that partition "
                       "(the changelog only grew since).",
            ),
            known_bugs=known_bug_sentences(ID, run_versions(tl, [h.host])[:1]),
        ))
    return findings
