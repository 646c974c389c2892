"""Unclean shutdowns: a process whose log stops without the shutdown sequence.

A clean close logs ``Shutdown complete`` / ``NOT_RUNNING`` (Kafka Streams) or ``Application
shutdown completed`` (NiFi). A kill, OOM or node loss leaves none of them and the host starts
again; what the restart does with the state depends on the guarantee: under exactly-once it must
wipe the stores (KAFKA-20685 when it does not), under at-least-once it replays since the last commit.
Decision: ``process_runs.end_kind`` is ``crash`` or ``error``.
"""

from __future__ import annotations

from toolkit.detectors.base import Finding, Impact, detector
from toolkit.detectors.preconditions import rows_in
from toolkit.detectors.common import evidence_lines, fmt_ts, in_spark_order, known_bug_sentences, missing_steps, run_rows

ID = "unclean-shutdown"


@detector(id=ID, title="Unclean shutdown (crash, kill or error)", severity="warning", needs=("process_runs",),
          role="trigger", requires=rows_in("process_runs", "end_kind IN ('crash', 'error')"))
def unclean_shutdown(tl) -> list[Finding]:
    """One finding per host whose runs ended in a crash or an error (listing those runs)."""
    runs = run_rows(tl)
    found = in_spark_order((r for r in runs if r.end_kind in ("crash", "error")), key=lambda r: (r.host, r.end))[:200]
    if not found:
        return []
    # The run after each unclean end on the same host: when the process came back.
    following = {(r.host, r.run_no): r for r in runs}
    findings = []
    for host in sorted({r.host for r in found}):
        mine = [r for r in found if r.host == host]
        refs, parts, gaps = [], [], []
        for r in mine:
            nxt = following.get((host, r.run_no + 1))
            refs += [(r.end_source, r.end_line_no)] + ([(nxt.source, nxt.line_no)] if nxt else [])
            gap = (nxt.start - r.end).total_seconds() if nxt and r.end else None
            gaps.append(gap)
            parts.append(f"the run that started {fmt_ts(r.start)} ended at {fmt_ts(r.end)} "
                         + ("with an error" if r.end_kind == "error" else "with no shutdown lines (killed, OOM or lost)")
                         + (f"; the next run started {gap:.0f} s later" if gap is not None else ""))
        first = mine[0]
        eos = any((r.guarantee or "").lower().startswith("exactly_once") for r in mine)
        consequence = ("under exactly-once the restart must find no checkpoint and wipe the stores"
                       if eos else "under at-least-once the restart reprocesses input since the last commit"
                       if first.product != "nifi" else "NiFi restarts its processors from their last committed state")
        product = first.product or "process"
        errors = all(r.end_kind == "error" for r in mine)
        downtime = [g for g in gaps if g is not None]
        findings.append(Finding(
            detector=ID, severity="warning",
            confidence="confirmed" if all(r.end_kind == "error" or following.get((host, r.run_no + 1)) for r in mine)
            else "likely",
            title=(f"{host}: {len(mine)} {product} run(s) ended "
                   + ("with an error" if errors else "without a clean shutdown")),
            explanation=f"On {host}: " + "; ".join(parts) + f": {consequence}.",
            hosts=[host], ts=first.end, evidence=evidence_lines(None, refs),
            missing_evidence=missing_steps(ID) if first.product != "nifi" else [],
            impact=Impact(summary=(f"{product} down for {sum(downtime):.0f} s in total" if downtime
                                   else "downtime unknown"),
                          figures={"downtime_s": sum(downtime) if downtime else None, "runs": len(mine),
                                   "guarantee": first.guarantee},
                          method="last line of each run to the first line of the next run on the same host"),
            known_bugs=(known_bug_sentences(ID, [first.version or first.version_range]) if eos else []),
        ))
    return findings
