"""KAFKA-7672: a task returns to a thread that restored it before and goes RUNNING unrestored.

In 2.0.1-2.1.x each StreamThread's changelog reader keeps the set of partitions it has restored
(``completedRestorers``) for its whole life. When a task comes back to that thread, the reader
believes the partition is already restored and the thread goes straight to RUNNING: with no
checkpoint (under EOS the state is wiped and reset to the changelog start; under at-least-once the
INFO "from beginning" line is still printed) the store is empty; with a checkpoint only the tail
from the checkpoint to the end offset is skipped.

Decision, per host, thread and changelog partition (one finding per host listing its tasks):

1. the run's version is 2.0.1-2.1.x (2.2.0 has the fix; before 2.0.1 the reset path differs);
2. a restore (re)start of the partition on thread T: ``No checkpoint found ... with EOS turned on``,
   ``Restoring task ...'s state store ... from beginning of the changelog`` (at-least-once), or the
   DEBUG ``Restoring partition ... from offset X to endOffset Y`` with X < Y (a checkpoint exists);
3. T handled the same partition earlier in the same run: a restore line of it on T, or an assignment of
   its task to T (``partition assignment took ... current active tasks: [...]``) that T completed by reaching
   RUNNING before its next assignment. The reader adds every partition of an active task it initialises to
   ``completedRestorers`` (restored to the end, or already there at the checkpoint), so a task restored
   silently (a checkpoint, at INFO nothing is printed) counts as restored on T just the same;
4. T's next transition to RUNNING follows with no line that shows records being restored in between
   (progress or completion lines, or a state-updater hand-over).

``confirmed`` when the run's version is known to be affected, ``likely`` when it is unknown.
"""

from __future__ import annotations

from types import SimpleNamespace

from pyspark.sql import Window
from pyspark.sql import functions as F

from toolkit.detectors.base import Finding, Impact, detector
from toolkit.detectors.common import (
    NOT_NIFI_SQL,
    bug_status,
    evidence_lines,
    fmt_int,
    fmt_ts,
    known_bug_sentences,
    missing_steps,
    rows,
    run_rows,
)
from toolkit.detectors.preconditions import all_of, rows_in
from toolkit.sqltext import earliest

ID = "restore-skipped-after-reassignment"
BUG = "KAFKA-7672"
RESTORE_DEBUG = ("DEBUG org.apache.kafka.streams.processor.internals.StoreChangelogReader ('Restoring partition ... "
                 "from offset ... to endOffset ...') and the application's own restore listener, to show how many "
                 "records were restored (see playbooks/collecting-evidence.md)")
#: Restarts reported at most (the first, by host and time).
MAX_HITS = 100
MISSING_VERSION = ("the Kafka Streams version (the 'Kafka version : ...' banner at start-up): KAFKA-7672 needs 2.0.1-2.1.x")


def _restart_lines(events):
    """Lines where a thread (re)starts restoring a changelog partition, with what they imply."""
    no_checkpoint = (F.col("event") == "CHECKPOINT_MISSING") & F.col("message").contains("No checkpoint found for task")
    from_beginning = (F.col("event") == "RESTORE_START") & F.col("message").contains("from beginning of the changelog")
    tail = ((F.col("event") == "RESTORE_START") & F.col("message").contains("Restoring partition ")
            & F.col("offset").isNotNull() & F.col("end_offset").isNotNull())
    kind = (F.when(no_checkpoint, F.lit("no-checkpoint")).when(from_beginning, F.lit("from-beginning"))
            .when(tail, F.lit("tail")))
    return events.where(kind.isNotNull() & F.col("topic").isNotNull() & F.col("partition").isNotNull()
                        & F.col("stream_thread").isNotNull()).select(
        "host", "run_id", "stream_thread", "task_id", "topic", "partition", kind.alias("kind"), "offset", "end_offset",
        "ts", "source", "line_no")


