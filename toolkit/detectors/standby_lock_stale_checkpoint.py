"""KAFKA-8187: a standby that never got its lock writes back a stale checkpoint after the cleaner.

Sequence (2.0.x-2.2.1): thread B creates standby task T and reads T's checkpoint while thread A of
the same process still holds T's directory lock; B's lock attempt fails and is not retried before
B goes RUNNING. A releases T. The state-directory cleaner later deletes the unlocked directory.
At the next rebalance B closes its never-initialised standby and writes the offset it read long
ago: ``T/.checkpoint`` re-appears without any store data. When this host becomes T's active (or
standby) owner, restoration starts at that offset into an empty store: everything before it is
missing.

Decision, per host (one finding listing its tasks):

1. the run's version can have the bug (2.0.0-2.2.1; before 2.0 cannot tell; 2.2.2, 2.3.0 and later
   have the fix, so a later race such as KAFKA-16025 is never labelled KAFKA-8187);
2. a failed lock of a *standby* task (the line or the thread's assignment says standby) while
   another thread of the same process held the task;
3. the cleaner deleted the task's directory after the failure;
4. ``confirmed`` only when a checkpoint is written back after the deletion (log line) or captured
   after it without store files, holding the offset known before the lock failure (the offset the
   standby read, or the last one written for the task on that host before the failure); a later
   checkpoint that merely carries the same offset as something else proves nothing;
5. the restoration of the task's changelog from that offset after the deletion gives the impact.

Without the write-back proof, a restore from a non-zero offset after the deletion gives ``likely``.
On 2.0-2.2 the lock failure and the write-back are TRACE and the restore start DEBUG: with INFO logs
only, a cleaner deletion of a directory of a task this host held as a standby is reported with what
is missing, ``likely`` (critical) when a state capture shows the directory re-created with a
``.checkpoint`` and no store files, else ``info``.
"""

from __future__ import annotations

from types import SimpleNamespace

from pyspark.sql import Window
from pyspark.sql import functions as F

from toolkit.detectors.base import Evidence, Finding, Impact, detector
from toolkit.detectors.common import (
    all_rows,
    bug_status,
    evidence_lines,
    fmt_int,
    fmt_ts,
    in_spark_order,
    known_bug_sentences,
    merge_evidence,
    missing_steps,
    rows,
    run_rows,
)
from toolkit.detectors.preconditions import all_of, any_of, rows_in
from toolkit.sqltext import sql_in

ID = "standby-lock-stale-checkpoint"
BUG = "KAFKA-8187"
#: Proofs of each kind (log write-back, capture, restore) the findings rest on at most.
MAX_HITS = 50
STORE_DATA_KINDS = ("rocksdb_dir", "rocksdb_store", "segmented_store", "segment", "sst", "rocksdb_file")
MISSING_TRACE = ("TRACE org.apache.kafka.streams.processor.internals.AssignedStandbyTasks and ProcessorStateManager "
                 "(the standby lock failure 'Could not create standby task ... will retry' and the write-back "
                 "'Writing checkpoint: {...}'), DEBUG StoreChangelogReader ('Restoring partition ... from offset ...') "
                 "(see playbooks/collecting-evidence.md)")
MISSING_CAPTURE = ("a state capture of the host after the cleaner ran: the task directory with a .checkpoint and no "
                   "rocksdb/ folder is the write-back (see playbooks/capturing-state.md)")


def _standby_tasks(tl):
    """(host, run_id, thread, task_id) a thread held as a standby (assignment summaries, standby lines)."""
    return tl.task_lifecycles.where(F.col("role") == "standby").select(
        "host", "run_id", F.col("stream_thread").alias("failed_thread"), "task_id").distinct()


