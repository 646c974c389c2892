"""At-least-once crash: records processed since the last commit are processed again.

Under ``at_least_once`` Kafka Streams flushes state-store changelog and output records before it
commits input offsets, but a crash between two commits leaves changelog writes (and some output)
of records whose input offsets were never committed. The restart restores the store from the
changelog (including those writes) and then re-reads the input from the last commit: up to one
``commit.interval.ms`` of input is processed a second time against state that already holds its
effects. Idempotent, overwrite-style logic is unaffected; read-before-write logic (dedup,
counters, "delete and report whether something was there") can produce different answers.

Decision, per crashed run: the run's guarantee is at-least-once (or unset: the default), it ended
in a crash, and it shows work since its last commit (processing summaries with records). Without
record counts the finding stays ``info`` (the window is bounded by commit.interval.ms but the
amount is unknown).
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
)

ID = "alos-crash-reprocessing"
DEFAULT_COMMIT_INTERVAL_MS = 30_000  # Kafka Streams default under at-least-once


@detector(id=ID, title="At-least-once crash: uncommitted work is reprocessed", severity="warning",
          needs=("process_runs", "events", "restorations", "checkpoints"))
def alos_crash_reprocessing(tl) -> list[Finding]:
    """Estimate the reprocessing window of an at-least-once crash from summaries and commit.interval.ms."""
    runs = tl.process_runs.where((F.col("product").isNull() | (F.col("product") != "nifi"))
                                 & (F.col("end_kind") == "crash")
                                 & (F.col("guarantee").isNull() | (F.lower("guarantee") == "at_least_once")))
    crashed = rows(runs.select("host", "run_id", "run_no", "start", "end", "end_source", "end_line_no", "guarantee",
                               "commit_interval_ms", "version"), 20, order=["host", "run_no"])
    findings = []
    for run in crashed:
        findings.append(_finding(tl, run))
    return findings


def _finding(tl, run) -> Finding:
    ev = tl.events.where((F.col("host") == run.host) & (F.col("run_id") == run.run_id))
    summaries = rows(ev.where((F.col("event") == "PROCESSING_SUMMARY") & F.col("records").isNotNull()).select(
        "ts", "records", "source", "line_no", "stream_thread"), 3, order=[F.col("ts").desc()])
    commits = rows(ev.where(F.col("event") == "COMMIT").select("ts", "source", "line_no"), 1, order=[F.col("ts").desc()])
    interval = run.commit_interval_ms or DEFAULT_COMMIT_INTERVAL_MS
    # Rate from the last two summaries (each counts records since the previous one).
    rate = None
    if len(summaries) >= 2 and summaries[0].ts > summaries[1].ts:
        span_s = (summaries[0].ts - summaries[1].ts).total_seconds()
        rate = summaries[0].records / span_s if span_s > 0 else None
    # The kill can come just before the next commit: one full interval is the upper bound.
    window_ms = interval
    estimate = int(rate * window_ms / 1000) if rate else None
    next_run = rows(tl.process_runs.where((F.col("host") == run.host) & (F.col("run_no") == run.run_no + 1))
                    .select("run_id", "start"), 1)
    restored = []
    if next_run:
        restored = rows(tl.restorations.where((F.col("host") == run.host) & (F.col("run_id") == next_run[0].run_id)
                                              & F.col("completed")).select(
            "task_id", "topic", "partition", "start_offset", "end_offset", "records", "source", "line_no",
            "start_source", "start_line_no"), 10, order=["topic", "partition"])
    refs = [(s.source, s.line_no) for s in summaries[:1]] + [(run.end_source, run.end_line_no)]
    refs += [(c.source, c.line_no) for c in commits]
    for r in restored[:4]:
        refs += [(r.start_source, r.start_line_no), (r.source, r.line_no)]
    evidence = evidence_lines(tl, refs)
    tasks = sorted({r.task_id for r in restored if r.task_id})
    restored_records = sum(r.records or 0 for r in restored)
    quantified = bool(summaries)
    guarantee = run.guarantee or "at_least_once (default; processing.guarantee not in the logs)"
    explanation = (
        f"{run.host} ran with processing.guarantee={guarantee} and stopped without a clean shutdown (last line "
        f"{fmt_ts(run.end)}). Input offsets are committed every commit.interval.ms = {fmt_int(interval)} ms; the "
        f"records processed since the last commit had already written their changelog and output records, so "
        f"after the restart they are processed again on top of state that contains their effects"
        + (f" (the restart restored {fmt_int(restored_records)} changelog records of {len(restored)} partition(s) "
           f"from the last checkpoints)" if restored else "")
        + ". Aggregations and overwrites converge, but read-before-write logic (dedup, 'was it there?' checks, "
          "counters) can answer differently the second time, and the output topic may hold both answers.")
    impact = Impact(
        summary=(f"reprocessing window up to {fmt_int(window_ms)} ms of input"
                 + (f", about {fmt_int(estimate)} records (rate {rate:,.0f} records/s from the last processing "
                    f"summary)" if estimate is not None else ", record count unknown")
                 + (f"; {fmt_int(restored_records)} changelog records restored on restart" if restored else "")),
        figures={"reprocessing_window_ms_max": window_ms, "records_estimate": estimate,
                 "records_per_second": round(rate, 1) if rate else None, "commit_interval_ms": interval,
                 "restored_records": restored_records,
                 "restored": [{"task": r.task_id, "changelog": f"{r.topic}-{r.partition}",
                               "checkpoint_offset": (r.start_offset - 1) if r.start_offset is not None else None,
                               "end_offset": r.end_offset, "records": r.records} for r in restored]},
        method=("window = commit.interval.ms (the crash can come just before the next commit); records = rate of the "
                "last 'Processed N total records' summary (N / time since the previous summary) x window; restored "
                "records from the restart's 'Finished restoring changelog' lines."),
    )
    return Finding(
        detector=ID, severity="warning" if quantified else "info",
        confidence="confirmed" if run.guarantee and quantified else "likely" if quantified else "possible",
        title=f"{run.host}: at-least-once crash, up to {fmt_int(window_ms)} ms of input reprocessed",
        explanation=explanation, hosts=[run.host], tasks=tasks, ts=run.end, evidence=evidence,
        missing_evidence=[] if quantified else missing_steps(
            ID, "processing summaries ('Processed N total records', INFO, 2.8+) or commit lines to size the window"),
        impact=impact, known_bugs=known_bug_sentences(ID, [run.version] if run.version else []),
    )
