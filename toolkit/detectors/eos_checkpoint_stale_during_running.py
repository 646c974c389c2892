"""A ``.checkpoint`` that stays on disk, unchanged, while an exactly-once task is RUNNING.

Under exactly-once the checkpoint is deleted when a task initialises and written again only when
it closes or suspends, so no ``.checkpoint`` should exist during RUNNING. From 3.8 to 4.2 the state
updater writes one when restoration completes and leaves it there (KAFKA-20685); before 2.6.2 a
resumed task kept its old one (KAFKA-10362). Either way an unclean stop is then not detected.
Decision per host/task: a state capture taken while an EOS run was going shows a checkpoint whose
mtime is older than the capture by more than ``STALE_AFTER_S`` (``confirmed``), or, on a host without
such a capture, a DEBUG
``Writing checkpoint`` line in an EOS run followed by more than ``STALE_AFTER_S`` of RUNNING with no
further write or delete for the task (``likely``). Standby tasks are left out: they apply only committed
changelog records and keep checkpointing under exactly-once, so their ``.checkpoint`` is meant to be there; so
are active tasks suspended or closed at the capture, or, for a logged write, at the end of the run (a revocation
writes the checkpoint, as it should; only a task that resumes processing with it on disk is at fault). Task phases
count only within the run judged.

Up to 2.5 a task reads (and, under exactly-once, deletes) its ``.checkpoint`` when it is created, before it
takes the directory lock. When a task moves between two threads of one JVM, the new owner can read before
the old owner's close writes the file: it logs ``No checkpoint found ... with EOS turned on`` a moment after
the file's mtime and restores from the changelog start, and the file stays on disk, unread, while the new
owner runs. That is the KAFKA-7672 hand-over, not a checkpoint written during RUNNING (KAFKA-20685) nor a
resumed task keeping its own (KAFKA-10362): reported as ``info``, with the crash hazard it still carries.
"""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

from pyspark.sql import Window
from pyspark.sql import functions as F

from toolkit import utc
from toolkit.detectors.base import Evidence, Finding, Impact, detector
from toolkit.detectors.common import (
    EOS_RUN_SQL,
    all_rows,
    captured_checkpoint_rows,
    evidence_lines,
    fmt_ts,
    in_spark_order,
    is_eos_guarantee,
    known_bug_sentences,
    may_predate,
    missing_steps,
    run_rows,
    unix_seconds,
)
from toolkit.detectors.preconditions import all_of, any_of, rows_in
from toolkit.sqltext import sql_in

ID = "eos-checkpoint-stale-during-running"
STALE_AFTER_S = 600
#: A 'No checkpoint found' line this close to a frozen file's mtime names the owner that read before it was written.
HANDOVER_WITHIN_S = 120
#: Frozen checkpoints (captured, and logged) a finding rests on at most.
MAX_ROWS = 30
#: A capture of ``state.dir`` taken up to this long after a run's last line still shows that run's files.
CAPTURE_AFTER_RUN = timedelta(minutes=10)


#: Lifecycle phases in which an active task is not processing: its checkpoint was written, as it should be, when
#: it was suspended or closed (a revocation, a move to another host).
NOT_PROCESSING = ("suspended", "closed-clean", "closed-dirty", "recycled", "migrated")


def _not_processing(tl, asked: set[tuple]) -> set[tuple]:
    """The (host, run, task, time) keys of ``asked`` whose last lifecycle in that run (an earlier run's last phase says
    nothing of this one) that began at or before the asked time is a standby's, or an active task's that was
    suspended or closed: a checkpoint is expected then. One row per key comes back, however many phases the
    tasks went through (an eventful bundle has hundreds of thousands)."""
    keys = sorted(k for k in asked if k[2] is not None and k[3] is not None)
    if not keys:
        return set()
    wanted = utc.create_frame(tl.task_lifecycles.sparkSession, keys,
                              "host string, run_id string, task_id string, _at timestamp")
    phases = tl.task_lifecycles.select("host", "run_id", "task_id", "role", "phase", "start").join(
        F.broadcast(wanted), ["host", "run_id", "task_id"]).where("start IS NOT NULL AND start <= _at")
    last = phases.groupBy("host", "run_id", "task_id", "_at").agg(
        F.max_by(F.struct("role", "phase"), "start").alias("_last")).where(
        (F.col("_last.role") == "standby") | F.col("_last.phase").isin(*NOT_PROCESSING))
    return {(r.host, r.run_id, r.task_id, r._at)
            for r in all_rows(last.select("host", "run_id", "task_id", "_at"), "tasks not processing")}


