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

from dataclasses import dataclass, replace
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from toolkit.detectors.base import Evidence, Finding, Impact, detector
from toolkit.detectors.common import (
    EOS_RUN_SQL,
    NOT_NIFI_SQL,
    Bounded,
    all_rows,
    bug_status,
    captured_checkpoint_rows,
    default_state_updater,
    evidence_lines,
    fmt_int,
    fmt_ts,
    in_spark_order,
    is_eos_guarantee,
    known_bug_sentences,
    merge_evidence,
    missing_steps,
    run_rows,
    state_updater_of_runs,
    unix_millis,
)
from toolkit.detectors.preconditions import all_of, rows_in
from toolkit.sqltext import sql_in

ID = "eos-stale-restore-checkpoint"
#: A restore-completion checkpoint is written in the same millisecond as the completion line;
#: allow for clock and logging jitter.
WRITE_NEAR_RESTORE_S = 5
#: Captured mtimes often have second (or, via ``tar tv``, minute) resolution.
MTIME_NEAR_RESTORE_S = 90
#: Partitions the findings list at most (``truncation["partitions"]`` says how many there were).
MAX_PARTITIONS = 200

MISSING_CAPTURE = ("state capture (.checkpoint mtime and content) of the crashed host taken while it was RUNNING: "
                   "stream-incident capture-state STATE_DIR --out state-HOST.tar.gz (see playbooks/capturing-state.md)")
MISSING_VERSION = ("the Kafka Streams version of the crashed run (the 'Kafka version: ...' banner at start-up, or the "
                   "application's dependency list): KAFKA-20685 needs 3.8-4.2, or 3.4-3.7 with the state updater on")
MISSING_DEBUG = ("DEBUG ProcessorStateManager (Writing checkpoint at restoration completion): set "
                 "org.apache.kafka.streams.processor.internals.ProcessorStateManager=DEBUG "
                 "(see playbooks/collecting-evidence.md)")


def _crash_pairs(tl) -> list[tuple]:
    """(crashed run, next run on the host) for every exactly-once Kafka run that ended in a crash."""
    # A run's product may come from a Kafka client line first ("kafka-client"): exclude NiFi only.
    runs = [r for r in run_rows(tl) if r.product != "nifi" and r.host is not None and r.run_no is not None]
    by_number = {(r.host, r.run_no): r for r in runs}
    return [(r, by_number[(r.host, r.run_no + 1)]) for r in runs
            if r.end_kind == "crash" and is_eos_guarantee(r.guarantee) and (r.host, r.run_no + 1) in by_number]


def _first_reads(tl, next_ids) -> list:
    """Checkpoint reads logged by the next runs: the first read of each task, changelog partition and offset
    (reads of one offset prove the same), with the earliest time of those reads as ``first_ts``."""
    key = ["host", "run_id", "task_id", "topic", "partition", "offset"]
    first = Window.partitionBy(*key).orderBy("ts", "source", "line_no")
    reads = tl.checkpoints.where(f"origin = 'log' AND kind = 'read' AND offset >= 0 AND task_id IS NOT NULL "
                                 f"AND {sql_in('run_id', next_ids)}").select(*key, "ts", "source", "line_no")
    return all_rows(reads.select("*", F.min("ts").over(Window.partitionBy(*key)).alias("first_ts"),
                                 F.row_number().over(first).alias("_n")).where("_n = 1").drop("_n"),
                    "checkpoint reads of the restarts")