def _failed_standby_locks(tl):
    """Failed lock attempts of standby tasks, with the other thread of the same run that held the task."""
    failed = tl.locks.where(F.col("kind") == "failed")
    acquired = tl.locks.where(F.col("kind") == "acquired").select(
        "host", "run_id", "task_id", F.col("thread").alias("acquirer"), F.col("ts").alias("acquired_at"))
    by_acquire = failed.join(acquired, ["host", "run_id", "task_id"], "left")
    earlier_other = (F.col("acquirer") != F.col("thread")) & (F.col("acquired_at") <= F.col("ts"))
    holders = by_acquire.groupBy("host", "run_id", "task_id", "ts", "thread", "role", "holder_thread", "source",
                                 "line_no").agg(F.max(F.when(earlier_other, F.col("acquirer"))).alias("acquirer"))
    # The line itself names a standby ("Could not create standby task ..." / "standby-task [..]").
    lines = tl.events.select("source", "line_no", F.lower(F.col("message")).contains("standby").alias("standby_line"))
    locks = holders.join(lines, ["source", "line_no"], "left").select(
        "host", "run_id", "task_id", F.col("ts").alias("lock_failed_at"), F.col("thread").alias("failed_thread"),
        F.coalesce("holder_thread", "acquirer").alias("holder_thread"), "role", "standby_line",
        F.col("source").alias("lock_source"), F.col("line_no").alias("lock_line"))
    standby_assigned = _standby_tasks(tl).withColumn("assigned_standby", F.lit(True))
    locks = locks.join(standby_assigned, ["host", "run_id", "failed_thread", "task_id"], "left")
    is_standby = ((F.col("role") == "standby") | F.coalesce("standby_line", F.lit(False))
                  | F.coalesce("assigned_standby", F.lit(False)))
    return locks.where(is_standby & F.col("holder_thread").isNotNull())


def _chain(tl):
    """Failed standby locks (with the thread that held the task) followed by a cleanup of the task's directory."""
    cleaned = tl.dir_cleanups.select("host", "task_id", F.col("ts").alias("cleaned_at"),
                                     F.col("source").alias("clean_source"), F.col("line_no").alias("clean_line"))
    return _failed_standby_locks(tl).join(cleaned, ["host", "task_id"]).where(
        F.col("cleaned_at") > F.col("lock_failed_at"))


def _hit(chain_row, **fields) -> SimpleNamespace:
    return SimpleNamespace(**chain_row.asDict(), **fields)


def _with_restore(row: SimpleNamespace, restores: dict) -> SimpleNamespace | None:
    """The row with the first restoration of its changelog partition from that offset after the deletion (if
    any); ``None`` when that partition was only restored from that offset before the deletion."""
    got = restores.get((row.host, row.task_id, row.lock_failed_at, row.cleaned_at, row.topic, row.partition))
    if got is not None and got.first is None:
        return None
    restore = got.first if got is not None else None
    row.restore_at = restore.start if restore else None
    row.restore_end_offset = restore.end_offset if restore else None
    row.restore_source = restore.start_source if restore else None
    row.restore_line = restore.start_line_no if restore else None
    return row


def _captured_without_store(tl):
    store_files = tl.state.state_files.where(F.col("kind").isin(*STORE_DATA_KINDS)).select("host", "task_id").distinct()
    return tl.state.checkpoints.where(F.col("problem").isNull() & (F.col("offset") > 0)).join(
        store_files, ["host", "task_id"], "left_anti").select(
        "host", "task_id", "topic", "partition", F.col("offset").alias("captured_offset"),
        F.coalesce("capture_time", "file_mtime").alias("captured_at"), F.col("file_mtime").alias("captured_mtime"),
        F.col("source").alias("capture_source"), F.col("file").alias("capture_file"))


@detector(id=ID, title="Standby lock failure + cleaner left a stale checkpoint (KAFKA-8187)", severity="critical",
          needs=("locks", "dir_cleanups", "checkpoints", "restorations", "state", "events", "task_lifecycles",
                 "process_runs"),
          role="root-cause",
          # a cleaner deletion, and a failed lock (the full chain) or a standby task (INFO logs only)
          requires=all_of(rows_in("dir_cleanups"),
                          any_of(rows_in("locks", "kind = 'failed'"), rows_in("task_lifecycles", "role = 'standby'"))))
