"""At-least-once: records processed since the last commit are processed again.

Under ``at_least_once`` Kafka Streams flushes state-store changelog and output records before it
commits input offsets, but a crash between two commits leaves changelog writes (and some output)
of records whose input offsets were never committed. The restart restores the store from the
changelog (including those writes) and then re-reads the input from the last commit: the input
since that commit is processed a second time against state that already holds its effects.
Idempotent, overwrite-style logic is unaffected; read-before-write logic (dedup, counters, "delete
and report whether something was there") can produce different answers. The same happens without
any crash when a thread loses its partitions (missed rebalance) or is fenced: the new owner
re-reads from the last commit. Under the streams rebalance protocol (KIP-1071, 4.1+) the same loss is a member
fenced (``StreamsGroupHeartbeatRequest failed … is fenced`` / ``… is unknown``) or gone stale after a poll
timeout: its tasks are closed dirty through the tasks-lost callback. Each such loss counts once, however many
lines report it.

Decision, per host: an at-least-once run (or unset: the default) ended in a crash (a log that was
merely cut off is ``unknown``, not a crash), or lost partitions / was fenced while running. The
window is the time since the thread's last commit when the logs show it (commits can be late or
fail, so ``commit.interval.ms`` is not a bound), else ``commit.interval.ms``. The record count comes
from each thread's own processing summaries (records of its last summary over the time since its
previous one; summaries of different threads are milliseconds apart and must not be paired).
Without record counts the finding stays ``info``.
"""

from __future__ import annotations

from types import SimpleNamespace

from pyspark.sql import Window
from pyspark.sql import functions as F

from toolkit.detectors.base import Finding, Impact, detector
from toolkit.detectors.common import (
    NOT_NIFI_SQL,
    all_rows,
    evidence_lines,
    fmt_int,
    fmt_ts,
    in_spark_order,
    known_bug_sentences,
    missing_steps,
    rows,
    run_rows,
    streams_loss_lines,
    streams_task_losses,
    summary_before,
)
from toolkit.detectors.preconditions import all_of, any_of, events_named, rows_in
from toolkit.sqltext import sql_in, sql_list

ID = "alos-crash-reprocessing"
DEFAULT_COMMIT_INTERVAL_MS = 30_000  # Kafka Streams default under at-least-once
INTERRUPTIONS = ("PARTITIONS_LOST", "TASK_MIGRATED")
#: Streams-protocol lines a loss of tasks starts from (see ``streams_task_losses``).
STREAMS_LOSS_EVENTS = ("TASKS_LOST", "MEMBER_FENCED")
_INTERRUPTION_COLUMNS = ("host", "run_id", "ts", "event", "task_id", "task_ids", "stream_thread", "source", "line_no")
#: Lost-partition and fencing lines of at-least-once runs sized at most (the first, by host and time).
MAX_INTERRUPTIONS = 200
#: An at-least-once run (the default when the guarantee is not in the logs), as Spark SQL.
ALOS_RUN_SQL = f"{NOT_NIFI_SQL} AND (guarantee IS NULL OR lower(guarantee) = 'at_least_once')"


def _is_alos(run) -> bool:
    """An at-least-once Kafka run (the default when the guarantee is not in the logs)."""
    return run.product != "nifi" and (run.guarantee is None or run.guarantee.lower() == "at_least_once")


def _thread_rates(tl, run_ids: list[str]):
    """Per run and thread: the last processing summary, its records and the time it covers."""
    thread = F.coalesce(F.col("stream_thread"), F.col("thread"), F.lit("?"))
    summaries = tl.events.where((F.col("event") == "PROCESSING_SUMMARY") & F.col("records").isNotNull()
                                & F.col("run_id").isin(run_ids)).withColumn("_thread", thread)
    by_thread = Window.partitionBy("run_id", "_thread").orderBy("ts", "line_no")
    latest = Window.partitionBy("run_id", "_thread").orderBy(F.col("ts").desc(), F.col("line_no").desc())
    summaries = (summaries.withColumn("_prev", F.lag("ts").over(by_thread))
                 .withColumn("_n", F.row_number().over(latest)).where(F.col("_n") == 1))
    span_ms = F.coalesce(F.col("duration_ms").cast("double"),
                         (F.unix_millis("ts") - F.unix_millis("_prev")).cast("double"))
    return summaries.select("host", "run_id", F.col("_thread").alias("thread"), "records", "ts", "source", "line_no",
                            span_ms.alias("span_ms"))


def _last_commits(tl, run_ids: list[str]):
    return tl.events.where((F.col("event") == "COMMIT") & F.col("run_id").isin(run_ids)).groupBy("run_id").agg(
        F.max(F.struct("ts", "source", "line_no")).alias("c"))


