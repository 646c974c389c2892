"""NiFi FlowFile repository not restored, or restored partly, after an unclean stop.

At start-up ``WriteAheadFlowFileRepository`` replays its write-ahead log (the ``checkpoint`` snapshot, then the
journals) and logs ``Successfully restored {} FlowFiles and {} Swap Files``. After a kill, a power loss or a full
disk the log may be damaged: a journal that ends inside a transaction (``Encountered unexpected End-of-File when
reading journal file``), trailing NUL bytes, a 0-byte snapshot — each drops FlowFile updates — or FlowFiles whose
queue is gone are dropped. The result is FlowFiles lost (or, for dropped updates, processed again).

Decision (``nifi_checkpoints``, ``process_runs``): on a host, a run whose recovery logged damage (truncated
journal, NUL bytes, empty snapshot, orphaned or dropped FlowFiles); or that restored less than half of what the
previous run's last checkpoint held (at least 100 FlowFiles) after a crash or error (a clean stop writes no
checkpoint, so a queue drained since the last one restores less, rightly); or that recovered without ever logging
a restore after an unclean stop.
A capture whose FlowFile journal or checkpoint is damaged on disk is reported too (the next start will drop it).
"""

from __future__ import annotations

from pyspark.sql import functions as F

from toolkit.detectors.base import Evidence, Finding, Impact, detector
from toolkit.detectors.preconditions import all_of, any_of, rows_in
from toolkit.detectors.common import evidence_at, events_of, fmt_int, fmt_ts, log_evidence, merge_evidence, missing_steps, rows

ID = "nifi-flowfile-repo-not-restored"
DAMAGE_KINDS = ("journal_truncated", "journal_nul_bytes", "snapshot_empty", "orphaned")
#: A restore below this share of the last checkpoint before the stop counts as partial.
PARTIAL_SHARE = 0.5
MIN_RECORDS_FOR_SHARE = 100
#: Lines that show a run recovering its FlowFile repository (a run without any is not judged).
RECOVERY_KINDS = ("recovery_started", "restored", "initialized", "snapshot_recovered")
RECOVERY_KINDS_SQL = ", ".join(f"'{k}'" for k in RECOVERY_KINDS)


@detector(id=ID, title="NiFi FlowFile repository not restored (or restored partly) after an unclean stop",
          severity="critical", needs=("nifi_checkpoints", "process_runs", "events"),
          # a NiFi run whose FlowFile repository logged its recovery, or a damaged repository file in a capture
          requires=any_of(all_of(rows_in("process_runs", "product = 'nifi'"),
                                 rows_in("nifi_checkpoints", "repository IN ('flowfile', 'unknown') AND origin = 'log' AND "
                                                             f"kind IN ({RECOVERY_KINDS_SQL})")),
                          rows_in("nifi_checkpoints", "origin = 'capture' AND repository = 'flowfile' "
                                                      "AND problem IS NOT NULL")))
def nifi_flowfile_repo_not_restored(tl) -> list[Finding]:
    """One finding per NiFi run whose FlowFile repository recovery lost FlowFiles, plus damaged captures."""
    cp = tl.nifi_checkpoints.where(F.col("repository").isin("flowfile", "unknown"))
    runs = rows(tl.process_runs.where(F.col("product") == "nifi").select(
        "host", "run_id", "run_no", "start", "end", "end_kind", "version"), 200, order=["host", "run_no"])
    by_host: dict[str, list] = {}
    for r in runs:
        by_host.setdefault(r.host, []).append(r)
    findings = []
    for host, host_runs in by_host.items():
        for previous, run in zip([None, *host_runs], host_runs):
            finding = _judge_run(tl, cp, host, previous, run)
            if finding is not None:
                findings.append(finding)
    findings.extend(_damaged_captures(tl, cp))
    return findings


