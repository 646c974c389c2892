"""KAFKA-20685: a restore-time checkpoint survives RUNNING under EOS; a crash then skips the wipe.

From 3.8 (state updater on by default) to 4.2, ``DefaultStateUpdater`` writes ``.checkpoint`` when
a task completes restoration, under exactly-once too, and nothing deletes it when the task starts
RUNNING. After a crash the next start trusts that stale file ("initialized from checkpoint with
offset ...") instead of treating the store as corrupted and wiping it, and replays the changelog
tail on top of a store that may hold writes of aborted transactions.

Decision, per host and task changelog partition:

1. a run under ``exactly_once*`` ended in a crash (``process_runs.end_kind = 'crash'``) on a version
   where the state updater writes that checkpoint: KAFKA-20685 affects it, or (3.4-3.7) the run
   shows the state updater switched on (``__state.updater.enabled__``); versions with the fix, before
   3.4, 4.3+ and 3.4-3.7 with the updater off never match;
2. in the crashed run the task was an *active* task that had completed restoration and was RUNNING
   when the log stopped: its last lifecycle phase is ``running`` as an active task (no suspend,
   close, revoke or migration after it). Standby tasks (which checkpoint legitimately under EOS), a
   crash during restoration and a task closed or suspended cleanly before the crash do not match;
3. the next run on that host read a checkpoint for the partition (``checkpoints.kind = 'read'``)
   and did not wipe the task (no ``wipes`` row / ``TASK_CORRUPTED`` for it in that run);
4. that offset was written at restoration completion in the crashed run: a ``written`` line within
   a few seconds of the partition's ``Finished restoring``/``completed restoration``, or a state
   capture taken during the crashed run whose ``.checkpoint`` holds that offset with an mtime at
   restoration end (it never moved during RUNNING).

1-3 give ``likely`` (with the evidence to collect); 1-4 give ``confirmed``. A version that cannot be
told at all keeps ``likely`` and says so. A clean close writes the checkpoint legitimately, so a
run that ended ``clean`` never matches.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from toolkit.detectors.base import Evidence, Finding, Impact, detector
from toolkit.detectors.preconditions import all_of, rows_in
from toolkit.detectors.common import (
    EOS_RUN_SQL,
    NOT_NIFI_SQL,
    bounded,
    bug_status,
    captured_checkpoints,
    default_state_updater,
    evidence_lines,
    fmt_int,
    fmt_ts,
    is_eos,
    known_bug_sentences,
    merge_evidence,
    missing_steps,
    state_updater_by_run,
)

ID = "eos-stale-restore-checkpoint"
#: A restore-completion checkpoint is written in the same millisecond as the completion line;
#: allow for clock and logging jitter.
WRITE_NEAR_RESTORE_S = 5
#: Captured mtimes often have second (or, via ``tar tv``, minute) resolution.
MTIME_NEAR_RESTORE_S = 90

MISSING_CAPTURE = ("state capture (.checkpoint mtime and content) of the crashed host taken while it was RUNNING: "
                   "stream-incident capture-state STATE_DIR --out state-HOST.tar.gz (see playbooks/capturing-state.md)")
MISSING_VERSION = ("the Kafka Streams version of the crashed run (the 'Kafka version: ...' banner at start-up, or the "
                   "application's dependency list): KAFKA-20685 needs 3.8-4.2, or 3.4-3.7 with the state updater on")
MISSING_DEBUG = ("DEBUG ProcessorStateManager (Writing checkpoint at restoration completion): set "
                 "org.apache.kafka.streams.processor.internals.ProcessorStateManager=DEBUG "
                 "(see playbooks/collecting-evidence.md)")


def _stale_reads(tl):
    """Checkpoint reads right after an EOS crash, without a wipe: one row per host/task/partition."""
    # A run's product may come from a Kafka client line first ("kafka-client"): exclude NiFi only.
    runs = tl.process_runs.where(F.col("product").isNull() | (F.col("product") != "nifi"))
    crashed = runs.where(is_eos() & (F.col("end_kind") == "crash")).select(
        "host", F.col("run_id").alias("crashed_run"), F.col("run_no").alias("crashed_no"),
        F.col("start").alias("crashed_start"), F.col("end").alias("crashed_end"),
        F.col("end_source").alias("crashed_end_source"), F.col("end_line_no").alias("crashed_end_line"),
        F.col("version").alias("crashed_version"), F.col("version_range").alias("crashed_range"),
        F.col("commit_interval_ms"))
    following = runs.select("host", F.col("run_id").alias("next_run"), F.col("run_no").alias("next_no"),
                            F.col("start").alias("next_start"))
    pairs = crashed.join(following, "host").where(F.col("next_no") == F.col("crashed_no") + 1)
    reads = tl.checkpoints.where((F.col("kind") == "read") & (F.col("origin") == "log")
                                 & (F.col("offset") >= 0) & F.col("task_id").isNotNull()).select(
        "host", F.col("run_id").alias("next_run"), "task_id", "store", "topic", "partition",
        F.col("offset").alias("read_offset"), F.col("ts").alias("read_ts"),
        F.col("source").alias("read_source"), F.col("line_no").alias("read_line"))
    candidates = pairs.join(reads, ["host", "next_run"])
    wiped = tl.wipes.where(F.col("task_id").isNotNull()).select(
        "host", F.col("run_id").alias("next_run"), "task_id").distinct()
    corrupted = tl.events.where(F.col("event") == "TASK_CORRUPTED").select(
        "host", F.col("run_id").alias("next_run"), F.explode(F.coalesce(
            F.col("task_ids"), F.array("task_id"))).alias("task_id")).where(F.col("task_id").isNotNull())
    unwiped = candidates.join(wiped.unionByName(corrupted).distinct(), ["host", "next_run", "task_id"], "left_anti")
    return _running_at_crash(tl, unwiped)


def _running_at_crash(tl, candidates):
    """The candidates whose task was RUNNING as an active task when its run crashed.

    The task's last phase in the crashed run (lifecycle lines, 2.6+ at INFO) must be ``running`` as an
    active task. A task with no lifecycle line at all in that run counts when its changelog partition
    completed an active restoration there (``Finished restoring changelog`` is printed for active
    tasks only).
    """
    keys = ["host", "crashed_run", "task_id"]
    phases = tl.task_lifecycles.where(F.col("phase") != "assigned").select(
        "host", F.col("run_id").alias("crashed_run"), "task_id", "role", "phase", "start", "line_no")
    last = phases.groupBy(*keys).agg(F.max(F.struct("start", "line_no", "phase", "role")).alias("_last"))
    running = last.where((F.col("_last.phase") == "running") & (F.col("_last.role") == "active")).select(*keys)
    completed = tl.restorations.where(F.col("completed")).select(
        "host", F.col("run_id").alias("crashed_run"), "topic", "partition").distinct()
    with_phases = candidates.join(running, keys, "left_semi")
    without = candidates.join(last.select(*keys), keys, "left_anti").join(
        completed, ["host", "crashed_run", "topic", "partition"], "left_semi")
    return with_phases.unionByName(without)


def _restore_end_in_crashed_run(tl):
    """When each partition finished restoring in each run (per-partition or per-task completion)."""
    per_partition = tl.restorations.where(F.col("completed")).select(
        "host", F.col("run_id").alias("crashed_run"), "topic", "partition",
        F.col("end").alias("restored_at"), F.col("end_offset").alias("restore_end_offset"),
        F.col("source").alias("restore_source"), F.col("line_no").alias("restore_line"))
    return per_partition


def _log_writes(tl):
    return tl.checkpoints.where((F.col("kind") == "written") & (F.col("origin") == "log")).select(
        "host", F.col("run_id").alias("crashed_run"), "topic", "partition",
        F.col("offset").alias("written_offset"), F.col("ts").alias("written_ts"),
        F.col("source").alias("write_source"), F.col("line_no").alias("write_line"))


def _captured_files(tl):
    return captured_checkpoints(tl).select(
        "host", "topic", "partition", F.col("offset").alias("captured_offset"),
        F.col("file_mtime").alias("captured_mtime"), F.col("capture_time"),
        F.col("source").alias("capture_source"), F.col("file").alias("capture_file"))


@detector(id=ID, title="EOS restart trusted a restore-time checkpoint (KAFKA-20685)", severity="critical",
          needs=("process_runs", "checkpoints", "restorations", "wipes", "events", "state", "task_lifecycles", "config"),
          role="root-cause",
          # an EOS run that crashed, and a checkpoint read from the logs (by the next run)
          requires=all_of(rows_in("process_runs", f"end_kind = 'crash' AND {EOS_RUN_SQL} AND {NOT_NIFI_SQL}"),
                          rows_in("checkpoints", "kind = 'read' AND origin = 'log' AND offset >= 0 "
                                                 "AND task_id IS NOT NULL")))
def eos_stale_restore_checkpoint(tl) -> list[Finding]:
    """KAFKA-20685: a restore-time checkpoint survives RUNNING; a crash then skips the EOS wipe."""
    stale = _stale_reads(tl)
    restored = _restore_end_in_crashed_run(tl)
    with_restore = stale.join(restored, ["host", "crashed_run", "topic", "partition"], "left")
    # Only a write (or captured file) holding the very offset the restart read can be its origin.
    writes = _log_writes(tl).withColumnRenamed("written_offset", "read_offset")
    near_write = F.abs(F.unix_millis("written_ts") - F.unix_millis("restored_at")) <= WRITE_NEAR_RESTORE_S * 1000
    with_write = with_restore.join(writes, ["host", "crashed_run", "topic", "partition", "read_offset"], "left")
    files = _captured_files(tl).withColumnRenamed("captured_offset", "read_offset")
    capture_ok = (F.col("capture_time").between(F.col("crashed_start"), F.col("crashed_end") + F.expr("INTERVAL 10 MINUTES"))
                  & (F.abs(F.unix_millis("captured_mtime") - F.unix_millis("restored_at")) <= MTIME_NEAR_RESTORE_S * 1000))
    joined = with_write.join(files, ["host", "topic", "partition", "read_offset"], "left").withColumn(
        "_capture_ok", F.coalesce(capture_ok, F.lit(False))).withColumn(
        "_write_ok", F.coalesce(near_write, F.lit(False)))
    # Keep the best proof per partition.
    found = joined.groupBy("host", "crashed_run", "next_run", "task_id", "topic", "partition").agg(
        F.first("read_offset").alias("read_offset"), F.min("read_ts").alias("read_ts"),
        F.first("read_source").alias("read_source"), F.first("read_line").alias("read_line"),
        F.first("crashed_end").alias("crashed_end"), F.first("crashed_end_source").alias("crashed_end_source"),
        F.first("crashed_end_line").alias("crashed_end_line"), F.first("crashed_version").alias("version"),
        F.first("crashed_range").alias("version_range"),
        F.first("commit_interval_ms").alias("commit_interval_ms"),
        F.max("restored_at").alias("restored_at"), F.max("restore_end_offset").alias("restore_end_offset"),
        F.first("restore_source", ignorenulls=True).alias("restore_source"),
        F.first("restore_line", ignorenulls=True).alias("restore_line"),
        F.max("_write_ok").alias("write_ok"), F.max("_capture_ok").alias("capture_ok"),
        F.first(F.when(F.col("_write_ok"), F.struct("write_source", "write_line", "written_ts")), ignorenulls=True).alias("w"),
        F.first(F.when(F.col("_capture_ok"), F.struct("capture_source", "capture_file", F.col("read_offset").alias("captured_offset"),
                                                       "captured_mtime", "capture_time")), ignorenulls=True).alias("c"),
    )
    # The tail replayed after the restart: the next run's restoration of the same partition.
    replay = tl.restorations.select("host", F.col("run_id").alias("next_run"), "topic", "partition",
                                    F.col("records").alias("replayed"), F.col("end_offset").alias("next_end_offset"),
                                    F.col("source").alias("replay_source"), F.col("line_no").alias("replay_line"))
    found = found.join(replay, ["host", "next_run", "topic", "partition"], "left")
    updater = state_updater_by_run(tl).withColumnRenamed("run_id", "crashed_run")
    found = found.join(updater, "crashed_run", "left")
    got = bounded(found, 200, order=["host", "task_id", "topic", "partition"])
    hits = [h for h in got.rows if _version_allows(h) is not False]
    if not hits:
        return []
    truncation = got.record("partitions")
    return [_finding([h for h in hits if h.host == host], truncation) for host in sorted({h.host for h in hits})]


def _version_allows(hit) -> bool | None:
    """True when the crashed run's version (and state-updater setting) has the bug, False when it
    cannot have it, None when the version is unknown."""
    status = bug_status("KAFKA-20685", hit.version, hit.version_range)
    if status == "affected":
        return hit.updater is not False  # 3.8-4.2 with the updater switched off restore on the StreamThread
    if status in ("fixed", "not_affected"):
        return False
    if not (hit.version or hit.version_range):
        return None
    updater = hit.updater if hit.updater is not None else default_state_updater(hit.version, hit.version_range)
    # 3.4-3.7: only with the state updater switched on; a range straddling a boundary: the updater decides.
    return True if updater else (None if updater is None else False)


def _finding(hits, truncation) -> Finding:
    host = hits[0].host
    version_known = all(_version_allows(h) for h in hits)
    confirmed = version_known and all(h.write_ok or h.capture_ok for h in hits)
    tasks = sorted({h.task_id for h in hits})
    refs = []
    state_evidence: list[Evidence] = []
    per_partition = []
    replayed_total = 0
    for h in hits:
        refs += [(h.crashed_end_source, h.crashed_end_line), (h.read_source, h.read_line),
                 (h.restore_source, h.restore_line), (h.replay_source, h.replay_line)]
        if h.w is not None:
            refs.append((h.w.write_source, h.w.write_line))
        if h.c is not None:
            state_evidence.append(Evidence(
                h.c.capture_source, None,
                f"{h.c.capture_file}: {h.topic}-{h.partition} offset {h.c.captured_offset}, mtime "
                f"{fmt_ts(h.c.captured_mtime)}, captured {fmt_ts(h.c.capture_time)} while the run was RUNNING",
                "state", h.c.captured_mtime))
        replayed = h.replayed if h.replayed is not None else (
            h.next_end_offset - h.read_offset - 1 if h.next_end_offset is not None else None)
        replayed_total += replayed or 0
        per_partition.append({"task": h.task_id, "changelog": f"{h.topic}-{h.partition}",
                              "checkpoint_offset": h.read_offset, "replayed_records": replayed,
                              "end_offset_at_restart": h.next_end_offset})
    evidence = merge_evidence(evidence_lines(None, refs), state_evidence)
    missing: list[str] = []
    if not confirmed:
        gaps = ([] if version_known else [MISSING_VERSION]) + (
            [] if all(h.write_ok or h.capture_ok for h in hits) else [MISSING_CAPTURE, MISSING_DEBUG])
        missing = missing_steps(ID, *gaps)
    first = min((h.restored_at or h.crashed_end for h in hits), default=None)
    crash_at = hits[0].crashed_end
    interval = hits[0].commit_interval_ms
    proof = ("a Writing checkpoint line at restoration completion" if any(h.write_ok for h in hits) else
             "a state capture whose .checkpoint mtime equals restoration end" if confirmed else
             "no direct proof of when the checkpoint was written (INFO logs, no capture)")
    explanation = (
        f"On {host} an exactly-once run crashed (last line {fmt_ts(crash_at)}, no clean shutdown). The next start "
        f"initialised {len(hits)} store changelog partition(s) of task(s) {', '.join(tasks)} from an existing "
        f".checkpoint instead of finding none and wiping the task (no TaskCorruptedException, no wipe). Under EOS "
        f"a checkpoint must not exist while RUNNING; the one trusted here matches the offsets written when "
        f"restoration completed in the crashed run ({proof}). This is KAFKA-20685: the state updater writes the "
        f"checkpoint at restore completion and nothing removes it, so the crash skipped the EOS wipe and the "
        f"changelog tail was replayed on top of a store that may contain uncommitted (aborted) writes.")
    impact = Impact(
        summary=(f"{fmt_int(replayed_total)} changelog records replayed on top of possibly dirty stores "
                 f"({len(hits)} partition(s)); writes of the transaction(s) open at the crash "
                 f"(up to commit.interval.ms = {fmt_int(interval)} ms of processing) may have survived in RocksDB "
                 f"and are not undone by the replay; read-before-write logic (dedup, aggregates) may have "
                 f"skipped or double-counted records."),
        figures={"replayed_records": replayed_total, "partitions": per_partition,
                 "commit_interval_ms": interval},
        method=("replayed records = records of the next run's 'Finished restoring changelog' line per partition "
                "(else end offset at restart - checkpoint offset - 1); uncommitted writes cannot be counted from "
                "logs: bounded by one commit interval of processing before the crash."),
    )
    return Finding(
        detector=ID, severity="critical", confidence="confirmed" if confirmed else "likely",
        title=f"{host}: EOS restart trusted a restore-time checkpoint for {', '.join(tasks)} after a crash (KAFKA-20685)",
        explanation=explanation, hosts=[host], tasks=tasks, ts=first, evidence=evidence,
        missing_evidence=missing, impact=impact, truncation=truncation,
        known_bugs=known_bug_sentences(ID, [h.version or h.version_range for h in hits][:1]),
    )
