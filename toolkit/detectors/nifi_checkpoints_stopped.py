"""NiFi FlowFile repository checkpoints that stopped before a crash.

``WriteAheadFlowFileRepository`` checkpoints every ``nifi.flowfile.repository.checkpoint.interval`` (20 secs by
default) and logs ``Successfully checkpointed FlowFile Repository with {} records in {} milliseconds``. When the
disk fills up (``Unable to checkpoint FlowFile Repository``, a journal ``marked as poisoned``) or the JVM stalls
(long GC: the checkpoint takes longer and longer, then nothing), the journals grow without a snapshot; a crash then
leaves the whole gap to journal replay, and any damage to those journals loses FlowFiles.

Decision (``nifi_checkpoints``, ``process_runs``): a NiFi run that ended in a crash or an error whose last successful
FlowFile repository checkpoint is more than five checkpoint intervals (and at least two minutes) before the end of
the run. Confirmed when a checkpoint failure or a poisoned journal is logged in the gap.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from toolkit import utc
from toolkit.detectors.base import Finding, Impact, detector
from toolkit.detectors.preconditions import all_of, rows_in
from toolkit.detectors.common import evidence_at, events_of, fmt_ts, log_evidence, merge_evidence, missing_steps, rows

ID = "nifi-checkpoints-stopped"
INTERVALS = 5
MIN_GAP_S = 120.0
FAILURE_KINDS = ("checkpoint_failed", "journal_poisoned")


@detector(id=ID, title="NiFi FlowFile repository checkpoints stopped before a crash", severity="warning",
          needs=("nifi_checkpoints", "process_runs", "events"),
          # a NiFi run that crashed or failed, and two successful FlowFile repository checkpoints (an interval)
          requires=all_of(rows_in("process_runs", "product = 'nifi' AND end_kind IN ('crash', 'error')"),
                          rows_in("nifi_checkpoints", "origin = 'log' AND repository = 'flowfile' AND kind = 'checkpointed'",
                                  min_rows=2)))
def nifi_checkpoints_stopped(tl) -> list[Finding]:
    """One finding per crashed NiFi run whose checkpoints stopped well before its end."""
    cp = tl.nifi_checkpoints.where((F.col("origin") == "log") & (F.col("repository") == "flowfile"))
    done = cp.where(F.col("kind") == "checkpointed")
    order = Window.partitionBy("host", "run_id").orderBy("ts")
    gaps = done.withColumn("_gap", F.unix_millis("ts") - F.unix_millis(F.lag("ts").over(order)))
    stats = gaps.groupBy("host", "run_id").agg(
        F.count(F.lit(1)).alias("n"), F.max("ts").alias("last_ok"),
        F.percentile_approx("_gap", 0.5).alias("interval_ms"))
    ended = tl.process_runs.where((F.col("product") == "nifi") & F.col("end_kind").isin("crash", "error"))
    cases = rows(ended.join(stats, ["host", "run_id"], "inner").where(F.col("n") >= 2).select(
        "host", "run_id", "run_no", "end", "end_kind", "last_ok", "interval_ms", "n"), 30, order=["end", "host"])
    findings = []
    for c in cases:
        if c.end is None or c.last_ok is None:
            continue
        interval_s = (c.interval_ms or 0) / 1000.0
        gap_s = (c.end - c.last_ok).total_seconds()
        if gap_s < max(INTERVALS * interval_s, MIN_GAP_S):
            continue
        in_gap = (F.col("host") == c.host) & (F.col("run_id") == c.run_id) & (F.col("ts") > utc.lit(c.last_ok))
        failures = tl.nifi_checkpoints.where(in_gap & F.col("kind").isin(*FAILURE_KINDS))
        started = cp.where(in_gap & (F.col("kind") == "checkpoint_started"))
        pressure = events_of(tl, "REPOSITORY_BACKPRESSURE", "COMPONENT_STATE_SAVE_FAILED").where(
            (F.col("host") == c.host) & (F.col("run_id") == c.run_id) & (F.col("ts") > utc.lit(c.last_ok)))
        recent = done.where((F.col("host") == c.host) & (F.col("run_id") == c.run_id))
        durations = [r.duration_ms for r in rows(recent.select("duration_ms", "ts"), 3, order=[F.col("ts").desc()])]
        n_fail = rows(failures.agg(F.count(F.lit(1)).alias("n")), 1)[0].n
        causes = rows(failures.where(F.col("problem").isNotNull()).select("problem"), 1, order=["problem"])
        cause = causes[0].problem if causes else None
        hung = bool(rows(started, 1))
        why = (f"{n_fail} checkpoint failure(s) logged after it" + (f" ({cause})" if cause else "") if n_fail
               else "a checkpoint started after it and never finished (a stalled JVM or a blocked disk)" if hung
               else "no checkpoint line at all after it")
        last_ok_line = recent.where(F.col("ts") == utc.lit(c.last_ok))
        evidence = merge_evidence(evidence_at(tl, last_ok_line), evidence_at(tl, failures), evidence_at(tl, started),
                                  log_evidence(pressure, 3))
        findings.append(Finding(
            detector=ID, severity="warning", confidence="confirmed" if (n_fail or hung) else "likely",
            title=f"{c.host}: FlowFile repository checkpoints stopped {gap_s:.0f} s before the {c.end_kind}",
            explanation=(f"On {c.host} the FlowFile repository checkpointed every ~{interval_s:.0f} s until "
                         f"{fmt_ts(c.last_ok)}, then {why}; the run ended ({c.end_kind}) at {fmt_ts(c.end)}. "
                         f"Everything since the last checkpoint ({gap_s:.0f} s) had to be replayed from the journals "
                         "at the next start." + (f" Last checkpoint durations: {durations} ms." if durations else "")),
            hosts=[c.host], ts=c.last_ok, evidence=evidence,
            missing_evidence=[] if (n_fail or hung) else missing_steps(ID),
            impact=Impact(
                summary=f"{gap_s:.0f} s of FlowFile changes without a checkpoint before the {c.end_kind}",
                figures={"gap_s": round(gap_s, 3), "interval_s": round(interval_s, 3), "failures": n_fail,
                         "last_durations_ms": durations},
                method="time from the last 'Successfully checkpointed FlowFile Repository' to the run's last line, "
                       "against the median interval between checkpoints in the run",
            ),
        ))
    return findings