def _writes_at_restore_end(tl, crashed_ids) -> list:
    """Checkpoint writes logged by the crashed runs within ``WRITE_NEAR_RESTORE_S`` of a completed restoration
    of the same changelog partition: per restoration and offset the first such write (the only writes that can
    prove a restore-time checkpoint, however many routine writes the run logged)."""
    partition = ["host", "run_id", "topic", "partition"]
    writes = tl.checkpoints.where(f"origin = 'log' AND kind = 'written' AND offset IS NOT NULL "
                                  f"AND {sql_in('run_id', crashed_ids)}").select(
        *partition, "offset", "ts", "source", "line_no")
    ends = tl.restorations.where(f"completed AND `end` IS NOT NULL AND {sql_in('run_id', crashed_ids)}").select(
        *partition, F.unix_millis("end").alias("_end_ms"), F.col("source").alias("_end_source"),
        F.col("line_no").alias("_end_line"))
    near = writes.join(ends, partition).where(
        F.abs(F.unix_millis("ts") - F.col("_end_ms")) <= WRITE_NEAR_RESTORE_S * 1000)
    first = Window.partitionBy(*partition, "offset", "_end_ms", "_end_source", "_end_line").orderBy(
        "ts", "source", "line_no")
    return all_rows(near.withColumn("_n", F.row_number().over(first)).where("_n = 1").select(
        *partition, "offset", "ts", "source", "line_no").distinct(), "checkpoint writes at restoration ends")


def _wiped_tasks(tl, next_ids) -> set:
    """(host, run, task) the next runs wiped or found corrupted (a wipe is the correct EOS restart)."""
    runs = sql_in("run_id", next_ids)
    wiped = tl.wipes.where(f"task_id IS NOT NULL AND {runs}").select("host", "run_id", "task_id")
    corrupted = tl.events.where(f"event = 'TASK_CORRUPTED' AND {runs}").selectExpr(
        "host", "run_id", "explode(coalesce(task_ids, array(task_id))) AS task_id").where("task_id IS NOT NULL")
    return {(r.host, r.run_id, r.task_id) for r in all_rows(wiped.unionByName(corrupted), "wiped tasks")}


def _last_phases(tl, crashed_ids, task_ids) -> dict:
    """(host, run, task) -> the task's last lifecycle phase in the crashed run (``phase``, ``role``)."""
    # Only the last phase of each task, in the order of (start, line_no, phase, role), nulls first.
    latest = Window.partitionBy("host", "run_id", "task_id").orderBy(
        *[F.col(c).desc_nulls_last() for c in ("start", "line_no", "phase", "role")])
    phases = all_rows(tl.task_lifecycles.where(
        f"phase <> 'assigned' AND {sql_in('run_id', crashed_ids)} AND {sql_in('task_id', task_ids)}").select(
        "host", "run_id", "task_id", "start", "line_no", "phase", "role").withColumn(
        "_n", F.row_number().over(latest)).where("_n = 1").drop("_n"), "task phases of crashed runs")
    return {(r.host, r.run_id, r.task_id): r for r in phases}


def _running_at_crash(candidate, last_phases: dict, completed: set) -> bool:
    """Whether the candidate's task was RUNNING as an active task when its run crashed.

    The task's last phase in the crashed run (lifecycle lines, 2.6+ at INFO) must be ``running`` as an
    active task. A task with no lifecycle line at all in that run counts when its changelog partition
    completed an active restoration there (``Finished restoring changelog`` is printed for active
    tasks only).
    """
    crashed, _, read = candidate
    last = last_phases.get((read.host, crashed.run_id, read.task_id))
    if last is not None:
        return last.phase == "running" and last.role == "active"
    return (read.host, crashed.run_id, read.topic, read.partition) in completed


def _within_ms(a, b, limit_ms: int) -> bool:
    return a is not None and b is not None and abs(unix_millis(a) - unix_millis(b)) <= limit_ms


@dataclass
class _Hit:
    """A changelog partition whose restart trusted a checkpoint after the crash, with its proof and replay."""

    host: str
    crashed_run: str
    next_run: str
    task_id: str
    topic: str
    partition: int
    read_offset: int
    read_ts: Any
    read_source: str
    read_line: int
    crashed_end: Any
    crashed_end_source: str
    crashed_end_line: int
    version: str | None
    version_range: str | None
    commit_interval_ms: int | None
    restored_at: Any = None
    restore_end_offset: int | None = None
    restore_source: str | None = None
    restore_line: int | None = None
    write_ok: bool = False
    capture_ok: bool = False
    #: the write at restoration end (``write_source``, ``write_line``, ``written_ts``)
    w: Any = None
    #: the captured file (``capture_source``, ``capture_file``, ``captured_offset``, ``captured_mtime``, ``capture_time``)
    c: Any = None
    replayed: int | None = None
    next_end_offset: int | None = None
    replay_source: str | None = None
    replay_line: int | None = None
    updater: bool | None = None