def standby_lock_stale_checkpoint(tl) -> list[Finding]:
    """KAFKA-8187: standby lock failure, cleaner deletion, stale checkpoint written back, partial restore."""
    runs = {r.run_id: r for r in run_rows(tl)}
    chain_df = _chain(tl)
    chain = all_rows(chain_df, "standby lock failures followed by a cleanup")
    log_hits, cap_hits, weak_hits = _chain_hits(tl, chain_df, chain) if chain else ([], [], [])
    hits: dict[tuple, dict] = {}
    for kind, found in (("log", log_hits), ("capture", cap_hits), ("weak", weak_hits)):
        for h in found:
            if _gate(runs.get(h.run_id)) is False:
                continue
            hits.setdefault((h.host, h.task_id), {"log": [], "capture": [], "weak": []})[kind].append(h)
    findings = []
    for host in sorted({host for host, _ in hits}):
        per_task = {task: got for (h, task), got in hits.items() if h == host}
        findings.append(_finding(host, per_task, runs))
    quiet_hosts = {f.hosts[0] for f in findings}
    findings += _info_only(tl, runs, quiet_hosts)
    return findings


def _chain_hits(tl, chain_df, chain: list) -> tuple[list, list, list]:
    """The chain's proof, strongest first: checkpoints written back after the deletion with the offset known
    before the lock failure (log lines; state captures without store files), and, without that proof,
    restorations of the task's partitions from a non-zero offset after the deletion.

    The checkpoint and restore lines of the tasks are compared with the chain in Spark: only the offsets
    known at each lock failure, the first write-backs and restorations after each deletion are read.
    """
    hosts = sorted({c.host for c in chain})
    tasks = sorted({c.task_id for c in chain})
    of_chain = f"{sql_in('host', hosts)} AND {sql_in('task_id', tasks)}"
    lines = tl.checkpoints.where(of_chain)
    failures = chain_df.select("host", "task_id", "lock_failed_at").distinct()
    anchors = chain_df.select("host", "task_id", "lock_failed_at", "cleaned_at").distinct()
    anchor = ["host", "task_id", "lock_failed_at", "cleaned_at"]
    # Per lock failure and changelog partition: the offset of the latest checkpoint read or write up to then.
    known = lines.where("origin = 'log' AND kind IN ('read', 'written') AND offset > 0 AND ts IS NOT NULL "
                        "AND topic IS NOT NULL AND partition IS NOT NULL").join(failures, ["host", "task_id"]).where(
        F.col("ts") <= F.col("lock_failed_at")).groupBy("host", "task_id", "lock_failed_at", "topic", "partition").agg(
        F.max(F.struct("ts", "source", "line_no", "offset")).offset.alias("stale_offset"))
    stale = anchors.join(known, ["host", "task_id", "lock_failed_at"])
    stale_of: dict[tuple, list] = {}
    for r in all_rows(known, "checkpoint offsets known at the lock failures"):
        stale_of.setdefault((r.host, r.task_id, r.lock_failed_at), []).append((r.topic, r.partition, r.stale_offset))
    # The first write-backs of that offset after each deletion.
    written = lines.where("origin = 'log' AND kind = 'written'").select(
        "host", "task_id", "topic", "partition", F.col("offset").alias("stale_offset"), "ts", "source", "line_no")
    first_writes = Window.partitionBy(*anchor, "topic", "partition").orderBy("ts", "source", "line_no")
    written_of: dict[tuple, list] = {}
    for r in all_rows(stale.join(written, ["host", "task_id", "topic", "partition", "stale_offset"]).where(
            F.col("ts") > F.col("cleaned_at")).withColumn("_n", F.row_number().over(first_writes)).where(
            F.col("_n") <= MAX_HITS), "checkpoint write-backs after the deletions"):
        written_of.setdefault((r.host, r.task_id, r.lock_failed_at, r.cleaned_at, r.topic, r.partition), []).append(r)
    captured: dict[tuple, list] = {}
    for r in all_rows(_captured_without_store(tl).where(of_chain), "captured checkpoints of the tasks"):
        captured.setdefault((r.host, r.task_id, r.topic, r.partition, r.captured_offset), []).append(r)
    restorations = tl.restorations.where(sql_in("host", hosts)).select(
        "host", "task_id", "topic", "partition", "start", "start_offset", "end_offset", "start_source",
        "start_line_no")
    # Per deletion and stale offset: whether the partition was restored from it at all, and the first such
    # restoration after the deletion (a restoration without a time counts as after it).
    first_restore = F.struct("start", "end_offset", "start_source", "start_line_no")
    restores = {(r.host, r.task_id, r.lock_failed_at, r.cleaned_at, r.topic, r.partition): r for r in all_rows(
        stale.join(restorations.drop("task_id").withColumnRenamed("start_offset", "stale_offset"),
                   ["host", "topic", "partition", "stale_offset"]).groupBy(*anchor, "topic", "partition").agg(
            F.min(F.when(F.col("start").isNull() | (F.col("start") > F.col("cleaned_at")), first_restore))
            .alias("first")), "restorations from the stale offsets")}
    log_hits, cap_hits, weak_hits = [], [], []
    for c in chain:
        for topic, partition, stale_offset in sorted(stale_of.get((c.host, c.task_id, c.lock_failed_at), []),
                                                     key=lambda k: str(k[:2])):
            for w in written_of.get((c.host, c.task_id, c.lock_failed_at, c.cleaned_at, topic, partition), []):
                log_hits.append(_with_restore(_hit(
                    c, topic=topic, partition=partition, stale_offset=stale_offset, written_at=w.ts,
                    write_source=w.source, write_line=w.line_no), restores))
            for f in captured.get((c.host, c.task_id, topic, partition, stale_offset), []):
                if f.captured_at is not None and f.captured_at > c.cleaned_at:
                    cap_hits.append(_with_restore(_hit(
                        c, topic=topic, partition=partition, stale_offset=stale_offset, captured_at=f.captured_at,
                        captured_mtime=f.captured_mtime, capture_source=f.capture_source,
                        capture_file=f.capture_file), restores))
    # Without that proof: the first restorations of the task's changelog partitions from a non-zero offset after
    # each deletion (a partition is the task's when its checkpoint or restore lines name it).
    partitions = lines.where("topic IS NOT NULL AND partition IS NOT NULL").select(
        "host", "task_id", "topic", "partition").unionByName(restorations.where(
        "task_id IS NOT NULL AND topic IS NOT NULL AND partition IS NOT NULL").select(
        "host", "task_id", "topic", "partition")).distinct()
    later = restorations.where("start_offset > 0 AND start IS NOT NULL").withColumnRenamed("task_id", "restore_task")
    first_restores = Window.partitionBy(*anchor).orderBy("start", "topic", "partition", "start_source", "start_line_no")
    weak_of: dict[tuple, list] = {}
    for r in all_rows(anchors.join(partitions, ["host", "task_id"]).join(later, ["host", "topic", "partition"]).where(
            (F.col("start") > F.col("cleaned_at"))
            & (F.col("restore_task").isNull() | (F.col("restore_task") == F.col("task_id"))))
            .withColumn("_n", F.row_number().over(first_restores)).where(F.col("_n") <= MAX_HITS),
            "restorations after the deletions"):
        weak_of.setdefault((r.host, r.task_id, r.lock_failed_at, r.cleaned_at), []).append(r)
    for c in chain:
        for r in in_spark_order(weak_of.get((c.host, c.task_id, c.lock_failed_at, c.cleaned_at), []),
                                key=lambda r: (str((r.topic, r.partition)), r.start, r.start_source, r.start_line_no)):
            weak_hits.append(_hit(c, topic=r.topic, partition=r.partition, restore_at=r.start,
                                  start_offset=r.start_offset, restore_end_offset=r.end_offset,
                                  restore_task=r.restore_task, restore_source=r.start_source,
                                  restore_line=r.start_line_no))
    by_failure = lambda h: (h.host, h.task_id, h.lock_failed_at)  # noqa: E731
    return (in_spark_order([h for h in log_hits if h is not None], key=by_failure)[:MAX_HITS],
            in_spark_order([h for h in cap_hits if h is not None], key=by_failure)[:MAX_HITS],
            in_spark_order(weak_hits, key=lambda h: (h.host, h.task_id, h.restore_at))[:MAX_HITS])


