"""Restorations from scratch and what they cost.

A task restored from the changelog start (no checkpoint, an EOS wipe, a cleaned directory) is
unavailable until it has replayed the whole changelog. Decision per host/changelog partition:
``restorations.from_scratch`` with no checkpoint offset to start from. A full restore is routine when
a task moves to a host that never had its state, or after a clean restart: ``info``. ``warning`` only
when it follows an unclean end of the host's previous run (a crash or error: the exactly-once wipe)
and took longer than ``SLOW_RESTORE_S`` or replayed more than ``BIG_RESTORE_RECORDS`` (one finding
per host, listing the partitions).
"""

from __future__ import annotations

from pyspark.sql import functions as F

from toolkit.detectors.base import Finding, Impact, detector
from toolkit.detectors.preconditions import rows_in
from toolkit.detectors.common import bounded, evidence_lines, fmt_int, fmt_ts, known_bug_sentences, missing_steps, run_versions

ID = "restore-from-scratch"
SLOW_RESTORE_S = 300
BIG_RESTORE_RECORDS = 1_000_000


@detector(id=ID, title="Restoration from scratch", severity="warning", needs=("restorations", "process_runs"),
          role="consequence", requires=rows_in("restorations", "from_scratch AND coalesce(start_offset, 0) <= 0"))
def restore_from_scratch(tl) -> list[Finding]:
    """Full restorations per host: how many, how long, how many records."""
    runs = tl.process_runs.select("host", "run_id", "run_no")
    previous = tl.process_runs.select("host", (F.col("run_no") + 1).alias("run_no"),
                                      F.col("end_kind").alias("previous_end"))
    scratch = (tl.restorations.where(F.col("from_scratch") & (F.coalesce(F.col("start_offset"), F.lit(0)) <= 0))
               .join(runs, ["host", "run_id"], "left").join(previous, ["host", "run_no"], "left")
               .withColumn("duration_s", F.when(F.col("end").isNotNull(),
                                                (F.unix_millis("end") - F.unix_millis("start")) / 1000.0)))
    got = bounded(scratch.select("host", "task_id", "topic", "partition", "start", "end", "duration_s", "records",
                                 "end_offset", "completed", "start_source", "start_line_no", "source", "line_no",
                                 "previous_end"), 200, order=["host", "start"])
    found = got.rows
    findings = []
    for host in sorted({r.host for r in found}):
        mine = [r for r in found if r.host == host]
        # A logged count wins, 0 included (an empty or expired changelog); the end offset is a bound without one.
        records = sum((r.records if r.records is not None else r.end_offset or 0) for r in mine)
        counted = sum(r.records or 0 for r in mine)
        durations = [r.duration_s for r in mine if r.duration_s is not None]
        longest = max(durations, default=0)
        # Only measured cost after an unclean end raises the severity: an end offset is an upper bound, not
        # a replay, and a full restore after a clean restart or a move to a new host is routine.
        unclean = any(r.previous_end in ("crash", "error") for r in mine)
        costly = unclean and (longest > SLOW_RESTORE_S or counted > BIG_RESTORE_RECORDS)
        refs = [(r.start_source, r.start_line_no) for r in mine[:4]] + [(r.source, r.line_no) for r in mine[:4]]
        findings.append(Finding(
            detector=ID, severity="warning" if costly else "info",
            confidence="confirmed" if all(r.records is not None or r.end_offset is not None for r in mine) else "likely",
            title=f"{host}: {len(mine)} restoration(s) from scratch, about {fmt_int(records)} records",
            explanation=(f"{host} restored {len(mine)} changelog partition(s) from the beginning "
                         f"({', '.join(sorted({f'{r.topic}-{r.partition}' for r in mine})[:6])}), first at "
                         f"{fmt_ts(mine[0].start)}. A full restore follows a missing checkpoint, an exactly-once wipe "
                         f"or a deleted task directory; the tasks are unavailable until it finishes."),
            hosts=[host], tasks=sorted({r.task_id for r in mine if r.task_id}), ts=mine[0].start,
            evidence=evidence_lines(tl, refs),
            missing_evidence=[] if all(r.completed for r in mine) else missing_steps(ID),
            impact=Impact(summary=f"{fmt_int(records)} changelog records replayed; " + (
                              f"longest restoration {longest:.1f} s" if durations else
                              "durations unknown (no restoration logged its end; Kafka before 2.6 logs none)"),
                          figures={"restorations": len(mine), "records": records,
                                   "longest_s": round(longest, 3) if durations else None},
                          method="records from 'Finished restoring' lines, else the changelog end offset"),
            known_bugs=known_bug_sentences(ID, run_versions(tl, [host])[:1]), truncation=got.record("restorations"),
        ))
    return findings
