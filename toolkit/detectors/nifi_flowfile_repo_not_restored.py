"""NiFi FlowFile repository not restored, or restored partly, after an unclean stop.

At start-up ``WriteAheadFlowFileRepository`` replays its write-ahead log (the ``checkpoint`` snapshot, then the
journals) and logs ``Successfully restored {} FlowFiles and {} Swap Files``. After a kill, a power loss or a full
disk the log may be damaged: a journal that ends inside a transaction (``Encountered unexpected End-of-File when
reading journal file``), trailing NUL bytes, a 0-byte snapshot — each drops FlowFile updates — or FlowFiles are
dropped at recovery (one WARN line each; before 1.12 one line for all whose queue is gone). The result is FlowFiles
lost (or, for dropped updates, processed again). FlowFiles whose queue is gone are *kept* from 1.12 on
(``nifi.flowfile.repository.retain.orphaned.flowfiles`` defaults to true, NIFI-7706): ``On recovery, found {}
FlowFiles whose queues no longer exists.`` alone is no loss.

Decision (``nifi_checkpoints``, ``process_runs``): on a host, a run whose recovery logged damage (truncated
journal, NUL bytes, empty snapshot, dropped FlowFiles); or that restored less than half of what the
previous run's last checkpoint held (at least 100 FlowFiles) after a crash or error (a clean stop writes no
checkpoint, so a queue drained since the last one restores less, rightly); or that recovered without ever logging
a restore after an unclean stop.
A capture whose FlowFile journal or checkpoint is damaged on disk is reported too (the next start will drop it),
with one exception: a copy of a running node. ``LengthDelimitedJournal`` writes each transaction through a buffered
stream, so a copy taken while NiFi runs often ends inside the newest journal's last transaction, and a checkpoint
in progress leaves a ``checkpoint.partial`` (deleted at recovery when ``checkpoint`` exists). Those two are damage
only when the node is known to have been stopped when it was copied; when the logs cannot tell, they are reported as
``info``.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import Window
from pyspark.sql import functions as F

from toolkit.detectors.base import Evidence, Finding, Impact, detector
from toolkit.detectors.preconditions import all_of, any_of, rows_in
from toolkit.detectors.common import evidence_at, events_of, fmt_int, fmt_ts, log_evidence, merge_evidence, missing_steps, rows

ID = "nifi-flowfile-repo-not-restored"
DAMAGE_KINDS = ("journal_truncated", "journal_nul_bytes", "snapshot_empty", "orphans_dropped")
#: A NiFi run that wrote log lines this long after the newest change in a copy of its repository was running when
#: the copy was taken (a busy node writes its journal continuously and checkpoints every 20 s by default).
LIVE_MARGIN_S = 30
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
    orphaned = sum(int(r.records or 0) for r in damage_rows if r.kind == "orphans_dropped")
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
                     else f"{fmt_int(n_dropped + orphaned)} FlowFiles dropped at recovery" if (n_dropped or orphaned)
                     else "FlowFile updates in damaged journal transactions lost"),
            figures={"restored": restored, "last_checkpoint_records": last_cp.records if last_cp else None,
                     "dropped": n_dropped, "orphaned": orphaned, "damage": kinds},
            method="restored count of the run against the last 'Successfully checkpointed FlowFile Repository' "
                   "of the previous run; dropped/orphaned counts from the recovery lines",
        ),
    )


def _damaged_captures(tl, cp) -> list[Finding]:
    capture = cp.where((F.col("origin") == "capture") & (F.col("repository") == "flowfile"))
    folder = F.regexp_replace("path", r"(/journals)?/[^/]+$", "")
    journal_no = F.regexp_extract("path", r"(\d+)\.journal$", 1).cast("long")
    per_folder = Window.partitionBy("host", "source", "_folder")
    marked = (capture.withColumn("_folder", folder)
              .withColumn("_journal_no", F.when(F.col("kind") == "journal", journal_no))
              .withColumn("_newest", F.col("_journal_no") == F.max("_journal_no").over(per_folder))
              .withColumn("_copied", F.max(F.coalesce("capture_time", "file_mtime")).over(
                  Window.partitionBy("host", "source"))))
    # What a copy of a running node holds: the newest journal cut inside its last transaction, a partial checkpoint.
    tail = ((F.col("kind") == "snapshot_partial")
            | ((F.col("kind") == "journal") & F.coalesce(F.col("_newest"), F.lit(False))
               & F.col("problem").startswith("truncated: transaction")))
    bad = marked.where(F.col("problem").isNotNull() & ~F.col("problem").startswith("content not captured"))
    found = rows(bad.select("host", "source", "path", "kind", "problem", "ts", "_copied", tail.alias("tail")),
                 20, order=["host", "path"])
    runs = rows(tl.process_runs.where(F.col("product") == "nifi").select("host", "start", "end", "end_kind"),
                200, order=["host", "start"])
    by_host: dict[str, list] = {}
    for r in found:
        state = _node_when_copied(r.host, r._copied, runs) if r.tail else "stopped"
        if state != "running":
            by_host.setdefault(r.host, []).append((r, state))
    findings = []
    for host, items in by_host.items():
        facts = [Evidence(r.source, None, f"{r.path}: {r.problem}", "state", r.ts) for r, _ in items]
        sure = any(state == "stopped" for _, state in items)
        copied = items[0][0]._copied
        explanation = (f"The FlowFile repository captured on {host} has damaged write-ahead-log files "
                       f"({'; '.join(f'{r.path}: {r.problem}' for r, _ in items[:3])}). On its next start NiFi drops "
                       "the damaged transactions: the FlowFile updates in them are lost.")
        if not sure:
            explanation = (f"The FlowFile repository captured on {host} ends inside a write ({'; '.join(f'{r.path}: {r.problem}' for r, _ in items[:3])}). "
                           "A copy of a running NiFi looks like this (the journal is written through a buffered "
                           "stream; a checkpoint.partial exists while a checkpoint is written): it is damage only if "
                           f"NiFi was stopped when it was copied (newest file change {fmt_ts(copied)}), which the "
                           "logs in the bundle do not show.")
        findings.append(Finding(
            detector=ID, severity="warning" if sure else "info", confidence="likely" if sure else "possible",
            title=(f"{host}: FlowFile repository files damaged on disk" if sure
                   else f"{host}: FlowFile repository copy ends inside a write (damage only if NiFi was stopped)"),
            explanation=explanation,
            hosts=[host], ts=items[0][0].ts, evidence=facts,
            missing_evidence=missing_steps(ID, "Keep the nifi-app.log of the next start (its recovery lines)")
            if sure else missing_steps(ID, "Say whether NiFi was running when the repository was copied (the "
                                           "nifi-app.log around the copy, or a capture-state archive, which records "
                                           "its time)"),
            impact=Impact(summary="FlowFile updates in damaged transactions at risk" if sure
                          else "none if NiFi was running when copied",
                          figures={"files": len(items)}, method="write-ahead-log framing read from the capture"),
        ))
    return findings


def _node_when_copied(host: str, copied, runs) -> str:
    """``running``, ``stopped`` or ``unknown``: the host's NiFi when a copy whose newest change is ``copied`` was made.

    Running: a run started before it and wrote lines well after it. Stopped: the last run started before it ended
    (crash, clean stop or error) by then, give or take the time between its last line and its last file write.
    """
    if copied is None:
        return "unknown"
    margin = timedelta(seconds=LIVE_MARGIN_S)
    before = [r for r in runs if r.host == host and r.start is not None and r.start <= copied]
    if not before:
        return "unknown"
    last = before[-1]
    if last.end is not None and last.end >= copied + margin:
        return "running"
    if last.end_kind in ("crash", "clean", "error") and last.end is not None:
        return "stopped"
    return "unknown"