@detector(id=ID, title="At-least-once crash or lost partitions: uncommitted work is reprocessed", severity="warning",
          needs=("process_runs", "events", "restorations", "task_lifecycles"), role="root-cause",
          # an at-least-once run that crashed, or one and a thread that lost its partitions or was fenced
          requires=any_of(rows_in("process_runs", f"{ALOS_RUN_SQL} AND end_kind = 'crash'"),
                          all_of(events_named(*INTERRUPTIONS, *STREAMS_LOSS_EVENTS, also=False),
                                 rows_in("process_runs", ALOS_RUN_SQL))))
def alos_crash_reprocessing(tl) -> list[Finding]:
    """Size the reprocessing window of at-least-once crashes and of lost/fenced partitions."""
    runs = run_rows(tl)
    alos = {r.run_id: r for r in runs if _is_alos(r)}
    crashed = in_spark_order((r for r in alos.values() if r.end_kind == "crash"), key=lambda r: (r.host, r.run_no))[:200]
    # Only the first interruptions of at-least-once runs: a long log of rebalances holds many of them.
    alos_runs = tl.process_runs.where(ALOS_RUN_SQL).select("run_id")
    interruptions = rows(_interruptions(tl).join(alos_runs, "run_id", "left_semi"), MAX_INTERRUPTIONS,
                         order=["host", "ts", "source", "line_no"])
    lost = [SimpleNamespace(**e.asDict(), guarantee=run.guarantee, commit_interval_ms=run.commit_interval_ms,
                            version=run.version, version_range=run.version_range)
            for e in interruptions if (run := alos.get(e.run_id)) is not None]
    run_ids = sorted({r.run_id for r in crashed} | {r.run_id for r in lost})
    if not run_ids:
        return []
    rates = rows(_thread_rates(tl, run_ids), 500)
    commits = {r.run_id: r.c for r in rows(_last_commits(tl, run_ids), 500)}
    restored = _restores_after(tl, runs, crashed)
    crashed_ids = sorted({r.run_id for r in crashed})
    owned: dict[str, set] = {}
    if crashed_ids:
        for r in rows(tl.task_lifecycles.where(f"{sql_in('run_id', crashed_ids)} AND role = 'active' "
                                               "AND phase IN ('assigned', 'restoring', 'running')")
                      .select("run_id", "task_id").distinct(), 500):
            owned.setdefault(r.run_id, set()).add(r.task_id)
    findings = []
    for host in sorted({r.host for r in crashed}):
        mine = [r for r in crashed if r.host == host]
        finding = _crash_finding(host, mine, rates, commits, restored)
        finding.tasks = sorted(set(finding.tasks) | {t for r in mine for t in owned.get(r.run_id, ()) if t})
        findings.append(finding)
    closed = _closed_dirty_after(tl, lost)
    before = _summaries_before(tl, lost)
    for host in sorted({r.host for r in lost}):
        mine = [r for r in lost if r.host == host]
        finding = _lost_finding(host, mine, rates, [before.get((r.source, r.line_no)) for r in mine])
        finding.tasks = sorted(set(finding.tasks) | closed.get(host, set()))
        findings.append(finding)
    return findings


def _interruptions(tl):
    """Lost-partition and fencing lines (classic), and one row per loss of tasks (streams protocol)."""
    classic = tl.events.where(f"event IN ({sql_list(INTERRUPTIONS)})").select(*_INTERRUPTION_COLUMNS)
    return classic.unionByName(streams_task_losses(tl).select(*_INTERRUPTION_COLUMNS))


def _summaries_before(tl, lost) -> dict[tuple, object]:
    """Per interruption (by its line), the interrupted thread's last processing summary before it."""
    if not lost:
        return {}
    moments = _interruptions(tl)
    return {(r.source, r.line_no): r.summary for r in rows(summary_before(tl, moments), 500)}


#: A fenced or partition-losing thread closes its tasks dirty right after (its own lines name them when the
#: interruption line does not).
CLOSE_AFTER_INTERRUPTION_S = 30


def _closed_dirty_after(tl, lost) -> dict[str, set]:
    """Per host, the tasks the interrupted thread closed dirty within ``CLOSE_AFTER_INTERRUPTION_S``."""
    if not lost:
        return {}
    # Streams protocol: the dirty closes follow the tasks-lost callback, which can come well after the fence.
    moments = tl.events.where(F.col("event").isin(*INTERRUPTIONS)).select("host", "run_id", "stream_thread", "ts").unionByName(
        streams_loss_lines(tl).select("host", "run_id", "stream_thread", "ts")).where(
        F.col("stream_thread").isNotNull()).select("host", "run_id", "stream_thread", F.col("ts").alias("at"))
    dirty = tl.events.where((F.col("event") == "TASK_CLOSED_DIRTY") & F.col("task_id").isNotNull()).select(
        "host", "run_id", "stream_thread", "task_id", "ts")
    near = dirty.join(moments, ["host", "run_id", "stream_thread"]).where(
        (F.col("ts") >= F.col("at")) & (F.col("ts") <= F.col("at") + F.expr(f"INTERVAL {CLOSE_AFTER_INTERRUPTION_S} SECONDS")))
    out: dict[str, set] = {}
    for r in rows(near.select("host", "task_id").distinct(), 500):
        out.setdefault(r.host, set()).add(r.task_id)
    return out


