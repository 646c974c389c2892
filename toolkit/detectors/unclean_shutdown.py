"""Unclean shutdowns: a process whose log stops without the shutdown sequence.

A clean close logs ``Shutdown complete`` / ``NOT_RUNNING`` (Kafka Streams) or ``Application
shutdown completed`` (NiFi). A kill, OOM or node loss leaves none of them and the host starts
again; what the restart does with the state depends on the guarantee: under exactly-once it must
wipe the stores (KAFKA-20685 when it does not), under at-least-once it replays since the last commit.
Decision: ``process_runs.end_kind`` is ``crash`` or ``error``.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from toolkit.detectors.base import Finding, Impact, detector
from toolkit.detectors.common import evidence_lines, fmt_ts, known_bug_sentences, missing_steps, rows

ID = "unclean-shutdown"


@detector(id=ID, title="Unclean shutdown (crash, kill or error)", severity="warning", needs=("process_runs",))
def unclean_shutdown(tl) -> list[Finding]:
    """One finding per run that ended in a crash or an error."""
    ended = tl.process_runs.where(F.col("end_kind").isin("crash", "error"))
    found = rows(ended.select("host", "run_id", "run_no", "product", "start", "end", "end_kind", "end_evidence",
                              "end_source", "end_line_no", "guarantee", "version"), 30, order=["end", "host"])
    findings = []
    for r in found:
        nxt = rows(tl.process_runs.where((F.col("host") == r.host) & (F.col("run_no") == r.run_no + 1))
                   .select("start", "source", "line_no"), 1)
        refs = [(r.end_source, r.end_line_no)] + [(n.source, n.line_no) for n in nxt]
        if r.end_kind == "crash" and r.end_source is None:
            last = rows(tl.events.where((F.col("host") == r.host) & (F.col("run_id") == r.run_id))
                        .select("source", "line_no", "ts"), 1, order=[F.col("ts").desc(), F.col("line_no").desc()])
            refs += [(x.source, x.line_no) for x in last]
        eos = (r.guarantee or "").lower().startswith("exactly_once")
        gap = (nxt[0].start - r.end).total_seconds() if nxt and r.end else None
        consequence = ("under exactly-once the restart must find no checkpoint and wipe the stores"
                       if eos else "under at-least-once the restart reprocesses input since the last commit"
                       if r.product != "nifi" else "NiFi restarts its processors from their last committed state")
        product = r.product or "process"
        findings.append(Finding(
            detector=ID, severity="warning", confidence="confirmed" if r.end_kind == "error" or nxt else "likely",
            title=f"{r.host}: {product} run {r.run_no} ended {'with an error' if r.end_kind == 'error' else 'without a clean shutdown'}",
            explanation=(f"The run of {r.host} that started {fmt_ts(r.start)} ended at {fmt_ts(r.end)} "
                         + ("with an error" if r.end_kind == "error" else "with no shutdown lines (killed, OOM or lost)")
                         + (f"; the next run started {gap:.0f} s later" if gap is not None else "")
                         + f": {consequence}."),
            hosts=[r.host], ts=r.end, evidence=evidence_lines(tl, refs),
            missing_evidence=missing_steps(ID) if r.product != "nifi" else [],
            impact=Impact(summary=f"{product} down for {gap:.0f} s" if gap is not None else "downtime unknown",
                          figures={"downtime_s": gap, "guarantee": r.guarantee},
                          method="last line of the run to the first line of the next run on the same host"),
            known_bugs=known_bug_sentences(ID, [r.version] if r.version else []) if eos else [],
        ))
    return findings