def _with_proof(candidate, restores: list, writes: list, files: list) -> _Hit:
    """The candidate with the best proof of when its checkpoint was written: a write of the offset it
    read within a few seconds of the partition's restoration end in the crashed run, or a capture taken
    during that run whose file holds that offset with an mtime at restoration end."""
    crashed, _, read = candidate
    hit = _Hit(read.host, crashed.run_id, candidate[1].run_id, read.task_id, read.topic, read.partition, read.offset,
               read.first_ts, read.source, read.line_no, crashed.end, crashed.end_source, crashed.end_line_no,
               crashed.version, crashed.version_range, crashed.commit_interval_ms)
    captured_from = crashed.start
    captured_until = crashed.end + timedelta(minutes=10) if crashed.end is not None else None
    for restore in restores or [None]:
        restored_at = restore.end if restore is not None else None
        if restore is not None:
            hit.restored_at = _max(hit.restored_at, restore.end)
            hit.restore_end_offset = _max(hit.restore_end_offset, restore.end_offset)
            hit.restore_source = hit.restore_source if hit.restore_source is not None else restore.source
            hit.restore_line = hit.restore_line if hit.restore_line is not None else restore.line_no
        for write in writes:
            if _within_ms(write.ts, restored_at, WRITE_NEAR_RESTORE_S * 1000):
                hit.write_ok = True
                hit.w = hit.w or SimpleNamespace(write_source=write.source, write_line=write.line_no, written_ts=write.ts)
        for file in files:
            during = (file.capture_time is not None and captured_from is not None and captured_until is not None
                      and captured_from <= file.capture_time <= captured_until)
            if during and _within_ms(file.file_mtime, restored_at, MTIME_NEAR_RESTORE_S * 1000):
                hit.capture_ok = True
                hit.c = hit.c or SimpleNamespace(capture_source=file.source, capture_file=file.file,
                                                 captured_offset=read.offset, captured_mtime=file.file_mtime,
                                                 capture_time=file.capture_time)
    return hit


def _max(a, b):
    return b if a is None else a if b is None else max(a, b)


def _min(a, b):
    return b if a is None else a if b is None else min(a, b)


@detector(id=ID, title="EOS restart trusted a restore-time checkpoint (KAFKA-20685)", severity="critical",
          needs=("process_runs", "checkpoints", "restorations", "wipes", "events", "state", "task_lifecycles", "config"),
          role="root-cause",
          # an EOS run that crashed, and a checkpoint read from the logs (by the next run)
          requires=all_of(rows_in("process_runs", f"end_kind = 'crash' AND {EOS_RUN_SQL} AND {NOT_NIFI_SQL}"),
                          rows_in("checkpoints", "kind = 'read' AND origin = 'log' AND offset >= 0 "
                                                 "AND task_id IS NOT NULL")))