def _gate(run) -> bool | None:
    """False when the run's version has the fix or cannot have the bug; None when unknown."""
    if run is None or not (run.version or run.version_range):
        return None
    status = bug_status(BUG, run.version, run.version_range)
    return {"affected": True, "fixed": False, "not_affected": False}.get(status)


def _finding(host: str, per_task: dict, runs: dict) -> Finding:
    tasks = sorted(per_task)
    refs, state_evidence, parts = [], [], []
    confirmed_all = True
    first = None
    figures = []
    versions = []
    for task in tasks:
        got = per_task[task]
        confirmed = bool(got["log"] or got["capture"])
        confirmed_all &= confirmed
        best = (got["log"] or got["capture"] or got["weak"])[0]
        run = runs.get(best.run_id)
        versions.append((run.version or run.version_range) if run else None)
        confirmed_all &= _gate(run) is True
        stale = best.stale_offset if confirmed else best.start_offset
        first = best.lock_failed_at if first is None else min(first, best.lock_failed_at)
        refs += [(best.lock_source, best.lock_line), (best.clean_source, best.clean_line),
                 (best.restore_source, best.restore_line)]
        refs += [(h.write_source, h.write_line) for h in got["log"]]
        state_evidence += [Evidence(h.capture_source, None,
                                    f"{h.capture_file}: {h.topic}-{h.partition} offset {h.stale_offset} "
                                    f"(mtime {fmt_ts(h.captured_mtime)}), no RocksDB files in task directory {task}",
                                    "state", h.captured_mtime) for h in got["capture"][:2]]
        changelog = f"{best.topic}-{best.partition}"
        restored = (best.restore_end_offset - stale) if best.restore_end_offset is not None and stale is not None else None
        figures.append({"task": task, "changelog": changelog, "stale_offset": stale,
                        "restore_end_offset": best.restore_end_offset, "offsets_not_restored": stale,
                        "records_restored": restored})
        proof = (("the checkpoint was written back after the deletion with the offset read before the lock "
                  f"failure ({stale}, " + ("Writing checkpoint line" if got["log"] else "state capture without store files")
                  + ")") if confirmed else "no write-back of the old offset was found")
        restore = (f"; at {fmt_ts(best.restore_at)} {changelog} was restored from offset {stale} into an empty store"
                   if best.restore_at is not None else "")
        parts.append(f"task {task}: {best.failed_thread} failed to lock it at {fmt_ts(best.lock_failed_at)} while "
                     f"{best.holder_thread} held it, the cleaner deleted the directory at {fmt_ts(best.cleaned_at)}, "
                     f"{proof}{restore}")
    explanation = (f"On {host} a standby task could not lock its state directory while another thread of the same "
                   f"process held it and went on without retrying; the cleaner later deleted the unlocked directory "
                   f"and the standby wrote back the checkpoint it had read before: " + "; ".join(parts)
                   + ". This is KAFKA-8187: everything before the stale offset is missing from the store.")
    head = figures[0]
    impact = Impact(
        summary="; ".join(f"changelog {f['changelog']} offsets 0 .. {(f['stale_offset'] or 1) - 1} "
                          f"({fmt_int(f['stale_offset'])} offsets) never restored into task {f['task']}"
                          for f in figures) + f" on {host}; keys last written before those offsets are missing.",
        figures={**{k: head[k] for k in ("changelog", "stale_offset", "restore_end_offset", "offsets_not_restored",
                                          "records_restored")}, "tasks": figures},
        method=("offsets not restored = restore start offset (the stale checkpoint; 2.x checkpoints hold the next "
                "offset to read) - 0; compaction may make the number of lost keys smaller."),
    )
    missing = [] if confirmed_all else missing_steps(ID, MISSING_TRACE, MISSING_CAPTURE)
    return Finding(
        detector=ID, severity="critical", confidence="confirmed" if confirmed_all else "likely",
        title=f"{host}: task(s) {', '.join(tasks)} restored from a stale standby checkpoint after the cleaner "
              f"deleted it (KAFKA-8187)",
        explanation=explanation, hosts=[host], tasks=tasks, ts=first,
        evidence=merge_evidence(evidence_lines(None, refs), state_evidence), missing_evidence=missing,
        impact=impact, known_bugs=known_bug_sentences(ID, [v for v in versions if v][:1]),
    )