def _with_owners(events, starts):
    """``starts`` with the task of each changelog partition whose line names none.

    The DEBUG per-partition lines name no task: the task of a changelog partition comes from the host's
    other lines about that partition (a changelog partition belongs to one task).
    """
    unnamed = starts.where("task_id IS NULL").select("host", "topic").distinct()
    owners = (events.where("task_id IS NOT NULL AND partition IS NOT NULL").join(unnamed, ["host", "topic"], "left_semi")
              .groupBy("host", "topic", "partition").agg(F.expr(earliest("task_id")).alias("_owner")))
    return starts.join(owners, ["host", "topic", "partition"], "left").withColumn(
        "task_id", F.coalesce("task_id", "_owner")).drop("_owner")


def _first_at_or_after(starts, marks, keys: list[str], alias: str):
    """``starts`` with the time of the first of ``marks`` (rows of ``keys`` and ``ts``) at or after each start
    with the same ``keys``, as ``alias``: one sorted pass per key, not every start against every mark."""
    # Latest first, so that the frame grows row by row (a frame up to the partition's end is computed anew per row).
    after = Window.partitionBy(*keys).orderBy(-F.unix_micros("ts")).rangeBetween(Window.unboundedPreceding, 0)
    both = starts.withColumn("_start", F.lit(True)).unionByName(
        marks.select(*keys, "ts").withColumn("_start", F.lit(False)), allowMissingColumns=True)
    return both.withColumn(alias, F.min(F.when(~F.col("_start"), F.col("ts"))).over(after)).where("_start").drop(
        "_start")


def _completed_assignments(events, lifecycles, starts):
    """Earlier holdings of a restarted partition's task by the restarting thread: rows of ``host, run_id,
    stream_thread, topic, partition``, ``ts`` (the RUNNING that completed the assignment) and ``_prev`` (the
    assignment line).

    An assignment counts when the thread's next line of the two kinds (assignment summary, RUNNING) is a
    RUNNING: a rebalance that revoked the tasks first would have come with a new assignment. Only the tasks of
    restarted partitions are looked at (their changelog partition comes from the restart line).
    """
    thread = ["host", "run_id", "stream_thread"]
    wanted = starts.select("host", "run_id", "stream_thread", "task_id", "topic", "partition").where(
        "task_id IS NOT NULL").distinct()
    marks = events.where("(event = 'ASSIGNMENT_APPLIED' OR (event = 'THREAD_STATE' AND to_state = 'RUNNING')) "
                         "AND ts IS NOT NULL AND stream_thread IS NOT NULL").join(
        wanted.select(*thread).distinct(), thread, "left_semi").select(
        *thread, "ts", "source", "line_no", (F.col("event") == "ASSIGNMENT_APPLIED").alias("_assigned"))
    following = Window.partitionBy(*thread).orderBy(F.unix_micros("ts"), "line_no")
    completed = marks.withColumn("_next", F.lead(F.struct(F.col("ts").alias("at"), F.col("_assigned").alias("assigned")))
                                 .over(following)).where("_assigned AND _next IS NOT NULL AND NOT _next.assigned")
    held = lifecycles.where("role = 'active' AND phase = 'assigned' AND start IS NOT NULL").select(
        *thread, "task_id", F.col("start").alias("ts"), "source", "line_no")
    return (held.join(completed, [*thread, "ts", "source", "line_no"]).join(wanted, [*thread, "task_id"])
            .select(*thread, "topic", "partition", F.col("_next.at").alias("ts"),
                    F.struct(F.col("ts").alias("prev_at"), F.col("source").alias("prev_source"),
                             F.col("line_no").alias("prev_line"), F.lit(None).cast("long").alias("prev_end_offset"),
                             F.lit("assignment").alias("prev_kind"))
                    .alias("_prev")))