def _frozen_captures(tl, runs) -> list:
    """Captured checkpoints of a host taken while one of its EOS runs was going (or just after its last
    line), older than the capture by more than ``STALE_AFTER_S``."""
    by_host: dict[str, list] = {}
    for run in runs:
        by_host.setdefault(run.host, []).append(run)
    frozen = []
    for f in captured_checkpoint_rows(tl):
        for run in by_host.get(f.host, []) if f.host is not None else []:
            during = (None not in (f.capture_time, run.start, run.end)
                      and run.start <= f.capture_time <= run.end + CAPTURE_AFTER_RUN)
            # ``during`` first: a capture without a time (no state-file mtime either) is never compared.
            old = (during and f.file_mtime is not None
                   and unix_seconds(f.capture_time) - unix_seconds(f.file_mtime) > STALE_AFTER_S)
            if during and old:
                frozen.append(SimpleNamespace(**f.asDict(), version=run.version, judged_run=run.run_id))
    idle = _not_processing(tl, {(f.host, f.judged_run, f.task_id, f.capture_time) for f in frozen})
    active = [f for f in frozen if (f.host, f.judged_run, f.task_id, f.capture_time) not in idle]
    return in_spark_order(active, key=lambda r: (r.host, r.task_id, r.topic, r.partition, r.source, r.file))[:MAX_ROWS]


def _lonely_writes(tl, runs) -> list:
    """Logged checkpoint writes of an EOS run's task with no later write, delete, read or wipe of that task
    in the run, more than ``STALE_AFTER_S`` before the run's end."""
    run_of = {(r.host, r.run_id): r for r in runs}
    # A write that names no task ("Checkpointing state of all restoring tasks ..") cannot be followed per task.
    task = Window.partitionBy("host", "run_id", "task_id")
    in_runs = sql_in("run_id", sorted({r.run_id for r in runs}))
    last = tl.checkpoints.where(f"kind IN ('written', 'deleted', 'read', 'wiped') AND {in_runs}").withColumn(
        "_last", F.max("ts").over(task))
    writes = all_rows(last.where("kind = 'written' AND origin = 'log' AND task_id IS NOT NULL AND ts >= _last").select(
        "host", "run_id", "task_id", "topic", "partition", "offset", "ts", "source", "line_no"),
        "last checkpoint writes of exactly-once tasks")
    idle = _not_processing(tl, {(w.host, w.run_id, w.task_id, run_of[(w.host, w.run_id)].end)
                                for w in writes if (w.host, w.run_id) in run_of})
    lonely = []
    for w in writes:
        run = run_of.get((w.host, w.run_id))
        # Judged at the run's end, not at the write: a revocation writes the checkpoint of a task it suspends,
        # and only a task that then resumes processing with that file still on disk is the fault (KAFKA-10362;
        # from 2.6.2 the resume deletes it, a later delete that makes this write no last write).
        if (run is not None and run.end is not None and unix_seconds(run.end) - unix_seconds(w.ts) > STALE_AFTER_S
                and (w.host, w.run_id, w.task_id, run.end) not in idle):
            lonely.append(SimpleNamespace(**w.asDict(), version=run.version))
    return in_spark_order(lonely, key=lambda r: (r.host, r.task_id, r.ts, r.source, r.line_no))


@detector(id=ID, title="EOS checkpoint stays on disk during RUNNING", severity="warning",
          needs=("process_runs", "checkpoints", "state", "task_lifecycles", "events"), role="trigger",
          # an EOS run, and a captured checkpoint or a logged write of one
          requires=all_of(rows_in("process_runs", EOS_RUN_SQL),
                          any_of(rows_in("state.checkpoints", "problem IS NULL AND offset IS NOT NULL"),
                                 rows_in("checkpoints", "kind = 'written' AND origin = 'log' AND task_id IS NOT NULL"))))