def _restores_after(tl, runs, crashed) -> dict:
    """The completed restorations of the run after each crashed run (by host, run_no + 1)."""
    if not crashed:
        return {}
    by_number = {(r.host, r.run_no): r for r in runs}
    following = {n.run_id: n for n in (by_number.get((r.host, r.run_no + 1)) for r in crashed) if n is not None}
    if not following:
        return {}
    done = all_rows(tl.restorations.where(f"completed AND {sql_in('run_id', sorted(following))}").select(
        "host", "run_id", "task_id", "topic", "partition", "start_offset", "end_offset", "records", "source",
        "line_no", "start_source", "start_line_no"), "restorations after crashes")
    got = in_spark_order((r for r in done if r.host == following[r.run_id].host),
                         key=lambda r: (r.host, r.topic, r.partition))[:200]
    out: dict = {}
    for r in got:
        out.setdefault((r.host, following[r.run_id].run_no - 1), []).append(r)
    return out


def _rate(rates, run_id: str) -> tuple[float | None, list]:
    mine = [r for r in rates if r.run_id == run_id]
    per_thread = [(r, r.records / (r.span_ms / 1000)) for r in mine if r.span_ms and r.span_ms > 0]
    return (sum(x for _, x in per_thread) if per_thread else None), mine


def _crash_finding(host: str, runs, rates, commits, restored) -> Finding:
    refs, figures, parts = [], [], []
    total_estimate, quantified, all_declared = 0, True, True
    windows = []
    restored_all = []
    for run in runs:
        interval = run.commit_interval_ms or DEFAULT_COMMIT_INTERVAL_MS
        rate, summaries = _rate(rates, run.run_id)
        commit = commits.get(run.run_id)
        since_commit = ((run.end - commit.ts).total_seconds() * 1000) if commit is not None and run.end else None
        # Commits can be late or fail: the time since the last one seen beats the configured interval.
        window = int(max(interval, since_commit)) if since_commit is not None else interval
        windows.append(window)
        estimate = int(rate * window / 1000) if rate else None
        quantified &= bool(summaries)
        all_declared &= bool(run.guarantee)
        total_estimate += estimate or 0
        refs += [(s.source, s.line_no) for s in summaries] + [(run.end_source, run.end_line_no)]
        if commit is not None:
            refs.append((commit.source, commit.line_no))
        back = restored.get((host, run.run_no), [])
        restored_all += back
        for r in back[:4]:
            refs += [(r.start_source, r.start_line_no), (r.source, r.line_no)]
        figures.append({"run": run.run_id, "crashed_at": str(run.end), "commit_interval_ms": interval,
                        "since_last_commit_ms": since_commit, "window_ms": window, "records_estimate": estimate,
                        "records_per_second": round(rate, 1) if rate else None,
                        "threads": {s.thread: s.records for s in summaries}})
        parts.append(f"the run that started {fmt_ts(run.start)} stopped without a clean shutdown (last line "
                     f"{fmt_ts(run.end)})" + (f", {since_commit / 1000:.0f} s after its last commit line"
                                               if since_commit is not None else ""))
    first = runs[0]
    guarantee = first.guarantee or "at_least_once (default; processing.guarantee not in the logs)"
    restored_records = sum(r.records or 0 for r in restored_all)
    tasks = sorted({r.task_id for r in restored_all if r.task_id})
    window = max(windows)
    rate_text = (f", about {fmt_int(total_estimate)} records (each thread's last processing summary over the time "
                 f"since its previous one)" if quantified and total_estimate else ", record count unknown")
    return Finding(
        detector=ID, severity="warning" if quantified else "info",
        confidence="confirmed" if all_declared and quantified else "likely" if quantified else "possible",
        title=f"{host}: at-least-once crash, about {fmt_int(window)} ms of input reprocessed",
        explanation=(f"{host} ran with processing.guarantee={guarantee}; " + "; ".join(parts) + ". Input offsets are "
                     f"committed about every commit.interval.ms = {fmt_int(first.commit_interval_ms or DEFAULT_COMMIT_INTERVAL_MS)} "
                     "ms (later when a commit is slow or fails); the records processed since the last commit had "
                     "already written their changelog and output records, so after the restart they are processed "
                     "again on top of state that contains their effects"
                     + (f" (the restart restored {fmt_int(restored_records)} changelog records of {len(restored_all)} "
                        f"partition(s) from the last checkpoints)" if restored_all else "")
                     + ". Aggregations and overwrites converge, but read-before-write logic (dedup, 'was it there?' "
                       "checks, counters) can answer differently the second time, and the output topic may hold both "
                       "answers."),
        hosts=[host], tasks=tasks, ts=first.end, evidence=evidence_lines(None, refs),
        missing_evidence=[] if quantified else missing_steps(
            ID, "processing summaries ('Processed N total records', INFO, 2.8+) or commit lines to size the window"),
        impact=Impact(
            summary=(f"reprocessing window about {fmt_int(window)} ms of input{rate_text}"
                     + (f"; {fmt_int(restored_records)} changelog records restored on restart" if restored_all else "")),
            figures={"reprocessing_window_ms_max": window, "records_estimate": total_estimate if quantified else None,
                     "records_per_second": figures[0]["records_per_second"],
                     "commit_interval_ms": first.commit_interval_ms or DEFAULT_COMMIT_INTERVAL_MS,
                     "restored_records": restored_records, "crashes": figures,
                     "restored": [{"task": r.task_id, "changelog": f"{r.topic}-{r.partition}",
                                   "checkpoint_offset": (r.start_offset - 1) if r.start_offset is not None else None,
                                   "end_offset": r.end_offset, "records": r.records} for r in restored_all]},
            method=("window = time from the run's last commit line to its last line when commits are logged (commits "
                    "can be late or fail), else commit.interval.ms; records = sum over threads of (records of the "
                    "thread's last 'Processed N total records' summary / time since its previous summary) x window; "
                    "restored records from the restart's 'Finished restoring changelog' lines."),
        ),
        known_bugs=known_bug_sentences(ID, [first.version or first.version_range]),
    )