def _unrestored_restarts(events, starts, lifecycles=None):
    """Restore starts of a partition on a thread that restored it before (the earlier start came before a
    RUNNING of the thread, so it is not the same episode), or that held its task in an earlier assignment it
    completed (``lifecycles`` given), whose next RUNNING of the thread follows with no line showing records
    restored in between and no hand-over of the task to the state updater.

    Columns of the start plus ``prev`` (the latest such earlier start) and ``run`` (the next RUNNING line).
    Each comparison is a window over rows sorted by time, so the cost grows with the number of lines, not
    with the square of the starts of a partition.
    """
    thread = ["host", "run_id", "stream_thread"]
    partition = [*thread, "topic", "partition"]
    micros = F.unix_micros("ts")
    running = events.where("event = 'THREAD_STATE' AND to_state = 'RUNNING' AND ts IS NOT NULL").select(
        *thread, "ts", F.col("source").alias("_rsource"), F.col("line_no").alias("_rline"))
    # Latest first: "after a start" frames then grow row by row instead of being recomputed for every row.
    by_thread = Window.partitionBy(*thread).orderBy(-micros)
    is_running = ~F.col("_start")
    # Per start: the thread's first RUNNING strictly after it (from then on it is an earlier restore) and the
    # first at or after it (the RUNNING the restart leads to).
    marks = starts.withColumn("_start", F.lit(True)).unionByName(
        running.withColumn("_start", F.lit(False)), allowMissingColumns=True).select(
        "*",
        F.min(F.when(is_running, F.col("ts"))).over(by_thread.rangeBetween(Window.unboundedPreceding, -1))
        .alias("_earlier_from"),
        F.min(F.when(is_running, F.struct(F.col("ts").alias("running_at"), F.col("_rsource").alias("running_source"),
                                          F.col("_rline").alias("running_line"))))
        .over(by_thread.rangeBetween(Window.unboundedPreceding, 0)).alias("run"),
    ).where("_start").drop("_start", "_rsource", "_rline")
    # Per start: the latest start of the same partition on the thread that was followed by a RUNNING before it.
    prev = F.struct(F.col("ts").alias("prev_at"), F.col("source").alias("prev_source"),
                    F.col("line_no").alias("prev_line"), F.col("end_offset").alias("prev_end_offset"),
                    F.lit("restore").alias("prev_kind"))
    earlier = marks.where("_earlier_from IS NOT NULL").select(
        *partition, F.col("_earlier_from").alias("ts"), prev.alias("_prev"))
    if lifecycles is not None:
        earlier = earlier.unionByName(_completed_assignments(events, lifecycles, starts))
    by_partition = Window.partitionBy(*partition).orderBy(micros).rangeBetween(Window.unboundedPreceding, -1)
    restarts = (marks.drop("_earlier_from").withColumn("_start", F.lit(True))
                .unionByName(earlier.withColumn("_start", F.lit(False)), allowMissingColumns=True)
                .withColumn("prev", F.max("_prev").over(by_partition))
                .where("_start AND prev IS NOT NULL AND run IS NOT NULL AND (kind <> 'tail' OR offset < end_offset)")
                .drop("_start", "_prev"))
    proofs = events.where("event IN ('RESTORE_PROGRESS', 'RESTORE_END') AND topic IS NOT NULL AND ts IS NOT NULL")
    queued = events.where("event = 'RESTORE_QUEUED' AND task_id IS NOT NULL AND ts IS NOT NULL")
    restarts = _first_at_or_after(restarts, proofs, ["host", "run_id", "topic", "partition"], "_restored_at")
    restarts = _first_at_or_after(restarts, queued, ["host", "run_id", "task_id"], "_queued_at")
    return restarts.where("NOT coalesce(_restored_at <= run.running_at, false) "
                          "AND NOT coalesce(_queued_at <= run.running_at, false)").drop("_restored_at", "_queued_at")


@detector(id=ID, title="Task went RUNNING without restoring its changelog (KAFKA-7672)", severity="critical",
          needs=("events", "process_runs", "task_lifecycles"), role="root-cause",
          # a restore start of a partition on a thread (the earlier holding may be an assignment), and a RUNNING
          requires=all_of(rows_in("events", f"event IN ('CHECKPOINT_MISSING', 'RESTORE_START') AND {NOT_NIFI_SQL} "
                                            "AND topic IS NOT NULL AND partition IS NOT NULL "
                                            "AND stream_thread IS NOT NULL"),
                          rows_in("events", f"event = 'THREAD_STATE' AND to_state = 'RUNNING' AND {NOT_NIFI_SQL}")))