def eos_stale_restore_checkpoint(tl) -> list[Finding]:
    """KAFKA-20685: a restore-time checkpoint survives RUNNING; a crash then skips the EOS wipe."""
    pairs = _crash_pairs(tl)
    if not pairs:
        return []
    crashed_ids = sorted({c.run_id for c, _ in pairs})
    next_ids = sorted({n.run_id for _, n in pairs})
    pair_of_next = {(n.host, n.run_id): (c, n) for c, n in pairs}
    reads = _first_reads(tl, next_ids)
    # Checkpoint reads right after an EOS crash, without a wipe: one candidate per host/task/partition read.
    wiped = _wiped_tasks(tl, next_ids)
    candidates = [(*pair_of_next[(r.host, r.run_id)], r) for r in in_spark_order(
        (r for r in reads if (r.host, r.run_id) in pair_of_next),
        key=lambda r: (r.ts, r.source, r.line_no)) if (r.host, r.run_id, r.task_id) not in wiped]
    if not candidates:
        return []
    restorations = all_rows(tl.restorations.where(sql_in("run_id", crashed_ids + next_ids)).select(
        "host", "run_id", "topic", "partition", "completed", "end", "end_offset", "records", "source", "line_no"),
        "restorations of crashed runs and their restarts")
    restorations = in_spark_order(restorations, key=lambda r: (r.end, r.source, r.line_no))
    completed: dict[tuple, list] = {}
    for r in restorations:
        if r.completed:
            completed.setdefault((r.host, r.run_id, r.topic, r.partition), []).append(r)
    last_phases = _last_phases(tl, crashed_ids, sorted({read.task_id for _, _, read in candidates}))
    completed_partitions = set(completed)
    stale = [c for c in candidates if _running_at_crash(c, last_phases, completed_partitions)]
    if not stale:
        return []
    # Only a write (or captured file) holding the very offset the restart read can be its origin.
    writes: dict[tuple, list] = {}
    for r in in_spark_order(_writes_at_restore_end(tl, crashed_ids), key=lambda r: (r.ts, r.source, r.line_no)):
        writes.setdefault((r.host, r.run_id, r.topic, r.partition, r.offset), []).append(r)
    files: dict[tuple, list] = {}
    for f in in_spark_order(captured_checkpoint_rows(tl), key=lambda f: (f.source, f.file, f.capture_time)):
        files.setdefault((f.host, f.topic, f.partition, f.offset), []).append(f)
    # Keep the best proof per partition.
    found: dict[tuple, _Hit] = {}
    for candidate in stale:
        crashed, following, read = candidate
        key = (read.host, crashed.run_id, following.run_id, read.task_id, read.topic, read.partition)
        hit = _with_proof(candidate, completed.get((read.host, crashed.run_id, read.topic, read.partition), []),
                          writes.get((read.host, crashed.run_id, read.topic, read.partition, read.offset), []),
                          files.get((read.host, read.topic, read.partition, read.offset), []))
        found[key] = _merged(found[key], hit) if key in found else hit
    # The tail replayed after the restart: the next run's restorations of the same partition.
    replays: dict[tuple, list] = {}
    for r in restorations:
        replays.setdefault((r.host, r.run_id, r.topic, r.partition), []).append(r)
    updater = state_updater_of_runs(tl, crashed_ids)
    hits = []
    for hit in found.values():
        hit.updater = updater.get(hit.crashed_run)
        for replay in replays.get((hit.host, hit.next_run, hit.topic, hit.partition)) or [None]:
            hits.append(hit if replay is None else replace(
                hit, replayed=replay.records, next_end_offset=replay.end_offset, replay_source=replay.source,
                replay_line=replay.line_no))
    hits = in_spark_order(hits, key=lambda h: (h.host, h.task_id, h.topic, h.partition))
    got = Bounded(hits[:MAX_PARTITIONS], len(hits))
    hits = [h for h in got.rows if _version_allows(h) is not False]
    if not hits:
        return []
    truncation = got.record("partitions")
    return [_finding([h for h in hits if h.host == host], truncation) for host in sorted({h.host for h in hits})]


def _merged(first: _Hit, other: _Hit) -> _Hit:
    """Two reads of one partition in one restart: the first read's facts, the earliest read time, the best proof."""
    return replace(
        first, read_ts=_min(first.read_ts, other.read_ts), restored_at=_max(first.restored_at, other.restored_at),
        restore_end_offset=_max(first.restore_end_offset, other.restore_end_offset),
        restore_source=first.restore_source if first.restore_source is not None else other.restore_source,
        restore_line=first.restore_line if first.restore_line is not None else other.restore_line,
        write_ok=first.write_ok or other.write_ok, capture_ok=first.capture_ok or other.capture_ok,
        w=first.w or other.w, c=first.c or other.c)


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