#: How each interruption reads in a title.
WHAT = {"PARTITIONS_LOST": "lost its partitions", "TASKS_LOST": "lost its tasks"}


def _lost_finding(host: str, lost, rates, before) -> Finding:
    tasks = sorted({t for r in lost for t in ([*(r.task_ids or [])] or [r.task_id]) if t})
    interval = lost[0].commit_interval_ms or DEFAULT_COMMIT_INTERVAL_MS
    if all(s is not None and s.span_ms for s in before):
        # Each interruption sized by its own thread's summary just before it.
        rate = max(s.records / (s.span_ms / 1000) for s in before)
        summaries = list(before)
    else:
        rate, summaries = _rate(rates, lost[0].run_id)
    quantified = bool(summaries)
    estimate = int(rate * interval / 1000) if rate is not None else None
    # The threads had processed nothing just before: nothing uncommitted to process again.
    idle = quantified and estimate == 0
    what = sorted({WHAT.get(r.event, "was fenced") for r in lost})
    return Finding(
        detector=ID, severity="warning" if quantified and not idle else "info",
        confidence="likely" if quantified else "possible",
        title=(f"{host}: at-least-once thread(s) {' and '.join(what)} while idle; nothing uncommitted to reprocess"
               if idle else
               f"{host}: at-least-once thread(s) {' and '.join(what)}; uncommitted input is reprocessed by the new owner"),
        explanation=(f"On {host}, under at-least-once, {len(lost)} time(s) a stream thread {' or '.join(what)} "
                     f"(first at {fmt_ts(lost[0].ts)}) without a clean revocation: its tasks "
                     f"({', '.join(tasks) or 'ids not logged'}) were closed without committing, and the next owner "
                     "re-reads their input from the last commit. No crash is needed for this reprocessing."
                     + (" Here the thread's last processing summary before each interruption counted no records: "
                        "there was no uncommitted input to process again." if idle else "")),
        hosts=[host], tasks=tasks, ts=lost[0].ts,
        evidence=evidence_lines(None, [(r.source, r.line_no) for r in lost] + [(s.source, s.line_no) for s in summaries]),
        missing_evidence=[] if quantified else missing_steps(
            ID, "processing summaries ('Processed N total records', INFO, 2.8+) to size the reprocessed input"),
        impact=Impact(summary=(f"up to about {fmt_int(interval)} ms of input per interruption reprocessed"
                               + (f", about {fmt_int(estimate)} records each" if estimate is not None else "")),
                      figures={"interruptions": len(lost), "commit_interval_ms": interval, "records_estimate": estimate},
                      method="commit.interval.ms x the thread's summary rate; commits may be later than the interval"),
        known_bugs=known_bug_sentences(ID, [lost[0].version or lost[0].version_range]),
    )