def eos_checkpoint_stale_during_running(tl) -> list[Finding]:
    """Checkpoint files present and frozen while an exactly-once run processes."""
    runs = [r for r in run_rows(tl) if is_eos_guarantee(r.guarantee)]
    if not runs:
        return []
    cap_rows = _frozen_captures(tl, runs)
    handovers = _handover_race(tl, cap_rows)
    cap_rows = [r for r in cap_rows if id(r) not in handovers]
    # A capture settles its host; the other hosts are still judged by their logs.
    captured_hosts = {r.host for r in cap_rows} | {r.host for r, _ in handovers.values()}
    log_rows = [r for r in _lonely_writes(tl, runs) if r.host not in captured_hosts][:MAX_ROWS]
    findings = []
    for host in sorted({r.host for r in (*cap_rows, *log_rows)}):
        caps = [r for r in cap_rows if r.host == host]
        logs = [r for r in log_rows if r.host == host]
        tasks = sorted({r.task_id for r in (*caps, *logs) if r.task_id})
        evidence = [Evidence(r.source, None, f"{r.file}: {r.topic}-{r.partition} offset {r.offset}, mtime "
                             f"{fmt_ts(r.file_mtime)}, still unchanged at capture {fmt_ts(r.capture_time)}",
                             "state", r.file_mtime) for r in caps[:6]]
        evidence += evidence_lines(tl, [(r.source, r.line_no) for r in logs])
        oldest = min((r.file_mtime for r in caps), default=None) or min((r.ts for r in logs), default=None)
        version = next((r.version for r in (*caps, *logs) if r.version), None)
        findings.append(Finding(
            detector=ID, severity="warning", confidence="confirmed" if caps else "likely",
            title=f"{host}: exactly-once checkpoint(s) of {', '.join(tasks)} frozen during RUNNING",
            explanation=(f"On {host}, under exactly-once, task(s) {', '.join(tasks)} kept a .checkpoint from "
                         f"{fmt_ts(oldest)} while RUNNING" + (" (state capture)" if caps else " (no later write or delete)")
                         + ". Under EOS no checkpoint should exist while processing: a crash now would restart from "
                           "it instead of wiping the stores (KAFKA-20685; KAFKA-10362 before 2.6.2)."),
            hosts=[host], tasks=tasks, ts=oldest, evidence=evidence,
            missing_evidence=[] if caps else missing_steps(ID),
            impact=Impact(summary="no harm until an unclean stop; then uncommitted writes may survive the restart",
                          figures={"tasks": len(tasks)},
                          method="capture time minus .checkpoint mtime, or time from the write to the run's end"),
            known_bugs=known_bug_sentences(ID, [version] if version else []),
        ))
    for host in sorted({r.host for r, _ in handovers.values()}):
        findings.append(_handover_finding(tl, host, [v for v in handovers.values() if v[0].host == host]))
    return findings


def _handover_race(tl, frozen: list) -> dict:
    """The frozen captured checkpoints written just before their task's 'No checkpoint found' line in the same run
    (1.x-2.5): id(row) -> (row, that line)."""
    # Tasks read their checkpoint when created, before locking, up to 2.5.
    ranges = {r.run_id: r.version_range for r in run_rows(tl)}
    candidates = [f for f in frozen if f.task_id and may_predate(f.version, ranges.get(f.judged_run), "2.6")]
    if not candidates:
        return {}
    keys = sorted({(f.host, f.judged_run, f.task_id) for f in candidates})
    wanted = utc.create_frame(tl.events.sparkSession, keys, "host string, run_id string, task_id string")
    missing = all_rows(tl.events.where("event = 'CHECKPOINT_MISSING' AND ts IS NOT NULL").where(
        F.col("message").contains("No checkpoint found for task")).join(F.broadcast(wanted), ["host", "run_id", "task_id"])
        .select("host", "run_id", "task_id", "ts", "source", "line_no"), "'No checkpoint found' lines of frozen tasks")
    out = {}
    for f in candidates:
        near = [m for m in missing if (m.host, m.run_id, m.task_id) == (f.host, f.judged_run, f.task_id)
                and f.file_mtime is not None and abs(unix_seconds(m.ts) - unix_seconds(f.file_mtime)) <= HANDOVER_WITHIN_S]
        if near:
            out[id(f)] = (f, min(near, key=lambda m: abs(unix_seconds(m.ts) - unix_seconds(f.file_mtime))))
    return out


def _handover_finding(tl, host: str, pairs: list) -> Finding:
    tasks = sorted({f.task_id for f, _ in pairs})
    evidence = [Evidence(f.source, None, f"{f.file}: {f.topic}-{f.partition} offset {f.offset}, mtime "
                         f"{fmt_ts(f.file_mtime)}, still unchanged at capture {fmt_ts(f.capture_time)}",
                         "state", f.file_mtime) for f, _ in pairs[:6]]
    evidence += evidence_lines(tl, [(m.source, m.line_no) for _, m in pairs])
    return Finding(
        detector=ID, severity="info", confidence="likely",
        title=f"{host}: checkpoint(s) of {', '.join(tasks)} written by the previous owner after the new one read none",
        explanation=(f"On {host} the .checkpoint of task(s) {', '.join(tasks)} was written within "
                     f"{HANDOVER_WITHIN_S} s of the new owner's 'No checkpoint found' line: the task moved between "
                     "threads, the new owner read (and found nothing) before the old owner's close wrote the file, "
                     "and restored from the changelog start (part of the KAFKA-7672 hand-over). The file stays on "
                     "disk unread while the task runs; only an unclean stop before the task is closed again would "
                     "make the next start restore from its older offset instead of wiping the stores."),
        hosts=[host], tasks=tasks, ts=min(f.file_mtime for f, _ in pairs), evidence=evidence,
        impact=Impact(summary="none while the task runs; after an unclean stop the next start trusts an old offset",
                      figures={"tasks": len(tasks)}, method=".checkpoint mtime next to the new owner's no-checkpoint line"),
    )
