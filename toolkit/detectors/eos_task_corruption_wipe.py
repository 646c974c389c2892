"""Exactly-once wipes and task corruption.

Under EOS a task whose state cannot be trusted (no checkpoint after an unclean stop, changelog
offsets out of range, a dirty close) is wiped and restored from scratch. After a crash that is
the correct outcome (its absence is KAFKA-20685); without a crash it points to truncated or
compacted changelogs or to a close that timed out.
Decision per host/run: ``wipes`` rows with an EOS/corruption reason or ``TASK_CORRUPTED`` events;
``warning`` when the previous run on the host did not crash (unexpected corruption) or the restore
consumer fell out of range, ``info`` when it is the expected reaction to a crash. In an at-least-once run
(its config dump says so) corruption closes the task dirty and re-initialises it without an exactly-once
wipe: ``info``, said as such.

In 2.0.1-2.5 every active task that finds no ``.checkpoint`` logs ``No checkpoint found for task ... with EOS
turned on. Reinitializing the task ...`` (``StoreChangelogReader``): a task new to the host (no directory, or
one the cleaner removed), or one handed over between two threads of one JVM (the new owner reads before the old
one writes its closing checkpoint), is wiped this way as a matter of course. Such a wipe is unexpected only when
the previous run held the task and stopped cleanly (its checkpoint should be there) and the wipe comes with the
task's first assignment in this run; the others are ``info``.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from toolkit.detectors.base import Finding, Impact, detector
from toolkit.detectors.preconditions import any_of, events_named, rows_in
from toolkit.detectors.common import (
    fmt_ts,
    is_eos_guarantee,
    known_bug_sentences,
    log_refs,
    missing_steps,
    rows,
    run_rows,
    run_versions,
)

ID = "eos-task-corruption-wipe"
EOS_REASONS = ("task-corrupted", "eos-dirty-close", "eos-no-checkpoint", "restore-failed", "unclean-shutdown",
               "global-state-inconsistent")
#: Runs (host and run with wipes) reported at most, and the lines of each given as evidence.
MAX_RUNS = 30
MAX_LINES = 8


@detector(id=ID, title="EOS wipe / task corruption", severity="warning",
          needs=("wipes", "events", "process_runs", "task_lifecycles", "dir_cleanups"),
          role="consequence",
          requires=any_of(rows_in("wipes", "reason IN ({})".format(", ".join(f"'{r}'" for r in EOS_REASONS))),
                          events_named("TASK_CORRUPTED", "RESTORE_OFFSET_OUT_OF_RANGE", also=False)))
def eos_task_corruption_wipe(tl) -> list[Finding]:
    """Wipes and corruption per host and run, judged against how the previous run ended."""
    wiped = tl.wipes.where(F.col("reason").isin(*EOS_REASONS)).select(
        "host", "run_id", "task_id", "ts", "reason", "source", "line_no")
    corrupt = tl.events.where(F.col("event").isin("TASK_CORRUPTED", "RESTORE_OFFSET_OUT_OF_RANGE")).select(
        "host", "run_id", "task_id", "ts",
        F.when(F.col("event") == "RESTORE_OFFSET_OUT_OF_RANGE", F.lit("offset-out-of-range"))
        .otherwise(F.lit("task-corrupted")).alias("reason"), "source", "line_no")
    # Grouped per host and run in Spark: a run that wipes many tasks again and again stays one small row,
    # carrying its first lines (by time) as evidence.
    first_lines = Window.partitionBy("host", "run_id").orderBy("ts", "source", "line_no")
    per_run = (wiped.unionByName(corrupt).withColumn("_n", F.row_number().over(first_lines))
               .groupBy("host", "run_id").agg(
                   F.min("ts").alias("first"), F.collect_set("task_id").alias("tasks"),
                   F.collect_set("reason").alias("reasons"),
                   # sorted by the window's number: collect_list alone promises no order
                   F.sort_array(F.collect_list(F.when(F.col("_n") <= MAX_LINES, F.struct("_n", "source", "line_no"))))
                   .alias("lines")))
    groups = rows(per_run, MAX_RUNS, order=["host", "first", "run_id"])
    runs = {(r.host, r.run_id): r for r in run_rows(tl)}
    ends = {(r.host, r.run_no): r.end_kind for r in run_rows(tl)}
    run_ids = {(r.host, r.run_no): r.run_id for r in run_rows(tl)}
    # Runs after a clean stop whose only wipes are missing checkpoints: which of those tasks should have found one.
    asked = {}
    for g in groups:
        run = runs.get((g.host, g.run_id))
        if run is not None and run.run_no and set(g.reasons) == {"eos-no-checkpoint"} \
                and ends.get((g.host, run.run_no - 1)) == "clean":
            asked[(g.host, g.run_id)] = run_ids.get((g.host, run.run_no - 1))
    expected_cp = _checkpoint_expected(tl, asked)
    findings = []
    for g in groups:
        run = runs.get((g.host, g.run_id))
        previous = ends.get((g.host, run.run_no - 1)) if run is not None and run.run_no else None
        tasks = sorted(t for t in g.tasks if t)
        guarantee = run.guarantee if run is not None else None
        if guarantee and not is_eos_guarantee(guarantee):
            findings.append(_at_least_once(tl, g, tasks, guarantee))
            continue
        # Only a wipe after a *clean* stop (or an out-of-range restore) is unexpected; with no earlier
        # run in the bundle we cannot tell and stay informational.
        unexpected = previous == "clean" or "offset-out-of-range" in g.reasons
        if (g.host, g.run_id) in asked and not expected_cp.get((g.host, g.run_id)):
            findings.append(_routine_no_checkpoint(tl, g, tasks))
            continue
        findings.append(Finding(
            detector=ID, severity="warning" if unexpected else "info", confidence="confirmed",
            title=f"{g.host}: exactly-once wipe of {len(tasks) or 'some'} task(s) ({', '.join(sorted(g.reasons))})",
            explanation=(f"{g.host} wiped the local state of task(s) {', '.join(tasks) or '(unnamed)'} at "
                         f"{fmt_ts(g.first)} and rebuilt it from the changelog ({', '.join(sorted(g.reasons))}). "
                         + ("This is the expected exactly-once reaction to the unclean stop of the previous run."
                            if previous in ("crash", "error") else
                            "The previous run is not in the bundle, so whether it stopped cleanly is unknown."
                            if not unexpected else
                            "No crash precedes it: look for truncated/compacted changelogs (offset out of range), "
                            "close timeouts or a dirty close during a rebalance.")),
            hosts=[g.host], tasks=tasks, ts=g.first,
            evidence=log_refs((r.source, r.line_no) for r in g.lines),
            missing_evidence=[] if previous is not None else missing_steps(ID),
            impact=Impact(summary=f"{len(tasks)} task(s) restored from scratch after the wipe",
                          figures={"tasks": len(tasks)}, method="distinct task ids of wipe/corruption lines"),
            known_bugs=known_bug_sentences(ID, run_versions(tl, [g.host])[:1]),
        ))
    return findings


#: A missing checkpoint this long after the task's first assignment in the run is not that assignment's read.
FIRST_READ_WITHIN = 60


def _checkpoint_expected(tl, asked: dict) -> dict:
    """For each (host, run) of ``asked`` (-> the previous run's id): the tasks whose missing checkpoint is a
    surprise: the previous run held the task (as an active task) and no cleaner removed its directory after that,
    and this run's first 'No checkpoint found' of the task came with its first assignment in the run (within
    ``FIRST_READ_WITHIN`` s). One small query per table for all the asked runs."""
    if not asked:
        return {}
    hosts = sorted({h for h, _ in asked})
    runs = sorted({r for key, prev in asked.items() for r in (key[1], prev) if r})
    lc = tl.task_lifecycles.where(F.col("host").isin(*hosts) & F.col("run_id").isin(*runs)
                                  & (F.col("role") == "active") & F.col("task_id").isNotNull())
    held = {(r.host, r.run_id, r.task_id): (r.first, r.last) for r in rows(
        lc.groupBy("host", "run_id", "task_id").agg(F.min("start").alias("first"), F.max("start").alias("last")),
        5000)}
    cleaned = {(r.host, r.run_id, r.task_id): r.at for r in rows(
        tl.dir_cleanups.where(F.col("host").isin(*hosts) & F.col("run_id").isin(*runs))
        .groupBy("host", "run_id", "task_id").agg(F.max("ts").alias("at")), 5000)}
    first_missing = rows(tl.wipes.where(F.col("host").isin(*hosts) & F.col("run_id").isin(*runs)
                                        & (F.col("reason") == "eos-no-checkpoint") & F.col("task_id").isNotNull())
                         .groupBy("host", "run_id", "task_id").agg(F.min("ts").alias("at")), 5000)
    out: dict = {}
    for m in first_missing:
        prev = asked.get((m.host, m.run_id))
        before = held.get((m.host, prev, m.task_id)) if prev else None
        if before is None:
            continue  # new to the host: nothing to read
        gone = cleaned.get((m.host, prev, m.task_id))
        if gone is not None and before[1] is not None and gone > before[1]:
            continue  # the cleaner removed it after the task left
        first = held.get((m.host, m.run_id, m.task_id))
        if first is not None and first[0] is not None and m.at is not None \
                and (m.at - first[0]).total_seconds() > FIRST_READ_WITHIN:
            continue  # a later hand-over inside the run, not the first read
        out.setdefault((m.host, m.run_id), set()).add(m.task_id)
    return out


def _routine_no_checkpoint(tl, g, tasks: list[str]) -> Finding:
    """EOS reinitialisations of tasks that had no checkpoint to find (2.0.1-2.5): new to the host, their directory
    cleaned, or handed over between threads of the JVM: the normal path, restored from the changelog start."""
    return _info_of_group(
        tl, g, tasks,
        title=f"{g.host}: exactly-once reinitialisation of {len(tasks) or 'some'} task(s) without a checkpoint (routine)",
        explanation=(f"{g.host} found no checkpoint for task(s) {', '.join(tasks) or '(unnamed)'} from {fmt_ts(g.first)} "
                     "and reinitialised them under exactly-once, to restore from the changelog start. The previous run "
                     "stopped cleanly but did not hold these tasks at this point (or their directories were cleaned, or "
                     "the task moved between threads of this JVM, whose new owner reads before the old one writes its "
                     "closing checkpoint): there was no checkpoint to find, and this is how Kafka Streams 2.0.1-2.5 "
                     "starts such a task."),
        summary=f"{len(tasks)} task(s) restored from scratch", method="distinct task ids of 'No checkpoint found' lines")


def _at_least_once(tl, g, tasks: list[str], guarantee: str) -> Finding:
    """Task corruption in an at-least-once run: the task is closed dirty and re-initialised, and its store is not
    wiped as under exactly-once; an out-of-range changelog offset there means the changelog no longer holds what
    the store lacks (retention, compaction), which a long downtime explains."""
    reasons = ", ".join(sorted(g.reasons))
    return _info_of_group(
        tl, g, tasks,
        title=f"{g.host}: task corruption of {len(tasks) or 'some'} task(s) under {guarantee} ({reasons})",
        explanation=(f"{g.host} found task(s) {', '.join(tasks) or '(unnamed)'} corrupted at {fmt_ts(g.first)} "
                     f"({reasons}) under {guarantee}: the task is closed dirty and re-initialised from its changelog; "
                     "at-least-once keeps the local state (no exactly-once wipe). An offset out of range means the "
                     "changelog no longer holds records the store lacks (retention or compaction, e.g. after a long "
                     "downtime)."),
        summary=f"{len(tasks)} task(s) re-initialised", method="distinct task ids of corruption lines")


def _info_of_group(tl, g, tasks: list[str], *, title: str, explanation: str, summary: str, method: str) -> Finding:
    """An ``info`` finding on one host/run group of wipes: its lines as evidence, its task count as the impact."""
    return Finding(
        detector=ID, severity="info", confidence="confirmed", title=title, explanation=explanation,
        hosts=[g.host], tasks=tasks, ts=g.first, evidence=log_refs((r.source, r.line_no) for r in g.lines),
        impact=Impact(summary=summary, figures={"tasks": len(tasks)}, method=method),
        known_bugs=known_bug_sentences(ID, run_versions(tl, [g.host])[:1]),
    )
