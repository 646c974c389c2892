"""NiFi component state reset or lost: a processor's stored state went back, so it reprocesses.

List processors keep a high-water mark: ``listing.timestamp`` (``AbstractListProcessor``: ``ListFile``,
``ListSFTP``, ``ListFTP``..., and ``ListHDFS`` before 1.23), ``latest.timestamp`` (``ListHDFS`` from 1.23,
NIFI-11178) or ``currentTimestamp`` (``ListS3``). When that state is cleared (UI/API Clear State, a property change
that resets it, a state directory that was wiped, or 1.x state left unread by 2.x) the processor lists everything
again and downstream receives duplicates: every entry modified up to the old mark is in the window.

Decision (``nifi_state_changes``): a capture of the local state provider's write-ahead log shows an applied update
without entries after one with entries (``cleared``), a high-water mark that went back (``regressed``) or 1.x
state with entries that a 2.x NiFi never read (``not_carried_over``: 2.x recovers only its own write-ahead log; the
migration proposed in NIFI-14392 was not merged); or the processor logs ``Detected that state was cleared for this
component.`` (INFO, hidden by default, and only for a Clear State while the same JVM runs: never after a restart, a
wiped directory or an upgrade). Confirmed with a state fact, likely with the log line alone. A component removed
from the flow before the reset is left out: NiFi clears a removed component's state itself, and nothing is left to
list again; an empty update of a component that never held an entry is no reset, and neither is the empty 1.x
record of a component removed long before an upgrade (1.x keeps it in every checkpoint). Processors whose state is
clustered keep it in ZooKeeper in a cluster, out of reach of a ``state/local`` capture.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from toolkit import utc
from toolkit.detectors.base import Evidence, Finding, Impact, detector
from toolkit.detectors.preconditions import rows_in
from toolkit.sqltext import earliest
from toolkit.detectors.common import evidence_at, fmt_int, fmt_ts, merge_evidence, missing_steps, rows

ID = "nifi-component-state-reset"
RESET_KINDS = ("cleared", "regressed", "not_carried_over", "reset_detected")


@detector(id=ID, title="NiFi component state reset or lost (reprocessing window)", severity="warning",
          needs=("nifi_state_changes", "events"),
          requires=rows_in("nifi_state_changes", "kind IN ({})".format(", ".join(f"'{k}'" for k in RESET_KINDS))))
def nifi_component_state_reset(tl) -> list[Finding]:
    """One finding per host and component whose state was reset or lost."""
    changes = tl.nifi_state_changes
    resets = changes.where(F.col("kind").isin(*RESET_KINDS))
    groups = rows(resets.groupBy("host", "component_id").agg(
        F.min("ts").alias("first"), F.max("ts").alias("last"), F.collect_set("kind").alias("kinds"),
        F.max(F.when(F.col("origin") == "capture", 1).otherwise(0)).alias("from_capture"),
        F.max("listing_before").alias("listing_before"), F.expr(earliest("component_type")).alias("ctype"),
    ), 30, order=["first", "host", "component_id"])
    # A component removed from the flow has its state cleared by NiFi itself, and nothing is left to list again.
    removed = {(r.host, r.component_id): r.ts for r in rows(
        tl.events.where((F.col("event") == "PROCESSOR_REMOVED") & F.col("component_id").isNotNull())
        .groupBy("host", "component_id").agg(F.min("ts").alias("ts")), 500, order=["host", "component_id"])}
    findings = []
    for g in groups:
        gone = removed.get((g.host, g.component_id))
        if gone is not None and g.first is not None and gone <= g.first:
            continue
        mine = changes.where((F.col("host") == g.host) & (F.col("component_id") == g.component_id))
        ctype = g.ctype or _type_from_logs(mine) or "component"
        facts = [Evidence(r.source, None, f"{r.kind}: {r.detail}", "state", r.ts)
                 for r in rows(mine.where(F.col("origin") == "capture")
                               .where(F.col("kind").isin(*RESET_KINDS, "updated", "first_seen")), 8,
                               order=["ts", "detail"])]
        reset_at = g.first
        logged = mine.where(F.col("origin") == "log")
        lines = evidence_at(tl, logged.where(F.col("kind").isin("reset_detected", "save_failed", "read_failed")
                                             | ((F.col("kind") == "listed") & (F.col("ts") >= utc.lit(reset_at)))))
        relisted = rows(mine.where((F.col("kind") == "listed") & (F.col("ts") >= utc.lit(reset_at)))
                        .agg(F.sum("records").alias("n")), 1)[0].n if reset_at is not None else None
        window = (f"everything modified up to {fmt_ts(g.listing_before)} (the listing timestamp stored before the "
                  "reset)" if g.listing_before else "everything the processor had listed before (the old listing "
                  "timestamp is not in the evidence)")
        why = (" NiFi 2.x recovers local state only from its own write-ahead log (checkpoint, journals/) and never "
               "reads the 1.x files (snapshot, partition-<n>/); the migration proposed in NIFI-14392 was not merged, "
               "so after the upgrade the processor started with no state." if "not_carried_over" in g.kinds else "")
        how = ", ".join(sorted(g.kinds))
        confirmed = bool(g.from_capture)
        findings.append(Finding(
            detector=ID, severity="warning", confidence="confirmed" if confirmed else "likely",
            title=f"{g.host}: state of {ctype}[id={g.component_id}] was reset ({how})",
            explanation=(f"The stored state of {ctype} {g.component_id} on {g.host} went back at or before "
                         f"{fmt_ts(reset_at)} ({how}). A List processor then lists again {window}; the entries "
                         "already sent downstream are sent a second time." + why
                         + (f" After the reset it listed {fmt_int(relisted)} new object(s)." if relisted else "")),
            hosts=[g.host], ts=reset_at, evidence=merge_evidence(lines, facts),
            missing_evidence=[] if confirmed else missing_steps(ID),
            impact=Impact(
                summary=f"re-listing window ends at {fmt_ts(g.listing_before)}" if g.listing_before
                else "re-listing window unknown",
                figures={"component_id": g.component_id, "reprocessing_window_end": g.listing_before.isoformat()
                         if g.listing_before else None, "relisted_records": relisted},
                method=("listing.timestamp / latest.timestamp / currentTimestamp of the last state before the reset "
                        "(local state write-ahead log); "
                        "re-listed count = sum of 'Successfully created listing with N new objects' after it"),
            ),
        ))
    return findings


def _type_from_logs(changes) -> str | None:
    found = rows(changes.where(F.col("component_type").isNotNull()).select("component_type"), 1)
    return found[0].component_type if found else None