def _info_only(tl, runs: dict, skip_hosts: set) -> list[Finding]:
    """INFO logs on an affected version: the cleaner deleted the directory of a task the host held as a standby.

    The write-back cannot be seen at INFO; what can: a state capture showing the task directory re-created
    after the deletion (every file newer than it) with a ``.checkpoint``, or a ``.checkpoint`` without store
    files; or the task starting again on the host after the deletion without the from-the-beginning restore
    line a missing checkpoint prints (2.1+), i.e. a checkpoint existed again. Either gives ``likely``
    (critical); neither gives ``info`` with the evidence to collect.
    """
    affected_runs = [r.run_id for r in runs.values() if _gate(r) is True and (r.num_standby_replicas or 1) >= 1]
    if not affected_runs:
        return []
    standby = tl.task_lifecycles.where((F.col("role") == "standby") & F.col("run_id").isin(affected_runs)).groupBy(
        "host", "run_id", "task_id").agg(F.min("start").alias("standby_at"))
    cleaned = tl.dir_cleanups.where(F.col("run_id").isin(affected_runs)).select(
        "host", "run_id", "task_id", F.col("ts").alias("cleaned_at"), "source", "line_no")
    candidates = cleaned.join(standby, ["host", "run_id", "task_id"]).where(F.col("standby_at") < F.col("cleaned_at"))
    if skip_hosts:
        candidates = candidates.where(~F.col("host").isin(sorted(skip_hosts)))
    found = rows(candidates, 100, order=["host", "cleaned_at"])
    if not found:
        return []
    lock_lines = {r.host for r in rows(tl.locks.where(F.col("kind") == "failed").select("host").distinct(), 100)}
    hosts = sorted({r.host for r in found} - lock_lines)  # where lock failures are visible the full chain decided
    if not hosts:
        return []
    files = rows(tl.state.state_files.where(F.col("host").isin(hosts) & F.col("task_id").isNotNull()).groupBy(
        "host", "task_id", "source").agg(F.min("mtime").alias("oldest"), F.max("mtime").alias("newest"),
                                         F.max(F.col("kind").isin(*STORE_DATA_KINDS).cast("int")).alias("store")), 500)
    checkpoints = {(c.host, c.task_id): c for c in rows(tl.state.checkpoints.where(
        F.col("host").isin(hosts) & F.col("problem").isNull()), 500)}
    later = tl.task_lifecycles.where(F.col("host").isin(hosts)).select(
        "host", "task_id", "role", F.col("start").alias("back_at"), F.col("source").alias("back_source"),
        F.col("line_no").alias("back_line"))
    full_restore = tl.events.where(F.col("host").isin(hosts) & F.col("task_id").isNotNull() & (
        (F.col("event") == "CHECKPOINT_MISSING") | ((F.col("event") == "RESTORE_START")
                                                   & F.col("message").contains("from beginning of the changelog")))
    ).select("host", "task_id", F.col("ts").alias("full_at"))
    backs = {(b.host, b.task_id): b for b in rows(candidates.join(later, ["host", "task_id"]).where(
        (F.col("back_at") > F.col("cleaned_at")) & (F.col("role") == "active")).join(
        full_restore, ["host", "task_id"], "left").groupBy("host", "task_id", "cleaned_at").agg(
        F.min(F.struct("back_at", "back_source", "back_line")).alias("b"),
        F.max(F.when(F.col("full_at") > F.col("cleaned_at"), 1).otherwise(0)).alias("full")), 200)}
    findings = []
    for host in hosts:
        mine = [r for r in found if r.host == host]
        tasks = sorted({r.task_id for r in mine})
        run = runs.get(mine[0].run_id)
        version = (run.version or run.version_range) if run else None
        state_evidence, log_refs_, proven = [], [], []
        for r in mine:
            for f in (f for f in files if f.host == host and f.task_id == r.task_id):
                ckpt = checkpoints.get((host, r.task_id))
                recreated = f.oldest is not None and f.oldest > r.cleaned_at and ckpt is not None
                bare = ckpt is not None and not f.store
                if recreated or bare:
                    proven.append(r.task_id)
                    state_evidence.append(Evidence(
                        f.source, None,
                        f"task directory {r.task_id}: " + (f"every file written after the cleaner deleted it "
                                                           f"({fmt_ts(f.oldest)} .. {fmt_ts(f.newest)})"
                                                           if recreated else "no RocksDB files")
                        + f", .checkpoint {ckpt.topic}-{ckpt.partition} offset {ckpt.offset}", "state", f.oldest))
            back = backs.get((host, r.task_id))
            if back is not None and not back.full and _from_beginning_is_logged(version):
                proven.append(r.task_id)
                log_refs_.append((back.b.back_source, back.b.back_line))
            log_refs_.append((r.source, r.line_no))
        proven_tasks = sorted(set(proven))
        findings.append(Finding(
            detector=ID, severity="critical" if proven_tasks else "info",
            confidence="likely" if proven_tasks else "possible",
            title=(f"{host}: standby task(s) {', '.join(proven_tasks or tasks)} "
                   + ("came back on a directory the cleaner had deleted, with a checkpoint again (KAFKA-8187)"
                      if proven_tasks else "had their directory deleted by the cleaner; KAFKA-8187 cannot be checked at INFO")),
            explanation=(f"{host} runs {version or 'a version'} (affected by KAFKA-8187) with standby tasks; the cleaner "
                         f"deleted the directory of task(s) {', '.join(tasks)} while this host held them as standbys. "
                         f"On 2.0-2.2 the standby's failed lock and its write-back of the old checkpoint are TRACE and "
                         f"the restore start DEBUG, so INFO logs cannot show the chain. "
                         + ("What they and the state capture do show: the task directory exists again with a "
                            ".checkpoint, and/or the task started again on this host without the 'from beginning' "
                            "restore a missing checkpoint prints: a checkpoint was written back without the store "
                            "data, so everything before its offset is missing." if proven_tasks else
                            "Collect the state directory and the TRACE/DEBUG lines below to decide.")),
            hosts=[host], tasks=proven_tasks or tasks, ts=mine[0].cleaned_at,
            evidence=merge_evidence(evidence_lines(None, log_refs_), state_evidence),
            missing_evidence=missing_steps(ID, MISSING_TRACE, *([] if state_evidence else [MISSING_CAPTURE])),
            impact=Impact(summary=("the stores of these tasks miss every changelog record before the checkpointed "
                                   "offset" if proven_tasks else "unknown without TRACE logs or a state capture"),
                          figures={"tasks": len(proven_tasks or tasks)},
                          method="capture facts and the absence of a full restore" if proven_tasks else
                                 "none: evidence missing"),
            known_bugs=known_bug_sentences(ID, [version]),
        ))
    return findings


def _from_beginning_is_logged(version: str | None) -> bool:
    """2.1+ prints 'Restoring task ...'s state store ... from beginning of the changelog' at INFO when no
    checkpoint exists (at-least-once); 2.0 does not, so its silence proves nothing."""
    from toolkit.detectors.common import version_args
    from toolkit.knowledge.versions import compare_versions

    v, span = version_args(version, None)
    low = v or (span[0] if span else None)
    try:
        return bool(low) and compare_versions(low, "2.1") >= 0
    except ValueError:
        return False