def restore_skipped_after_reassignment(tl) -> list[Finding]:
    """KAFKA-7672: a thread restarts the restore of a partition it restored before and goes RUNNING at once."""
    runs = {r.run_id: r for r in run_rows(tl)}
    ev = tl.events.where(NOT_NIFI_SQL)
    # Lines without a time or a run cannot be placed before or after anything.
    starts = _with_owners(ev, _restart_lines(ev).where("ts IS NOT NULL AND run_id IS NOT NULL AND host IS NOT NULL"))
    hits = [SimpleNamespace(**h.asDict(recursive=False), restart_at=h.ts, restart_source=h.source,
                            restart_line=h.line_no)
            for h in rows(_unrestored_restarts(ev, starts, tl.task_lifecycles), MAX_HITS, order=["host", "ts", "source", "line_no"])]
    kept = []
    for h in hits:
        run = runs.get(h.run_id)
        status = bug_status(BUG, run.version, run.version_range) if run and (run.version or run.version_range) else None
        if status is None or status == "affected":
            kept.append((h, status == "affected", (run.version or run.version_range) if run else None))
    findings = []
    for host in sorted({h.host for h, _, _ in kept}):
        findings.append(_finding(host, [k for k in kept if k[0].host == host]))
    return findings


def _finding(host: str, hits) -> Finding:
    confirmed = all(known for _, known, _ in hits)
    tasks = sorted({h.task_id for h, _, _ in hits if h.task_id})
    refs, parts, figures = [], [], []
    for h, _, _ in hits:
        changelog = f"{h.topic}-{h.partition}"
        thread = h.stream_thread
        refs += [(h.prev.prev_source, h.prev.prev_line), (h.restart_source, h.restart_line),
                 (h.run.running_source, h.run.running_line)]
        if h.kind == "tail":
            skipped = (h.end_offset - h.offset) if h.end_offset is not None and h.offset is not None else None
            what = (f"a checkpoint existed, so only the tail {h.offset}..{h.end_offset} "
                    f"({fmt_int(skipped)} offsets) had to be restored, and it was skipped")
            lost = skipped
        else:
            what = ("no checkpoint was found (" + ("exactly-once: state wiped and reset to the beginning"
                                                   if h.kind == "no-checkpoint" else
                                                   "at-least-once: restore from the beginning announced") + ")")
            lost = h.prev.prev_end_offset
        parts.append(f"task {h.task_id or '?'} on {thread} at {fmt_ts(h.restart_at)}: {what}; the thread reached RUNNING "
                     f"at {fmt_ts(h.run.running_at)} with no restoration of {changelog} in between, although it had "
                     + (f"restored {changelog} before (at {fmt_ts(h.prev.prev_at)})" if h.prev.prev_kind == "restore" else
                        f"held task {h.task_id or '?'} before (assigned at {fmt_ts(h.prev.prev_at)}, then RUNNING), "
                        f"which put {changelog} in its restored set"))
        figures.append({"task": h.task_id, "thread": thread, "changelog": changelog, "kind": h.kind,
                        "offsets_missing_at_least": lost})
    head = figures[0]
    versions = [v for _, _, v in hits if v]
    return Finding(
        detector=ID, severity="critical", confidence="confirmed" if confirmed else "likely",
        title=f"{host}: task(s) {', '.join(tasks) or '?'} went RUNNING without restoring their changelog (KAFKA-7672)",
        explanation=(f"On {host}: " + "; ".join(parts) + ". The thread's changelog reader still counted the "
                     "partitions as restored (KAFKA-7672), so the tasks run on stores missing that history."),
        hosts=[host], tasks=tasks, ts=min(h.restart_at for h, _, _ in hits),
        evidence=evidence_lines(None, refs),
        missing_evidence=[] if confirmed else missing_steps(ID, MISSING_VERSION, RESTORE_DEBUG),
        impact=Impact(
            summary="; ".join(f"{f['changelog']}: at least {fmt_int(f['offsets_missing_at_least'])} changelog offsets "
                              f"missing from task {f['task']}'s store" for f in figures)
                    + f" on {host}; lookups for older keys return nothing until they are written again.",
            figures={"changelog": head["changelog"], "offsets_missing_at_least": head["offsets_missing_at_least"],
                     "partitions": figures},
            method=("no checkpoint: lower bound = changelog end offset of the thread's previous restoration of that "
                    "partition (the changelog only grew since); checkpoint present: end offset - checkpoint offset of "
                    "the skipped restore."),
        ),
        known_bugs=known_bug_sentences(ID, versions[:1]),
    )
