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
3. T handled a restore of the same partition earlier in the same run;
4. T's next transition to RUNNING follows with no line that shows records being restored in between
   (progress or completion lines, or a state-updater hand-over).

``confirmed`` when the run's version is known to be affected, ``likely`` when it is unknown.
"""

from __future__ import annotations

from types import SimpleNamespace

from pyspark.sql import functions as F

from toolkit.detectors.base import Finding, Impact, detector
from toolkit.detectors.common import (
    NOT_NIFI_SQL,
    all_rows,
    bug_status,
    evidence_lines,
    fmt_int,
    fmt_ts,
    in_spark_order,
    known_bug_sentences,
    missing_steps,
    run_rows,
    spark_order,
)
from toolkit.detectors.preconditions import all_of, rows_in
from toolkit.sqltext import sql_in

ID = "restore-skipped-after-reassignment"
BUG = "KAFKA-7672"
RESTORE_DEBUG = ("DEBUG org.apache.kafka.streams.processor.internals.StoreChangelogReader ('Restoring partition ... "
                 "from offset ... to endOffset ...') and the application's own restore listener, to show how many "
                 "records were restored (see playbooks/collecting-evidence.md)")
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


def _task_owners(events, starts: list) -> dict:
    """(host, topic, partition) -> a task the host's other lines name for that changelog partition."""
    wanted = sorted({(s.host, s.topic) for s in starts if s.task_id is None})
    if not wanted:
        return {}
    # The DEBUG per-partition lines name no task: the task of a changelog partition comes from the host's
    # other lines about that partition (a changelog partition belongs to one task).
    named = events.where(f"task_id IS NOT NULL AND partition IS NOT NULL AND {sql_in('host', [h for h, _ in wanted])} "
                         f"AND {sql_in('topic', [t for _, t in wanted])}")
    return {(r.host, r.topic, r.partition): r.owner for r in all_rows(
        named.groupBy("host", "topic", "partition").agg(F.first("task_id").alias("owner")), "changelog partitions")}


def _thread_lines(events, starts: list) -> list:
    """Of the runs with restore starts: the threads' RUNNING transitions, the lines that show records really
    being restored (progress or completion, not just a start) and the hand-overs to the state updater."""
    runs = sql_in("run_id", sorted({s.run_id for s in starts}))
    topics = sql_in("topic", sorted({s.topic for s in starts}))
    return all_rows(events.where(
        f"{runs} AND ((event = 'THREAD_STATE' AND to_state = 'RUNNING') "
        f"OR (event IN ('RESTORE_PROGRESS', 'RESTORE_END') AND {topics}) OR event = 'RESTORE_QUEUED')").select(
        "host", "run_id", "stream_thread", "task_id", "topic", "partition", "event", "ts", "source", "line_no"),
        "thread, restore and hand-over lines")


@detector(id=ID, title="Task went RUNNING without restoring its changelog (KAFKA-7672)", severity="critical",
          needs=("events", "process_runs"), role="root-cause",
          # two restore starts of a partition on a thread (an earlier one and the restart), and a RUNNING thread
          requires=all_of(rows_in("events", f"event IN ('CHECKPOINT_MISSING', 'RESTORE_START') AND {NOT_NIFI_SQL} "
                                            "AND topic IS NOT NULL AND partition IS NOT NULL "
                                            "AND stream_thread IS NOT NULL", min_rows=2),
                          rows_in("events", f"event = 'THREAD_STATE' AND to_state = 'RUNNING' AND {NOT_NIFI_SQL}")))
def restore_skipped_after_reassignment(tl) -> list[Finding]:
    """KAFKA-7672: a thread restarts the restore of a partition it restored before and goes RUNNING at once."""
    runs = {r.run_id: r for r in run_rows(tl)}
    ev = tl.events.where(NOT_NIFI_SQL)
    # Lines without a time or a run cannot be placed before or after anything.
    starts = all_rows(_restart_lines(ev).where("ts IS NOT NULL AND run_id IS NOT NULL AND host IS NOT NULL"),
                      "restore starts")
    owners = _task_owners(ev, starts)
    starts = [SimpleNamespace(**{**s.asDict(), "task_id": s.task_id if s.task_id is not None
                                 else owners.get((s.host, s.topic, s.partition))}) for s in starts]
    keys = lambda s: (s.host, s.run_id, s.stream_thread, s.topic, s.partition)  # noqa: E731
    by_thread: dict[tuple, list] = {}
    for s in starts:
        by_thread.setdefault(keys(s), []).append(s)
    # A restart of the thread: a restore start after an earlier one of the same partition on the same thread.
    trig = [s for s in starts if (s.kind != "tail" or s.offset < s.end_offset) and any(
        p.ts < s.ts and (p.source, p.line_no) != (s.source, s.line_no) for p in by_thread[keys(s)])]
    if not trig:
        return []
    lines = _thread_lines(ev, trig)
    running: dict[tuple, list] = {}
    proofs: dict[tuple, list] = {}
    queued: dict[tuple, list] = {}
    for r in lines:
        if r.event == "THREAD_STATE":
            running.setdefault((r.host, r.run_id, r.stream_thread), []).append(r)
        elif r.event == "RESTORE_QUEUED":
            queued.setdefault((r.host, r.run_id, r.task_id), []).append(r.ts)
        elif r.topic is not None:
            proofs.setdefault((r.host, r.run_id, r.topic, r.partition), []).append(r.ts)
    found = []
    for t in trig:
        thread_running = [r for r in running.get((t.host, t.run_id, t.stream_thread), []) if r.ts is not None]
        # A restart of the same episode (the EOS reset logs the missing checkpoint, then the restore start) is not
        # an earlier restore: the earlier one must come before a RUNNING of the thread.
        earlier = [p for p in by_thread[keys(t)] if p.ts < t.ts and (p.source, p.line_no) != (t.source, t.line_no)
                   and any(p.ts < r.ts < t.ts for r in thread_running)]
        after = [r for r in thread_running if r.ts >= t.ts]
        if not earlier or not after:
            continue
        p = max(earlier, key=lambda p: spark_order(p.ts, p.source, p.line_no, p.end_offset))
        r = min(after, key=lambda r: spark_order(r.ts, r.source, r.line_no))
        restored = any(t.ts <= at <= r.ts for at in proofs.get((t.host, t.run_id, t.topic, t.partition), [])
                       if at is not None)
        handed_over = any(t.ts <= at <= r.ts for at in queued.get((t.host, t.run_id, t.task_id), [])
                          if at is not None) if t.task_id is not None else False
        if not restored and not handed_over:
            found.append(SimpleNamespace(
                host=t.host, run_id=t.run_id, stream_thread=t.stream_thread, task_id=t.task_id, topic=t.topic,
                partition=t.partition, kind=t.kind, offset=t.offset, end_offset=t.end_offset, restart_at=t.ts,
                restart_source=t.source, restart_line=t.line_no,
                prev=SimpleNamespace(prev_at=p.ts, prev_source=p.source, prev_line=p.line_no,
                                     prev_end_offset=p.end_offset),
                run=SimpleNamespace(running_at=r.ts, running_source=r.source, running_line=r.line_no)))
    hits = in_spark_order(found, key=lambda h: (h.host, h.restart_at))[:100]
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
                     f"restored {changelog} before (at {fmt_ts(h.prev.prev_at)})")
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
