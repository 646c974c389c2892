"""A ``.checkpoint`` that stays on disk, unchanged, while an exactly-once task is RUNNING.

Under exactly-once the checkpoint is deleted when a task initialises and written again only when
it closes or suspends, so no ``.checkpoint`` should exist during RUNNING. From 3.8 to 4.2 the state
updater writes one when restoration completes and leaves it there (KAFKA-20685); before 2.6.2 a
resumed task kept its old one (KAFKA-10362). Either way an unclean stop is then not detected.
Decision per host/task: a state capture taken while an EOS run was going shows a checkpoint whose
mtime is older than the capture by more than ``STALE_AFTER_S`` (``confirmed``), or, on a host without
such a capture, a DEBUG
``Writing checkpoint`` line in an EOS run followed by more than ``STALE_AFTER_S`` of RUNNING with no
further write or delete for the task (``likely``).
"""

from __future__ import annotations

from pyspark.sql import functions as F

from toolkit.detectors.base import Evidence, Finding, Impact, detector
from toolkit.detectors.common import (
    EOS_RUN_SQL,
    captured_checkpoints,
    evidence_lines,
    fmt_ts,
    is_eos,
    known_bug_sentences,
    missing_steps,
    rows,
)
from toolkit.detectors.preconditions import all_of, any_of, rows_in

ID = "eos-checkpoint-stale-during-running"
STALE_AFTER_S = 600


@detector(id=ID, title="EOS checkpoint stays on disk during RUNNING", severity="warning",
          needs=("process_runs", "checkpoints", "state"), role="trigger",
          # an EOS run, and a captured checkpoint or a logged write of one
          requires=all_of(rows_in("process_runs", EOS_RUN_SQL),
                          any_of(rows_in("state.checkpoints", "problem IS NULL AND offset IS NOT NULL"),
                                 rows_in("checkpoints", "kind = 'written' AND origin = 'log' AND task_id IS NOT NULL"))))
def eos_checkpoint_stale_during_running(tl) -> list[Finding]:
    """Checkpoint files present and frozen while an exactly-once run processes."""
    runs = tl.process_runs.where(is_eos()).select("host", "run_id", "start", "end", "version")
    files = captured_checkpoints(tl).select(
        "host", "task_id", "topic", "partition", "offset", "file_mtime", "capture_time", "source", "file")
    captured = files.join(runs, "host").where(
        F.col("capture_time").between(F.col("start"), F.col("end") + F.expr("INTERVAL 10 MINUTES"))
        & (F.unix_timestamp("capture_time") - F.unix_timestamp("file_mtime") > STALE_AFTER_S))
    cap_rows = rows(captured, 30, order=["host", "task_id"])
    # A write that names no task ("Checkpointing state of all restoring tasks ..") cannot be followed per task.
    writes = tl.checkpoints.where((F.col("kind") == "written") & (F.col("origin") == "log")
                                  & F.col("task_id").isNotNull()).join(
        runs.select("host", "run_id", F.col("end").alias("run_end"), "version"), ["host", "run_id"])
    followups = tl.checkpoints.where(F.col("kind").isin("written", "deleted", "read", "wiped")).select(
        "host", "run_id", "task_id", F.col("ts").alias("next_ts"))
    lonely = writes.join(followups, ["host", "run_id", "task_id"], "left").groupBy(
        "host", "run_id", "task_id", "topic", "partition", "offset", "ts", "run_end", "source", "line_no", "version").agg(
        F.min(F.when(F.col("next_ts") > F.col("ts"), F.col("next_ts"))).alias("next_ts")).where(
        F.col("next_ts").isNull() & (F.unix_timestamp("run_end") - F.unix_timestamp("ts") > STALE_AFTER_S))
    # A capture settles its host; the other hosts are still judged by their logs.
    captured_hosts = sorted({r.host for r in cap_rows})
    if captured_hosts:
        lonely = lonely.where(~F.col("host").isin(captured_hosts))
    log_rows = rows(lonely, 30, order=["host", "task_id"])
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
    return findings
