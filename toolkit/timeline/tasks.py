"""What happened to each task: lifecycles, locks, checkpoints, restorations, wipes and state-directory
clean-ups (``task_lifecycles``, ``locks``, ``checkpoints``, ``restorations``, ``wipes``, ``dir_cleanups``).

Pure DataFrame transformations, SQL text where it can be (see :mod:`toolkit.timeline.build`).
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from toolkit.sqltext import earliest, sql_list, sql_str
from toolkit.state.schemas import CHANGELOG_CHECKPOINT_FILES
from toolkit.timeline.model import StateFacts
from toolkit.timeline.runs import _intervals, _run_ends
from toolkit.timeline.schemas import TABLES
from toolkit.timeline.sql import _conform, _explode_partitions, _exprs, _is, conform, sql_map

# --------------------------------------------------------------------------- tasks

TASK_PHASES = {
    "TASK_CREATED": "created",
    "TASK_INITIALIZED": "restoring",
    "TASK_RESTORING": "restoring",
    "RESTORE_QUEUED": "restoring",
    "TASK_RESUMED": "restoring",
    "TASK_RUNNING": "running",
    "STANDBY_UPDATING": "running",
    "TASK_SUSPENDED": "suspended",
    "TASK_CLOSED_CLEAN": "closed-clean",
    "TASK_CLOSED_DIRTY": "closed-dirty",
    "TASK_RECYCLED": "recycled",
    "TASK_MIGRATED": "migrated",
    "TASK_CORRUPTED": "corrupted",
    "RESTORE_END": "running",
}

_ASSIGNED_LISTS = {
    # (regex capturing the list, role): "Handle new assignment with:" (2.6+) and older summaries.
    r"New active tasks: \[([^\]]*)\]": "active",
    r"New standby tasks: \[([^\]]*)\]": "standby",
    r"current active tasks: \[([^\]]*)\]": "active",
    r"current standby tasks: \[([^\]]*)\]": "standby",
    r"currently assigned active tasks: \[([^\]]*)\]": "active",
    r"currently assigned standby tasks: \[([^\]]*)\]": "standby",
}
#: How the task ids of a summary's list are separated.
_LIST_SEPARATOR = r",\s*"
#: Phases after which the thread no longer holds the task.
_CLOSED = ("closed-clean", "closed-dirty", "recycled", "migrated")


def task_lifecycles(events: DataFrame, runs: DataFrame) -> DataFrame:
    """Task phases per host/thread (active and standby), from task lines and assignment summaries."""
    role = ("CASE WHEN lower(coalesce(task_role, 'active')) IN ('standby', 'standby-task') THEN 'standby'"
            " ELSE 'active' END")
    # "Stateful active task 0_1 completed restoration" is per task; changelog RESTORE_END lines are not.
    phased = events.where(f"task_id IS NOT NULL AND event IN ({sql_list(TASK_PHASES)})").selectExpr(
        "host", "run_id", "stream_thread", "task_id", f"{role} AS role",
        f"{sql_map(TASK_PHASES)}[event] AS phase", "ts", "event", "source", "line_no",
    )
    assigned_parts = []
    summaries = events.where("event = 'ASSIGNMENT_APPLIED'")
    for pattern, list_role in _ASSIGNED_LISTS.items():
        ids = f"split(regexp_extract(message, {sql_str(pattern)}, 1), {sql_str(_LIST_SEPARATOR)})"
        assigned_parts.append(
            summaries.where(f"message RLIKE {sql_str(pattern)}").selectExpr(
                "host", "run_id", "stream_thread", f"explode({ids}) AS task_id", f"{sql_str(list_role)} AS role",
                "'assigned' AS phase", "ts", "event", "source", "line_no",
            ).where("task_id != ''")
        )
    rows = reduce(DataFrame.unionByName, assigned_parts, phased)
    iv = _intervals(rows, ["host", "run_id", "stream_thread", "task_id", "role"], _run_ends(runs))
    iv = iv.withColumn("end", F.expr(f"CASE WHEN phase IN ({sql_list(_CLOSED)}) THEN ts ELSE `end` END"))
    return _conform(iv.withColumnRenamed("ts", "start"), "task_lifecycles")


# --------------------------------------------------------------------------- locks


def locks(events: DataFrame, lifecycles: DataFrame) -> DataFrame:
    """Lock evidence per task, and for each failed attempt: who held the task, until when.

    The holder is another thread of the same process that owned the task at that moment (from
    the task lifecycles); the release is that thread's next close/suspend/recycle of the task;
    the hand-off latency is release → the waiting thread's next phase for the task.
    """
    kind = (f"CASE WHEN {_is('LOCK_FAILED')} THEN 'failed' WHEN {_is('LOCK_ACQUIRED')} THEN 'acquired'"
            f" WHEN {_is('LOCK_RELEASED')} THEN 'released' END")
    role = "CASE WHEN contains(lower(coalesce(task_role, '')), 'standby') THEN 'standby' ELSE 'active' END"
    lk = events.where(f"({kind}) IS NOT NULL AND task_id IS NOT NULL").selectExpr(
        "host", "run_id", "task_id", f"{kind} AS kind", "ts",
        "coalesce(stream_thread, thread) AS thread", f"{role} AS role", "source", "line_no",
    )
    failed = lk.where("kind = 'failed'").alias("f")
    owner = lifecycles.where("NOT phase IN ('closed-clean', 'closed-dirty')").alias("o")
    cond = ("f.host = o.host AND f.run_id = o.run_id AND f.task_id = o.task_id AND o.stream_thread != f.thread"
            " AND o.start <= f.ts AND coalesce(o.`end`, f.ts) >= f.ts")
    holders = failed.join(owner, F.expr(cond), "left").groupBy(
        "f.host", "f.run_id", "f.task_id", "f.ts", "f.thread", "f.source", "f.line_no").agg(
        F.expr("max(struct(o.start AS since, o.stream_thread AS holder)) AS _h"))
    holders = holders.selectExpr("host", "run_id", "task_id", "ts", "thread", "source", "line_no",
                                 "_h.holder AS holder_thread", "_h.since AS holder_since")
    # Release: the holder's next closing phase of the task; acquisition: the waiter's next phase. Both from one
    # join of the task's later phases.
    same_task = "h.host = l.host AND h.run_id = l.run_id AND h.task_id = l.task_id"
    holder_closes = ("(l.stream_thread = h.holder_thread AND l.phase IN"
                     " ('closed-clean', 'closed-dirty', 'suspended', 'recycled', 'migrated') AND l.start >= h.ts)")
    waiter_moves = "(l.stream_thread = h.thread AND l.start > h.ts AND NOT l.phase IN ('assigned', 'created'))"
    later = holders.alias("h").join(
        lifecycles.alias("l"), F.expr(f"{same_task} AND ({holder_closes} OR {waiter_moves})"), "left"
    ).groupBy("h.host", "h.run_id", "h.task_id", "h.ts", "h.thread").agg(*_exprs(
        f"min(CASE WHEN {holder_closes} THEN l.start END) AS released",
        f"min(CASE WHEN {waiter_moves} THEN l.start END) AS acquired"))
    keys = ["host", "run_id", "task_id", "ts", "thread"]
    detail = holders.join(later, keys, "left").selectExpr(
        *keys, "holder_thread", "holder_since", "released", "unix_millis(acquired) - unix_millis(released) AS handoff_ms")
    out = lk.join(detail, keys, "left")
    return _conform(out, "locks")


# --------------------------------------------------------------------------- checkpoints

CHECKPOINT_KINDS = {
    "CHECKPOINT_WRITTEN": "written",
    "CHECKPOINT_READ": "read",
    "CHECKPOINT_MISSING": "missing",
    "CHECKPOINT_NONE": "missing",
    "CHECKPOINT_DELETED": "deleted",
    "CHECKPOINT_CORRUPT": "corrupt",
    "CHECKPOINT_STALE": "stale",
    "CHECKPOINT_MIGRATED": "migrated",
    "CHECKPOINT_WRITE_FAILED": "write-failed",
}


_CHECKPOINT_PATH_TASK = r"[/\\]((?:[\w.-]+?__)?\d+_\d+)[/\\]\.checkpoint(?:\.tmp)?\b"


def checkpoints(events: DataFrame, state: StateFacts) -> DataFrame:
    """One history per host/task/changelog partition: log lines and capture facts, each with its origin."""
    logs = _explode_partitions(events.where(f"event IN ({sql_list(CHECKPOINT_KINDS)}) AND product != 'nifi'"))
    # OffsetCheckpoint's TRACE lines name only the file: <state.dir>/<app>/<task>/.checkpoint(.tmp).
    task_from_path = f"nullif(regexp_extract(message, {sql_str(_CHECKPOINT_PATH_TASK)}, 1), '')"
    logs = logs.selectExpr(
        "host", "app_id", f"coalesce(task_id, {task_from_path}) AS task_id", "store", "topic", "partition",
        "ts", f"{sql_map(CHECKPOINT_KINDS)}[event] AS kind",
        "offset", "'log' AS origin", "run_id", "event", "source", "line_no",
    )
    cap = state.checkpoints
    capture = cap.where(f"file_kind IN ({sql_list(CHANGELOG_CHECKPOINT_FILES)}) OR file_kind IS NULL").selectExpr(
        "host", "app_id", "task_id", "store", "topic", "partition",
        "file_mtime AS ts", "CASE WHEN problem IS NOT NULL THEN 'corrupt' ELSE 'file' END AS kind",
        "offset", "'capture' AS origin", "file_mtime", "capture_time", "problem", "source",
    ) if "file_kind" in cap.columns else None
    # Log lines have no file facts; capture facts have no line, run or event. State checkpoints without
    # ``file_kind`` (built by hand before it existed) add no rows: their columns are not this table's.
    capture_rows = (_conform(capture, "checkpoints", absent=("run_id", "event", "line_no")) if capture is not None
                    else conform(cap.limit(0), TABLES["checkpoints"]))
    return _conform(logs, "checkpoints", absent=("file_mtime", "capture_time", "problem")).unionByName(capture_rows)


# --------------------------------------------------------------------------- restorations

_RESTORE_EVENTS = ("RESTORE_START", "RESTORE_TARGET", "RESTORE_END", "CHECKPOINT_READ", "CHECKPOINT_MISSING",
                   "CHECKPOINT_NONE", "OFFSET_RESET")
_FROM_BEGINNING = "(?i)from (the )?beginning"


def restorations(events: DataFrame) -> DataFrame:
    """Restoration episodes per host/changelog partition: start, end, offsets, records, from scratch or not.

    An episode runs from the first restore-related line of a partition (checkpoint read or
    missing, restore start, end offset) to its ``Finished restoring`` line; an episode without an
    end line is reported with ``completed = false`` (a restore that never ran or never finished).
    Under 2.6+ semantics a checkpoint holds the last applied offset, so restoration starts at +1.
    """
    # A standby task's lines (a warm-up's "did not find checkpoint") are no restoration: a standby keeps updating
    # and logs no end, so its line would open an episode that the active task's later restore then joins.
    ev = events.where(f"{_is(_RESTORE_EVENTS)} AND product != 'nifi' AND coalesce(task_role, '') != 'standby'")
    ev = _explode_partitions(ev).where("topic IS NOT NULL AND partition IS NOT NULL")
    # Restore-consumer offset resets concern changelogs only when a restore is under way; keep them
    # but let them neither open nor close an episode on their own.
    ev = ev.withColumn("_is_end", F.expr("CAST(event = 'RESTORE_END' AS INT)"))
    w = "PARTITION BY host, run_id, topic, partition ORDER BY ts, line_no"
    ev = ev.withColumn("_ends_before", F.expr(
        f"coalesce(sum(_is_end) OVER ({w} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)"))
    # Before 2.6 there is no end line: a second checkpoint read/miss after the last end opens a new episode, and
    # so does a second "from offset .. to endOffset .." start with no checkpoint line between the two (a restore
    # begun again without reading a checkpoint: two restores, not one).
    is_open = "CAST(event IN ('CHECKPOINT_READ', 'CHECKPOINT_MISSING', 'CHECKPOINT_NONE') AS INT)"
    positioned_start = "(event = 'RESTORE_START' AND offset IS NOT NULL)"
    since_end = "PARTITION BY host, run_id, topic, partition, _ends_before ORDER BY ts, line_no"
    ev = ev.withColumn("_opens", F.expr(
        f"sum({is_open}) OVER ({since_end} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"))
    previous_opening = (f"last(CASE WHEN {is_open} = 1 OR {positioned_start} THEN event END, true)"
                        f" OVER ({since_end} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)")
    ev = ev.withColumn("_reopen", F.expr(
        f"CAST(({is_open} = 1 AND _opens > 1) OR ({positioned_start} AND {previous_opening} <=> 'RESTORE_START')"
        " AS INT)"))
    ev = ev.withColumn("_episode", F.expr(
        f"_ends_before * 100000 + sum(_reopen) OVER ({w} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"))
    from_scratch_line = ("(event IN ('CHECKPOINT_MISSING', 'CHECKPOINT_NONE')"
                         f" OR event = 'RESTORE_START' AND message RLIKE {sql_str(_FROM_BEGINNING)}"
                         " OR event = 'OFFSET_RESET' AND offset = 0)")
    checkpoint_offset = "CASE WHEN event = 'CHECKPOINT_READ' THEN offset END"
    restore_start_offset = "CASE WHEN event = 'RESTORE_START' THEN offset END"
    g = ev.groupBy("host", "run_id", "topic", "partition", "_episode").agg(*_exprs(
        "min(ts) AS start",
        "max(CASE WHEN _is_end = 1 THEN ts END) AS `end`",
        f"{earliest('task_id')} AS task_id",
        f"{earliest('store')} AS store",
        f"{earliest('stream_thread')} AS stream_thread",
        f"{earliest(checkpoint_offset)} AS _ckpt",
        f"{earliest(restore_start_offset)} AS _start_off",
        "max(CASE WHEN event IN ('RESTORE_TARGET', 'RESTORE_START') THEN end_offset END) AS end_offset",
        "max(CASE WHEN _is_end = 1 THEN records END) AS records",
        f"max(CAST({from_scratch_line} AS INT)) AS _scratch",
        "max(_is_end) AS _done",
        "min(struct(ts, line_no, source)) AS _first",
        "max(CASE WHEN _is_end = 1 THEN struct(ts, line_no, source) END) AS _last",
        "max(CAST(event IN ('RESTORE_START', 'RESTORE_TARGET', 'CHECKPOINT_READ', 'CHECKPOINT_MISSING',"
        " 'CHECKPOINT_NONE') AS INT)) AS _has_opening",
    ))
    # A changelog partition belongs to one task: an episode whose lines name none (a pre-2.6 "Restoring partition"
    # line) takes the task the bundle's other lines name for that partition (checkpoint writes, reads), when
    # they name exactly one.
    named = (_explode_partitions(events.where("task_id IS NOT NULL AND product != 'nifi'"))
             .where("topic IS NOT NULL AND partition IS NOT NULL")
             .groupBy("topic", "partition")
             .agg(F.expr("CASE WHEN count(DISTINCT task_id) = 1 THEN min(task_id) END AS _named_task")))
    g = (g.join(named, ["topic", "partition"], "left")
         .withColumn("task_id", F.coalesce(F.col("task_id"), F.col("_named_task"))).drop("_named_task"))
    g = g.where("_has_opening = 1").selectExpr(
        "*", "coalesce(_start_off, _ckpt + 1, CASE WHEN _scratch = 1 THEN 0 END) AS start_offset",
        "_scratch = 1 AS from_scratch", "_done = 1 AS completed",
        "_first.source AS start_source", "_first.line_no AS start_line_no",
        "coalesce(_last.source, _first.source) AS source",
        "coalesce(_last.line_no, _first.line_no) AS line_no",
    )
    return _conform(g, "restorations")


# --------------------------------------------------------------------------- wipes and cleanups

_WIPE_REASONS = [
    (r"Wiping state stores for", "eos-dirty-close"),
    (r"did not find checkpoint offsets while stores are not empty", "task-corrupted"),
    (r"with EOS turned on\. Reinitializing the task", "eos-no-checkpoint"),
    (r"Deleting StreamTasks stores|Deleting StandbyTasks stores|Deleting global store", "restore-failed"),
    (r"Reinitializing Stream|Reinitializing Standby", "restore-failed"),
    (r"inconsistent local state", "global-state-inconsistent"),
    (r"Detected unclean shutdown for global store", "unclean-shutdown"),
]


def wipes(events: DataFrame) -> DataFrame:
    """Local state deleted, with why: corruption, EOS dirty close, cleaner, user cleanUp()."""
    # The first pattern the message matches names the reason.
    by_message = " ".join(f"WHEN message RLIKE {sql_str(pattern)} THEN {sql_str(name)}" for pattern, name in _WIPE_REASONS)
    reason = (f"CASE WHEN event = 'DIR_CLEANED' THEN 'cleaner' WHEN event = 'DIR_CLEANED_USER' THEN 'user-cleanup'"
              f" WHEN event = 'DIR_PURGED_STARTUP' THEN 'startup-purge'"
              f" ELSE coalesce(CASE {by_message} END, 'other') END")
    w = events.where(_is(("STATE_WIPED", "DIR_CLEANED", "DIR_CLEANED_USER", "DIR_PURGED_STARTUP")))
    return _conform(w.selectExpr("*", f"{reason} AS reason"), "wipes")


#: Task lists of assignment summaries that say what a thread holds after the rebalance. "Handle new assignment
#: with:" lists the whole new assignment as "New ... tasks"; its "Existing ... tasks" are what the thread held
#: before, and a task only there is closed by this very assignment.
_HELD_LISTS = tuple(_ASSIGNED_LISTS)


def _held_by_summaries(events: DataFrame) -> DataFrame:
    """Per assignment summary (host, run, thread, ts): every task the thread holds after it."""
    lists = ", ".join(f"split(regexp_extract(message, {sql_str(pattern)}, 1), {sql_str(_LIST_SEPARATOR)})"
                      for pattern in _HELD_LISTS)
    return events.where("event = 'ASSIGNMENT_APPLIED'").selectExpr(
        "host", "run_id", "stream_thread", "ts",
        f"array_distinct(filter(flatten(array({lists})), t -> t != '')) AS held")


def dir_cleanups(events: DataFrame, lifecycles: DataFrame) -> DataFrame:
    """Cleaner deletions, each with the task's last owner on that host and whether it was still assigned.

    Where the run logs assignment summaries, they decide: the task is assigned when the latest summary
    of some thread before the deletion lists it, and it left the host at the first summary after the
    last one that listed it (a close of an unassigned task is often DEBUG only). Otherwise the task
    lifecycles decide.
    """
    cleaned = events.where("event = 'DIR_CLEANED'").selectExpr(
        "host", "run_id", "task_id", "ts", "duration_ms AS age_ms", "limit_ms AS delay_ms",
        "source", "line_no").alias("c")
    lc = lifecycles.alias("l")
    joined = cleaned.join(lc, F.expr("c.host = l.host AND c.task_id = l.task_id AND l.start <= c.ts"), "left")
    last = joined.groupBy("c.host", "c.run_id", "c.task_id", "c.ts", "c.age_ms", "c.delay_ms", "c.source",
                          "c.line_no").agg(
        F.expr("max(struct(l.start, l.stream_thread, l.role, l.`end`, l.phase)) AS _o"))
    assigned = (f"(NOT _o.phase IN ({sql_list(_CLOSED)}) AND (_o.`end` IS NULL OR _o.`end` >= ts))")
    out = last.selectExpr("*", "_o.stream_thread AS last_owner_thread", "_o.role AS last_owner_role",
                          "_o.`end` AS _lc_until", f"coalesce({assigned}, false) AS _lc_assigned")
    # What the assignment summaries of the same run say.
    held = _held_by_summaries(events).withColumnRenamed("ts", "s_ts")
    keys = ["host", "run_id", "task_id", "ts"]
    with_s = out.select(*keys).join(held, ["host", "run_id"]).where("s_ts <= ts")
    latest = with_s.groupBy(*keys, "stream_thread").agg(F.expr("max_by(held, s_ts) AS latest_held"))
    by_summary = latest.groupBy(*keys).agg(
        F.expr("max(CAST(array_contains(latest_held, task_id) AS INT)) AS _s_assigned"))
    listed = with_s.where("array_contains(held, task_id)").groupBy(*keys).agg(F.expr("max(s_ts) AS _last_listed"))
    left = with_s.join(listed, keys).where("s_ts > _last_listed").groupBy(*keys).agg(F.expr("min(s_ts) AS _left_at"))
    out = out.join(by_summary, keys, "left").join(left, keys, "left").selectExpr(
        "*", "CASE WHEN _s_assigned IS NOT NULL THEN _s_assigned = 1 ELSE _lc_assigned END AS assigned_at_the_time",
        "CASE WHEN _s_assigned = 1 THEN CAST(NULL AS timestamp_ltz) ELSE coalesce(_left_at, _lc_until) END"
        " AS last_owner_until")
    return _conform(out, "dir_cleanups")