def _judge_run(tl, cp, host, previous, run):
    mine = cp.where((F.col("host") == host) & (F.col("run_id") == run.run_id) & (F.col("origin") == "log"))
    recovery = mine.where(F.col("kind").isin(*RECOVERY_KINDS))
    if not rows(recovery, 1):
        return None
    damage = mine.where(F.col("kind").isin(*DAMAGE_KINDS))
    dropped = events_of(tl, "FLOWFILE_DROPPED").where((F.col("host") == host) & (F.col("run_id") == run.run_id))
    restored_rows = rows(mine.where(F.col("kind") == "restored").select("records", "swap_files", "ts", "source",
                                                                          "line_no"), 1, order=["ts"])
    restored = restored_rows[0].records if restored_rows else None
    last_cp = None
    if previous is not None:
        before = cp.where((F.col("host") == host) & (F.col("run_id") == previous.run_id)
                          & (F.col("kind") == "checkpointed") & (F.col("repository") == "flowfile"))
        found = rows(before.select("records", "ts", "source", "line_no"), 1, order=[F.col("ts").desc()])
        last_cp = found[0] if found else None
    unclean = previous is not None and previous.end_kind in ("crash", "error")
    damage_rows = rows(damage.select("kind", "records"), 20)
    n_dropped = rows(dropped.agg(F.count(F.lit(1)).alias("n")), 1)[0].n
    orphaned = sum(int(r.records or 0) for r in damage_rows if r.kind == "orphaned")
    # NiFi does not checkpoint on a clean stop (WriteAheadFlowFileRepository#close only closes the journal): after
    # one, the restore replays the journal to what was queued at the stop, which a drained queue makes far lower
    # than the last checkpoint. Only after a crash or error can the gap be FlowFiles lost with the journal.
    partial = (unclean and restored is not None and last_cp is not None and last_cp.records is not None
               and last_cp.records >= MIN_RECORDS_FOR_SHARE and restored < PARTIAL_SHARE * last_cp.records)
    never = restored is None and rows(mine.where(F.col("kind") == "recovery_started"), 1) != [] and (
        rows(mine.where(F.col("kind").isin("recovered", "restored")), 1) == [])
    if not (damage_rows or n_dropped or partial or (never and unclean)):
        return None
    kinds = sorted({r.kind for r in damage_rows} | ({"dropped"} if n_dropped else set()))
    what = []
    if kinds:
        what.append("recovery logged " + ", ".join(k.replace("_", " ") for k in kinds))
    if partial:
        what.append(f"it restored {fmt_int(restored)} FlowFiles where the last checkpoint before the stop held "
                    f"{fmt_int(last_cp.records)}")
    if never:
        what.append("the repository started recovering but never logged a restore")
    lost = (last_cp.records - restored) if partial else None
    refs = [damage, mine.where(F.col("kind").isin("restored", "recovery_started", "snapshot_recovered",
                                                 "journal_recovered"))]
    evidence = merge_evidence(*[evidence_at(tl, r) for r in refs], log_evidence(dropped, 4),
                              [Evidence(last_cp.source, int(last_cp.line_no), f"last checkpoint before the stop: "
                                        f"{fmt_int(last_cp.records)} records", "log", last_cp.ts)]
                              if last_cp is not None and last_cp.line_no is not None else [])
    confirmed = bool(damage_rows or n_dropped)
    return Finding(
        detector=ID, severity="critical" if (confirmed or partial) else "warning",
        confidence="confirmed" if confirmed else "likely",
        title=f"{host}: FlowFile repository {'not restored' if never else 'restored partly'} at the start of run "
              f"{run.run_no}",
        explanation=(f"NiFi on {host} started {fmt_ts(run.start)}"
                     + (f" after a run that ended {previous.end_kind} at {fmt_ts(previous.end)}" if unclean else "")
                     + ": " + "; ".join(what) + ". FlowFiles in the dropped transactions are lost (or replayed from "
                     "the source if it re-sends them)."),
        hosts=[host], ts=run.start, evidence=evidence,
        missing_evidence=missing_steps(ID) if not confirmed else [],
        impact=Impact(
            summary=(f"about {fmt_int(lost)} FlowFiles not restored" if lost is not None
                     else f"{fmt_int(n_dropped + orphaned)} FlowFiles dropped or orphaned" if (n_dropped or orphaned)
                     else "FlowFile updates in damaged journal transactions lost"),
            figures={"restored": restored, "last_checkpoint_records": last_cp.records if last_cp else None,
                     "dropped": n_dropped, "orphaned": orphaned, "damage": kinds},
            method="restored count of the run against the last 'Successfully checkpointed FlowFile Repository' "
                   "of the previous run; dropped/orphaned counts from the recovery lines",
        ),
    )


def _damaged_captures(tl, cp) -> list[Finding]:
    bad = cp.where((F.col("origin") == "capture") & (F.col("repository") == "flowfile")
                   & F.col("problem").isNotNull() & ~F.col("problem").startswith("content not captured"))
    found = rows(bad.select("host", "source", "path", "kind", "problem", "ts"), 20, order=["host", "path"])
    by_host: dict[str, list] = {}
    for r in found:
        by_host.setdefault(r.host, []).append(r)
    findings = []
    for host, items in by_host.items():
        facts = [Evidence(r.source, None, f"{r.path}: {r.problem}", "state", r.ts) for r in items]
        findings.append(Finding(
            detector=ID, severity="warning", confidence="likely",
            title=f"{host}: FlowFile repository files damaged on disk",
            explanation=(f"The FlowFile repository captured on {host} has damaged write-ahead-log files "
                         f"({'; '.join(f'{r.path}: {r.problem}' for r in items[:3])}). On its next start NiFi drops "
                         "the damaged transactions: the FlowFile updates in them are lost."),
            hosts=[host], ts=items[0].ts, evidence=facts,
            missing_evidence=missing_steps(ID, "Keep the nifi-app.log of the next start (its recovery lines)"),
            impact=Impact(summary="FlowFile updates in damaged transactions at risk",
                          figures={"files": len(items)}, method="write-ahead-log framing read from the capture"),
        ))
    return findings
