"""KAFKA-8187: a standby that never got its lock writes back a stale checkpoint after the cleaner.

Sequence (2.0.x-2.2.1): thread B creates standby task T and reads T's checkpoint while thread A of
the same process still holds T's directory lock; B's lock attempt fails and is not retried before
B goes RUNNING. A releases T. The state-directory cleaner later deletes the unlocked directory.
At the next rebalance B closes its never-initialised standby and writes the offset it read long
ago: ``T/.checkpoint`` re-appears without any store data. When this host becomes T's active (or
standby) owner, restoration starts at that offset into an empty store: everything before it is
missing.

Decision, per host and task: a ``failed`` lock while another thread of the process held the task
-> a cleaner deletion of the task directory after it -> a checkpoint for the task written after
the deletion (log line) or captured without store files -> a restoration of the task's changelog
starting at that non-zero offset after the deletion. Without the write-back proof the finding is
``likely``.
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

ID = "standby-lock-stale-checkpoint"
STORE_DATA_KINDS = ("rocksdb_dir", "rocksdb_store", "segmented_store", "segment", "sst", "rocksdb_file")


def _contended_locks(tl):
    """Failed lock attempts on a task another thread of the same run held (holder from the timeline)."""
    failed = tl.locks.where(F.col("kind") == "failed").alias("f")
    acquired = tl.locks.where(F.col("kind") == "acquired").alias("a")
    # Holder known from task lifecycles, or an earlier acquisition by another thread of the same run.
    by_acquire = failed.join(acquired, (F.col("f.host") == F.col("a.host")) & (F.col("f.run_id") == F.col("a.run_id"))
                             & (F.col("f.task_id") == F.col("a.task_id")) & (F.col("a.thread") != F.col("f.thread"))
                             & (F.col("a.ts") <= F.col("f.ts")), "left").groupBy(
        "f.host", "f.run_id", "f.task_id", "f.ts", "f.thread", "f.holder_thread", "f.source", "f.line_no").agg(
        F.max(F.col("a.thread")).alias("acquirer"))
    return by_acquire.select(
        "host", "run_id", "task_id", F.col("ts").alias("lock_failed_at"), F.col("thread").alias("failed_thread"),
        F.coalesce("holder_thread", "acquirer").alias("holder_thread"),
        F.col("source").alias("lock_source"), F.col("line_no").alias("lock_line"),
    ).where(F.col("holder_thread").isNotNull())


@detector(id=ID, title="Standby lock failure + cleaner left a stale checkpoint (KAFKA-8187)", severity="critical",
          needs=("locks", "dir_cleanups", "checkpoints", "restorations", "state"))
def standby_lock_stale_checkpoint(tl) -> list[Finding]:
    """KAFKA-8187: lock contention, cleaner deletion, stale checkpoint written back, partial restore."""
    contended = _contended_locks(tl)
    cleaned = tl.dir_cleanups.select("host", "task_id", F.col("ts").alias("cleaned_at"),
                                     F.col("source").alias("clean_source"), F.col("line_no").alias("clean_line"))
    chain = contended.join(cleaned, ["host", "task_id"]).where(F.col("cleaned_at") > F.col("lock_failed_at"))
    written = tl.checkpoints.where((F.col("kind") == "written") & (F.col("origin") == "log")
                                   & (F.col("offset") > 0)).select(
        "host", "task_id", "topic", "partition", F.col("offset").alias("stale_offset"),
        F.col("ts").alias("written_at"), F.col("source").alias("write_source"), F.col("line_no").alias("write_line"))
    store_files = tl.state.state_files.where(F.col("kind").isin(*STORE_DATA_KINDS)).select("host", "task_id").distinct()
    captured = tl.state.checkpoints.where(F.col("problem").isNull() & (F.col("offset") > 0)).join(
        store_files, ["host", "task_id"], "left_anti").select(
        "host", "task_id", "topic", "partition", F.col("offset").alias("stale_offset"),
        F.col("capture_time").alias("captured_at"), F.col("file_mtime").alias("captured_mtime"),
        F.col("source").alias("capture_source"), F.col("file").alias("capture_file"))
    restores = tl.restorations.where(F.col("start_offset") > 0).select(
        "host", "topic", "partition", F.col("start").alias("restore_at"), "start_offset",
        F.col("end_offset").alias("restore_end_offset"), F.col("task_id").alias("restore_task"),
        F.col("start_source").alias("restore_source"), F.col("start_line_no").alias("restore_line"))
    # Stale offset candidates: written back after the cleaner, or captured without store data.
    back = chain.join(written, ["host", "task_id"], "left").where(
        F.col("written_at").isNull() | (F.col("written_at") > F.col("cleaned_at")))
    # Restoration of the same changelog partition from exactly that offset, after the deletion.
    from_written = back.where(F.col("stale_offset").isNotNull()).join(
        restores.withColumnRenamed("start_offset", "stale_offset"), ["host", "topic", "partition", "stale_offset"]).where(
        F.col("restore_at") > F.col("cleaned_at"))
    from_capture = chain.join(captured, ["host", "task_id"]).where(F.col("captured_at") > F.col("cleaned_at")).join(
        restores.withColumnRenamed("start_offset", "stale_offset"), ["host", "topic", "partition", "stale_offset"]).where(
        F.col("restore_at") > F.col("cleaned_at"))
    log_hits = rows(from_written, 10, order=["host", "task_id", "restore_at"])
    cap_hits = rows(from_capture, 10, order=["host", "task_id", "restore_at"])
    # Without write-back proof: a restore from a non-zero offset of a task whose directory the cleaner
    # deleted after a contended lock (nothing on disk should have held that offset).
    weak = chain.join(restores.withColumnRenamed("restore_task", "task_id"), ["host", "task_id"]).where(
        F.col("restore_at") > F.col("cleaned_at"))
    weak_hits = [] if (log_hits or cap_hits) else rows(weak, 10, order=["host", "task_id", "restore_at"])
    keys = sorted({(h.host, h.task_id) for h in (*log_hits, *cap_hits, *weak_hits)})
    return [_finding(tl, host, task, [h for h in log_hits if (h.host, h.task_id) == (host, task)],
                     [h for h in cap_hits if (h.host, h.task_id) == (host, task)],
                     [h for h in weak_hits if (h.host, h.task_id) == (host, task)]) for host, task in keys]


def _finding(tl, host: str, task: str, log_hits, cap_hits, weak_hits) -> Finding:
    best = (log_hits or cap_hits or weak_hits)[0]
    confirmed = bool(log_hits or cap_hits)
    stale_offset = best.stale_offset if confirmed else best.start_offset
    refs = [(best.lock_source, best.lock_line), (best.clean_source, best.clean_line),
            (best.restore_source, best.restore_line)]
    for h in log_hits:
        refs.append((h.write_source, h.write_line))
    state_evidence = [Evidence(h.capture_source, None,
                               f"{h.capture_file}: {h.topic}-{h.partition} offset {h.stale_offset} "
                               f"(mtime {fmt_ts(h.captured_mtime)}), no RocksDB files in task directory {task}",
                               "state", h.captured_mtime) for h in cap_hits[:2]]
    evidence = merge_evidence(evidence_lines(tl, refs), state_evidence)
    restored = (best.restore_end_offset - stale_offset) if best.restore_end_offset is not None else None
    changelog = f"{best.topic}-{best.partition}"
    explanation = (
        f"On {host}, thread {best.failed_thread} failed to lock task {task}'s state directory at "
        f"{fmt_ts(best.lock_failed_at)} while {best.holder_thread} of the same process still held it, and went on "
        f"without retrying. The cleaner deleted the unlocked directory at {fmt_ts(best.cleaned_at)}. "
        + ("Afterwards a .checkpoint for the task re-appeared with the offset read before the lock failure "
           f"({stale_offset}) " + ("(Writing checkpoint line)" if log_hits else "(state capture: no store files)")
           if confirmed else "No proof of the write-back was found, ")
        + f"and at {fmt_ts(best.restore_at)} the task's changelog {changelog} was restored starting at offset "
        f"{stale_offset} into an empty store. This is KAFKA-8187: everything before that offset is missing.")
    impact = Impact(
        summary=(f"changelog {changelog} offsets 0 .. {stale_offset - 1 if stale_offset else 0} "
                 f"({fmt_int(stale_offset)} offsets) were never restored into task {task} on {host}; the store "
                 f"holds only the {fmt_int(restored)} records from offset {stale_offset} on. Keys last written "
                 f"before that offset are missing (reads return nothing or stale aggregates)."),
        figures={"changelog": changelog, "stale_offset": stale_offset, "restore_end_offset": best.restore_end_offset,
                 "offsets_not_restored": stale_offset, "records_restored": restored},
        method=("offsets not restored = restore start offset (the stale checkpoint; 2.x checkpoints hold the next "
                "offset to read) - 0; compaction may make the number of lost keys smaller."),
    )
    missing = [] if confirmed else missing_steps(
        ID, "TRACE ProcessorStateManager ('Writing checkpoint') around the rebalance after the cleaner, or a state "
            "capture of the task directory (.checkpoint without rocksdb/) (see playbooks/capturing-state.md)")
    return Finding(
        detector=ID, severity="critical", confidence="confirmed" if confirmed else "likely",
        title=f"{host}: task {task} restored from a stale standby checkpoint after the cleaner deleted it (KAFKA-8187)",
        explanation=explanation, hosts=[host], tasks=[task], ts=best.lock_failed_at, evidence=evidence,
        missing_evidence=missing, impact=impact, known_bugs=known_bug_sentences(ID, run_versions(tl, [host])[:1]),
    )
