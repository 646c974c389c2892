"""How each timeline table is derived from events and state facts.

Every function here is a pure DataFrame transformation (window functions, joins, aggregates):
no loops over events on the driver. The input ``events`` carry ``run_id`` (see
``toolkit.events.tag_runs``) and the typed fields of ``toolkit.events.classify``.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from toolkit.events import is_nifi_bootstrap
from toolkit.events.versions import KNOWN_LINES, template_versions
from toolkit.timeline import StateFacts, Timeline
from toolkit.timeline.schemas import TABLES

# --------------------------------------------------------------------------- helpers


def _conform(df: DataFrame, name: str) -> DataFrame:
    """Select exactly the schema's columns (missing ones as typed nulls), in order."""
    schema = TABLES[name]
    cols = []
    for f in schema.fields:
        cols.append(F.col(f.name).cast(f.dataType).alias(f.name) if f.name in df.columns
                    else F.lit(None).cast(f.dataType).alias(f.name))
    return df.select(*cols)


def _empty(spark, name: str) -> DataFrame:
    return spark.createDataFrame([], TABLES[name])


def _is(event: str | tuple[str, ...]) -> Column:
    """The row's event is one of these, or lists one of them in ``also_events``."""
    names = (event,) if isinstance(event, str) else event
    main = F.col("event").isin(list(names))
    also = reduce(lambda a, b: a | b, [F.coalesce(F.array_contains("also_events", n), F.lit(False)) for n in names])
    return main | also


def _first_line(col: str = "message") -> Column:
    return F.substring_index(F.col(col), "\n", 1)


def _explode_partitions(df: DataFrame) -> DataFrame:
    """One row per changelog partition: list-valued lines (checkpoint maps) become several rows."""
    item = F.explode_outer(F.when(F.size("partitions") > 1, F.col("partitions")))
    df = df.withColumn("_p", item)
    return (
        df.withColumn("topic", F.coalesce(F.col("_p.topic"), F.col("topic")))
        .withColumn("partition", F.coalesce(F.col("_p.partition"), F.col("partition")))
        .withColumn("offset", F.coalesce(F.col("_p.offset"), F.col("offset")))
        .withColumn("end_offset", F.coalesce(F.col("_p.end_offset"), F.col("end_offset")))
        .withColumn("records", F.coalesce(F.col("_p.records"), F.col("records")))
        .drop("_p")
    )


def _run_config(config: DataFrame | None, key: str) -> DataFrame | None:
    if config is None:
        return None
    return config.where(F.col("key") == key).groupBy("run_id").agg(F.first("value", ignorenulls=True).alias(key))


# --------------------------------------------------------------------------- process runs

CLEAN_STOP = ("CLIENT_STOPPED", "NIFI_SHUTDOWN_COMPLETE", "NIFI_PROCESS_EXITED")
ERROR_STOP = ("CLIENT_ERROR", "APP_SHUTDOWN_REQUESTED", "NIFI_START_FAILED")
#: A thread died of an exception: the run ended in an error unless it still closed cleanly afterwards
#: (REPLACE_THREAD, or the other threads kept going).
THREAD_DIED = ("UNCAUGHT_EXCEPTION",)
_ROTATION_INDEX = r"\.(\d+)(?:\.gz)?$"


def _rotation(source: Column) -> tuple[Column, Column]:
    """(file name without its rotation index, the index: 0 for the live file, n for ``app.log.n[.gz]``)."""
    inner = F.regexp_replace(source, r"^.*!/", "")
    digits = F.regexp_extract(inner, _ROTATION_INDEX, 1)
    index = F.when(digits == "", F.lit(0)).otherwise(digits.cast("int"))
    return F.regexp_replace(inner, _ROTATION_INDEX, ""), index


def process_runs(events: DataFrame, config: DataFrame | None, bounds: DataFrame | None = None) -> DataFrame:
    """One row per process run and host, with how it ended.

    A run ends at the last line it wrote (``bounds``: every record of the run, classified or not; else
    its last event). ``clean``: the close completed (``Streams client stopped completely`` into
    NOT_RUNNING, client ``PENDING_SHUTDOWN -> NOT_RUNNING``, NiFi ``Application shutdown completed``);
    ``error``: the client went to ERROR / PENDING_ERROR (also when it was closed afterwards), the
    application was asked to shut down by the exception handler, or a thread died of an exception
    with no clean close after it; ``crash``: the log just stops and a new run follows on the same
    host; ``unknown``: the log is cut off, the bundle ends while the run was still going, or the
    run's file ends and the next run starts in a later rotated file with a file missing in between.
    Run 0 (lines before the first start marker: the start was not collected) is a run too.
    """
    ev = events.where(F.col("run_no").isNotNull() & F.col("host").isNotNull())
    to_not_running = (F.col("event") == "CLIENT_STATE") & (F.col("to_state") == "NOT_RUNNING")
    to_error = (F.col("event") == "CLIENT_STATE") & F.col("to_state").isin("ERROR", "PENDING_ERROR")
    stopped_in_error = _is("CLIENT_STOPPED") & F.coalesce(F.col("message").rlike(r"\bERROR\b"), F.lit(False))
    clean = (_is(CLEAN_STOP) & ~stopped_in_error) | to_not_running
    error = _is(ERROR_STOP) | to_error | stopped_in_error
    died = _is(THREAD_DIED)
    ev = ev.withColumn("_evidence", F.struct("ts", "line_no", "source", _first_line().alias("text")))
    # The bootstrap's lines speak about the application's run (launch, termination) but are not part of it.
    ev = ev.withColumn("_app", ~is_nifi_bootstrap(ev))
    runs = ev.groupBy("host", "run_id", "run_no").agg(
        # A Streams run also logs Kafka client lines; name the run after the richer product.
        F.max(F.struct(F.when(F.col("product") == "kafka-client", 0).otherwise(1), F.col("product"))).alias("_product"),
        F.first("app_id", ignorenulls=True).alias("app_id"),
        F.first("client_id", ignorenulls=True).alias("client_id"),
        F.first("process_id", ignorenulls=True).alias("process_id"),
        F.first(F.when((F.col("event") == "APP_START") & F.col("version").isNotNull(),
                       F.struct("version", "source", "line_no", _first_line().alias("text"))),
                ignorenulls=True).alias("_banner"),
        F.first(F.when(F.col("event").isin("NIFI_STARTING", "NIFI_STARTED") & F.col("version").isNotNull(),
                       F.struct("version", "source", "line_no", _first_line().alias("text"))),
                ignorenulls=True).alias("_nifi_banner"),
        F.coalesce(F.min(F.when(F.col("_app"), F.col("ts"))), F.min("ts")).alias("_ev_start"),
        F.coalesce(F.max(F.when(F.col("_app"), F.struct("ts", "line_no", "source", _first_line().alias("text")))),
                   F.max(F.struct("ts", "line_no", "source", _first_line().alias("text")))).alias("_ev_last"),
        F.max(F.when(clean, F.col("_evidence"))).alias("_clean"),
        F.max(F.when(error, F.col("_evidence"))).alias("_error"),
        F.max(F.when(died, F.col("_evidence"))).alias("_died"),
        F.coalesce(F.min(F.when(F.col("_app"), F.struct("ts", "line_no", "source"))),
                   F.min(F.struct("ts", "line_no", "source"))).alias("_first"),
    )
    if bounds is not None:
        runs = runs.join(bounds.select("host", "run_no", "first_ts", "first_source", "last_ts", "last_source",
                                       "last_line_no", "last_text", "last_of_file"), ["host", "run_no"], "left")
    else:
        runs = (runs.withColumn("first_ts", F.lit(None).cast("timestamp"))
                .withColumn("first_source", F.col("_first.source"))
                .withColumn("last_ts", F.lit(None).cast("timestamp")).withColumn("last_source", F.lit(None).cast("string"))
                .withColumn("last_line_no", F.lit(None).cast("long")).withColumn("last_text", F.lit(None).cast("string"))
                .withColumn("last_of_file", F.lit(None).cast("boolean")))
    runs = runs.withColumn("start", F.least(F.col("_ev_start"), F.col("first_ts")))
    runs = runs.withColumn("end", F.greatest(F.col("_ev_last.ts"), F.col("last_ts")))
    last_is_bound = F.col("last_ts").isNotNull() & (F.col("last_ts") >= F.col("_ev_last.ts"))
    runs = runs.withColumn("_last_source", F.when(last_is_bound, F.col("last_source")).otherwise(F.col("_ev_last.source")))
    runs = runs.withColumn("_last_line", F.when(last_is_bound, F.col("last_line_no")).otherwise(F.col("_ev_last.line_no")))
    runs = runs.withColumn("_last_text", F.when(last_is_bound, F.col("last_text")).otherwise(F.col("_ev_last.text")))
    runs = runs.withColumn("product", F.col("_product.product"))
    runs = runs.withColumn("_banner", F.coalesce("_banner", "_nifi_banner"))
    runs = runs.join(version_ranges(events), "run_id", "left")
    runs = runs.withColumn("version", F.col("_banner.version")).withColumn(
        "version_evidence",
        F.when(F.col("_banner").isNotNull(),
               F.concat(F.lit("banner '"), F.col("_banner.text"), F.lit("' at "), F.col("_banner.source"), F.lit(":"),
                        F.col("_banner.line_no").cast("string"))).otherwise(F.col("_range_evidence")))
    later = Window.partitionBy("host").orderBy("run_no")
    runs = runs.withColumn("_next_source", F.lead("first_source").over(later))
    runs = runs.withColumn("_has_next", F.lead("run_no").over(later).isNotNull())
    # The run's file ends and the next run begins in a later rotated file, with one missing in between:
    # the end of this run was not collected.
    this_file, this_index = _rotation(F.col("_last_source"))
    next_file, next_index = _rotation(F.col("_next_source"))
    gap_in_rotation = (F.coalesce(F.col("last_of_file"), F.lit(False)) & (this_file == next_file)
                       & (this_index - next_index > 1))
    clean_after_death = F.col("_clean").isNotNull() & (F.col("_died").isNull() | (F.col("_clean.ts") >= F.col("_died.ts")))
    end_kind = (F.when(F.col("_error").isNotNull(), F.lit("error"))
                .when(clean_after_death, F.lit("clean"))
                .when(F.col("_died").isNotNull(), F.lit("error"))
                .when(F.col("_has_next") & ~F.coalesce(gap_in_rotation, F.lit(False)), F.lit("crash"))
                .otherwise(F.lit("unknown")))
    end_struct = (F.when(F.col("_error").isNotNull(), F.col("_error"))
                  .when(clean_after_death, F.col("_clean"))
                  .when(F.col("_died").isNotNull(), F.col("_died")))
    runs = runs.select(
        "*", end_kind.alias("end_kind"), end_struct.alias("_end_ev"),
        F.col("_first.source").alias("source"), F.col("_first.line_no").alias("line_no"),
    )
    runs = runs.select(
        "*", F.coalesce(F.col("_end_ev.text"), F.when(F.col("end_kind") == "crash", F.col("_last_text"))).alias("end_evidence"),
        F.coalesce(F.col("_end_ev.source"), F.col("_last_source")).alias("end_source"),
        F.coalesce(F.col("_end_ev.line_no"), F.col("_last_line")).alias("end_line_no"),
    )
    for key, col, cast in (
        ("processing.guarantee", "guarantee", "string"), ("commit.interval.ms", "commit_interval_ms", "bigint"),
        ("num.standby.replicas", "num_standby_replicas", "int"), ("num.stream.threads", "num_stream_threads", "int"),
        ("state.dir", "state_dir", "string"), ("state.cleanup.delay.ms", "state_cleanup_delay_ms", "bigint"),
        ("group.instance.id", "group_instance_id", "string"), ("application.id", "_config_app_id", "string"),
    ):
        values = _run_config(config, key)
        if values is not None:
            runs = runs.join(values.withColumnRenamed(key, col), "run_id", "left")
            runs = runs.withColumn(col, F.expr(f"try_cast({col} as {cast})"))
    if "_config_app_id" in runs.columns:
        runs = runs.withColumn("app_id", F.coalesce("_config_app_id", "app_id"))
    return _conform(runs, "process_runs")


# --------------------------------------------------------------------------- versions


def _key_text(key: Column) -> Column:
    return F.concat_ws(".", (key / 100).cast("int").cast("string"), (key % 100).cast("string"))


def version_ranges(events: DataFrame) -> DataFrame:
    """Per run: the release lines most of the templates seen in it were printed by, and the evidence.

    Each template records the versions that print it; every known minor line gets one vote per
    distinct template of the run that covers it, and the range is the span of the lines with the
    most votes (a template whose range is recorded too narrowly, or a line from another
    application version, cannot make the range empty). The range reads ``4.1-4.1`` for one line,
    ``2.0-2.1`` for two; never open-ended, never empty.
    """
    spark = events.sparkSession
    versions = template_versions(spark)
    lines = spark.createDataFrame([(family, major * 100 + minor) for family, known in KNOWN_LINES.items()
                                   for major, minor in known], "family string, line int")
    ev = events.where(F.col("run_no").isNotNull()).select("run_id", "template_id").distinct().join(
        F.broadcast(versions), "template_id")
    # The product's own templates decide (Kafka client lines share the Kafka version).
    family = ev.groupBy("run_id", "family").agg(F.count(F.lit(1)).alias("n"))
    best_family = Window.partitionBy("run_id").orderBy(F.desc("n"), "family")
    family = family.withColumn("_r", F.row_number().over(best_family)).where("_r = 1").select("run_id", "family")
    votes = ev.join(family, ["run_id", "family"]).join(F.broadcast(lines), "family").where(
        F.col("line").between(F.col("v_lo"), F.col("v_hi")))
    # Ties broken by template id, so the evidence reads the same on every engine and partitioning.
    per_line = votes.groupBy("run_id", "line").agg(F.count(F.lit(1)).alias("votes"),
                                                   F.min_by("template_id", F.struct("v_hi", "template_id")).alias("hi_by"),
                                                   F.max_by("template_id", F.struct("v_lo", "template_id")).alias("lo_by"))
    top = Window.partitionBy("run_id")
    best = per_line.withColumn("_max", F.max("votes").over(top)).where(F.col("votes") == F.col("_max"))
    ranges = best.groupBy("run_id").agg(F.min("line").alias("lo"), F.max("line").alias("hi"),
                                        F.min_by("lo_by", "line").alias("lo_by"), F.max_by("hi_by", "line").alias("hi_by"),
                                        F.first("_max").alias("votes"))
    text = F.concat(_key_text(F.col("lo")), F.lit("-"), _key_text(F.col("hi")))
    evidence = F.concat(F.lit("log templates: "), F.col("votes").cast("string"), F.lit(" template(s) agree on "), text,
                        F.lit(" (e.g. "), F.col("lo_by"), F.lit(", "), F.col("hi_by"), F.lit(")"))
    return ranges.select("run_id", text.alias("version_range"), evidence.alias("_range_evidence"))


# --------------------------------------------------------------------------- rebalances


def generations(events: DataFrame) -> DataFrame:
    """Generations per member: when each thread joined and synced, and the leader's assignment."""
    ev = events.where(_is(("REBALANCE_JOINED", "REBALANCE_SYNCED", "LEADER_ASSIGNMENT_DONE"))
                      & F.col("generation").isNotNull())
    g = ev.groupBy(F.coalesce("app_id", F.lit("?")).alias("group_id"), "generation", "host", "run_id",
                   "stream_thread").agg(
        F.first("member_id", ignorenulls=True).alias("member_id"),
        F.min(F.when(F.col("event") == "REBALANCE_JOINED", F.col("ts"))).alias("joined"),
        F.min(F.when(F.col("event") == "REBALANCE_SYNCED", F.col("ts"))).alias("synced"),
        F.min(F.when(F.col("event") == "LEADER_ASSIGNMENT_DONE", F.col("ts"))).alias("leader_assignment"),
        F.min(F.struct("ts", "line_no", "source")).alias("_first"),
    )
    per_generation = Window.partitionBy("group_id", "generation")
    g = g.withColumn("members", F.count(F.lit(1)).over(per_generation).cast("int"))
    g = g.withColumn("protocol", F.lit("classic"))
    g = g.withColumn("source", F.col("_first.source")).withColumn("line_no", F.col("_first.line_no"))
    return _conform(g, "generations")


# --------------------------------------------------------------------------- state machines


def _intervals(ev: DataFrame, key: list[str], run_end: DataFrame) -> DataFrame:
    """Each state lasts until the next transition of the same machine, or the end of its run."""
    w = Window.partitionBy(*key).orderBy("ts", "line_no")
    ev = ev.withColumn("end", F.lead("ts").over(w))
    ev = ev.join(run_end, ["host", "run_id"], "left")
    return ev.withColumn("end", F.coalesce("end", "run_end"))


def state_intervals(events: DataFrame, runs: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(thread_states, client_states) from ``State transition from X to Y`` lines."""
    run_end = runs.select("host", "run_id", F.col("end").alias("run_end"))
    base = events.where(_is(("THREAD_STATE", "CLIENT_STATE", "GLOBAL_THREAD_STATE")) & F.col("to_state").isNotNull())
    base = base.select(
        "host", "run_id", "ts", "source", "line_no", "from_state", F.col("to_state").alias("state"),
        F.when(F.col("event") == "CLIENT_STATE", F.lit("client"))
        .when(F.col("event") == "GLOBAL_THREAD_STATE", F.lit("global")).otherwise(F.lit("thread")).alias("kind"),
        F.coalesce(F.when(F.col("event") == "CLIENT_STATE", F.col("client_id")), F.col("stream_thread"),
                   F.col("thread")).alias("thread"),
    )
    iv = _intervals(base, ["host", "run_id", "kind", "thread"], run_end).withColumnRenamed("ts", "start")
    return (_conform(iv.where(F.col("kind") != "client"), "thread_states"),
            _conform(iv.where(F.col("kind") == "client"), "client_states"))


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


def task_lifecycles(events: DataFrame, runs: DataFrame) -> DataFrame:
    """Task phases per host/thread (active and standby), from task lines and assignment summaries."""
    mapping = F.create_map(*[x for k, v in TASK_PHASES.items() for x in (F.lit(k), F.lit(v))])
    role = F.lower(F.coalesce(F.col("task_role"), F.lit("active")))
    role = F.when(role.isin("standby", "standby-task"), F.lit("standby")).otherwise(F.lit("active"))
    # "Stateful active task 0_1 completed restoration" is per task; changelog RESTORE_END lines are not.
    phased = events.where(F.col("task_id").isNotNull() & F.col("event").isin(list(TASK_PHASES))).select(
        "host", "run_id", "stream_thread", "task_id", role.alias("role"),
        mapping[F.col("event")].alias("phase"), "ts", "event", "source", "line_no",
    )
    assigned_parts = []
    summaries = events.where(F.col("event") == "ASSIGNMENT_APPLIED")
    for pattern, list_role in _ASSIGNED_LISTS.items():
        ids = F.split(F.regexp_extract("message", pattern, 1), r",\s*")
        assigned_parts.append(
            summaries.where(F.col("message").rlike(pattern)).select(
                "host", "run_id", "stream_thread", F.explode(ids).alias("task_id"), F.lit(list_role).alias("role"),
                F.lit("assigned").alias("phase"), "ts", "event", "source", "line_no",
            ).where(F.col("task_id") != "")
        )
    rows = reduce(DataFrame.unionByName, assigned_parts, phased)
    run_end = runs.select("host", "run_id", F.col("end").alias("run_end"))
    iv = _intervals(rows, ["host", "run_id", "stream_thread", "task_id", "role"], run_end)
    closed = F.col("phase").isin("closed-clean", "closed-dirty", "recycled", "migrated")
    iv = iv.withColumn("end", F.when(closed, F.col("ts")).otherwise(F.col("end")))
    return _conform(iv.withColumnRenamed("ts", "start"), "task_lifecycles")


# --------------------------------------------------------------------------- locks


def locks(events: DataFrame, lifecycles: DataFrame) -> DataFrame:
    """Lock evidence per task, and for each failed attempt: who held the task, until when.

    The holder is another thread of the same process that owned the task at that moment (from
    the task lifecycles); the release is that thread's next close/suspend/recycle of the task;
    the hand-off latency is release → the waiting thread's next phase for the task.
    """
    kind = (F.when(_is("LOCK_FAILED"), F.lit("failed")).when(_is("LOCK_ACQUIRED"), F.lit("acquired"))
            .when(_is("LOCK_RELEASED"), F.lit("released")))
    role = F.when(F.lower(F.coalesce("task_role", F.lit(""))).contains("standby"), F.lit("standby")).otherwise(F.lit("active"))
    lk = events.where(kind.isNotNull() & F.col("task_id").isNotNull()).select(
        "host", "run_id", "task_id", kind.alias("kind"), "ts",
        F.coalesce("stream_thread", "thread").alias("thread"), role.alias("role"), "source", "line_no",
    )
    failed = lk.where(F.col("kind") == "failed").alias("f")
    owner = lifecycles.where(~F.col("phase").isin("closed-clean", "closed-dirty")).alias("o")
    cond = ((F.col("f.host") == F.col("o.host")) & (F.col("f.run_id") == F.col("o.run_id"))
            & (F.col("f.task_id") == F.col("o.task_id")) & (F.col("o.stream_thread") != F.col("f.thread"))
            & (F.col("o.start") <= F.col("f.ts")) & (F.coalesce(F.col("o.end"), F.col("f.ts")) >= F.col("f.ts")))
    holders = failed.join(owner, cond, "left").groupBy(
        "f.host", "f.run_id", "f.task_id", "f.ts", "f.thread", "f.source", "f.line_no").agg(
        F.max(F.struct(F.col("o.start").alias("since"), F.col("o.stream_thread").alias("holder"))).alias("_h"))
    holders = holders.select("host", "run_id", "task_id", "ts", "thread", "source", "line_no",
                             F.col("_h.holder").alias("holder_thread"), F.col("_h.since").alias("holder_since"))
    # Release: the holder's next closing phase of the task; acquisition: the waiter's next phase.
    lc = lifecycles.alias("l")
    h = holders.alias("h")
    release = h.join(lc, (F.col("h.host") == F.col("l.host")) & (F.col("h.run_id") == F.col("l.run_id"))
                     & (F.col("h.task_id") == F.col("l.task_id")) & (F.col("l.stream_thread") == F.col("h.holder_thread"))
                     & F.col("l.phase").isin("closed-clean", "closed-dirty", "suspended", "recycled", "migrated")
                     & (F.col("l.start") >= F.col("h.ts")), "left").groupBy(
        "h.host", "h.run_id", "h.task_id", "h.ts", "h.thread").agg(F.min("l.start").alias("released"))
    acquire = h.join(lc, (F.col("h.host") == F.col("l.host")) & (F.col("h.run_id") == F.col("l.run_id"))
                     & (F.col("h.task_id") == F.col("l.task_id")) & (F.col("l.stream_thread") == F.col("h.thread"))
                     & (F.col("l.start") > F.col("h.ts")) & ~F.col("l.phase").isin("assigned", "created"), "left").groupBy(
        "h.host", "h.run_id", "h.task_id", "h.ts", "h.thread").agg(F.min("l.start").alias("acquired"))
    keys = ["host", "run_id", "task_id", "ts", "thread"]
    detail = holders.join(release, keys, "left").join(acquire, keys, "left")
    detail = detail.withColumn(
        "handoff_ms", (F.unix_millis("acquired") - F.unix_millis("released")))
    out = lk.join(detail.select(*keys, "holder_thread", "holder_since", "released", "handoff_ms"), keys, "left")
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
    mapping = F.create_map(*[x for k, v in CHECKPOINT_KINDS.items() for x in (F.lit(k), F.lit(v))])
    logs = _explode_partitions(events.where(F.col("event").isin(list(CHECKPOINT_KINDS))
                                            & (F.col("product") != "nifi")))
    # OffsetCheckpoint's TRACE lines name only the file: <state.dir>/<app>/<task>/.checkpoint(.tmp).
    task_from_path = F.nullif(F.regexp_extract(F.col("message"), _CHECKPOINT_PATH_TASK, 1), F.lit(""))
    logs = logs.select(
        "host", "app_id", F.coalesce(F.col("task_id"), task_from_path).alias("task_id"), "store", "topic", "partition",
        "ts", mapping[F.col("event")].alias("kind"),
        "offset", F.lit("log").alias("origin"), "run_id", "event", "source", "line_no",
    )
    cap = state.checkpoints
    capture = cap.where(F.col("file_kind").isin("checkpoint", "store_checkpoint") | F.col("file_kind").isNull()).select(
        "host", "app_id", "task_id", "store", "topic", "partition",
        F.col("file_mtime").alias("ts"), F.when(F.col("problem").isNotNull(), F.lit("corrupt")).otherwise(F.lit("file")).alias("kind"),
        "offset", F.lit("capture").alias("origin"), "file_mtime", "capture_time", "problem", "source",
    ) if "file_kind" in cap.columns else cap.limit(0)
    return _conform(logs, "checkpoints").unionByName(_conform(capture, "checkpoints"))


# --------------------------------------------------------------------------- restorations

_RESTORE_EVENTS = ("RESTORE_START", "RESTORE_TARGET", "RESTORE_END", "CHECKPOINT_READ", "CHECKPOINT_MISSING",
                   "CHECKPOINT_NONE", "OFFSET_RESET")


def restorations(events: DataFrame) -> DataFrame:
    """Restoration episodes per host/changelog partition: start, end, offsets, records, from scratch or not.

    An episode runs from the first restore-related line of a partition (checkpoint read or
    missing, restore start, end offset) to its ``Finished restoring`` line; an episode without an
    end line is reported with ``completed = false`` (a restore that never ran or never finished).
    Under 2.6+ semantics a checkpoint holds the last applied offset, so restoration starts at +1.
    """
    ev = events.where(_is(_RESTORE_EVENTS) & (F.col("product") != "nifi"))
    ev = _explode_partitions(ev).where(F.col("topic").isNotNull() & F.col("partition").isNotNull())
    # Restore-consumer offset resets concern changelogs only when a restore is under way; keep them
    # but let them neither open nor close an episode on their own.
    ev = ev.withColumn("_is_end", (F.col("event") == "RESTORE_END").cast("int"))
    w = Window.partitionBy("host", "run_id", "topic", "partition").orderBy("ts", "line_no")
    ends_before = F.coalesce(F.sum("_is_end").over(w.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0))
    ev = ev.withColumn("_ends_before", ends_before)
    # Before 2.6 there is no end line: a second checkpoint read/miss after the last end opens a new episode.
    is_open = F.col("event").isin("CHECKPOINT_READ", "CHECKPOINT_MISSING", "CHECKPOINT_NONE").cast("int")
    since_end = Window.partitionBy("host", "run_id", "topic", "partition", "_ends_before").orderBy("ts", "line_no")
    ev = ev.withColumn("_opens", F.sum(is_open).over(since_end.rowsBetween(Window.unboundedPreceding, 0)))
    ev = ev.withColumn("_reopen", ((is_open == 1) & (F.col("_opens") > 1)).cast("int"))
    ev = ev.withColumn("_episode", F.col("_ends_before") * 100000
                       + F.sum("_reopen").over(w.rowsBetween(Window.unboundedPreceding, 0)))
    from_scratch_line = (F.col("event").isin("CHECKPOINT_MISSING", "CHECKPOINT_NONE")
                         | (F.col("event") == "RESTORE_START") & F.col("message").rlike("(?i)from (the )?beginning")
                         | (F.col("event") == "OFFSET_RESET") & (F.col("offset") == 0))
    g = ev.groupBy("host", "run_id", "topic", "partition", "_episode").agg(
        F.min("ts").alias("start"),
        F.max(F.when(F.col("_is_end") == 1, F.col("ts"))).alias("end"),
        F.first("task_id", ignorenulls=True).alias("task_id"),
        F.first("store", ignorenulls=True).alias("store"),
        F.first("stream_thread", ignorenulls=True).alias("stream_thread"),
        F.first(F.when(F.col("event") == "CHECKPOINT_READ", F.col("offset")), ignorenulls=True).alias("_ckpt"),
        F.first(F.when(F.col("event") == "RESTORE_START", F.col("offset")), ignorenulls=True).alias("_start_off"),
        F.max(F.when(F.col("event").isin("RESTORE_TARGET", "RESTORE_START"), F.col("end_offset"))).alias("end_offset"),
        F.max(F.when(F.col("_is_end") == 1, F.col("records"))).alias("records"),
        F.max(from_scratch_line.cast("int")).alias("_scratch"),
        F.max("_is_end").alias("_done"),
        F.min(F.struct("ts", "line_no", "source")).alias("_first"),
        F.max(F.when(F.col("_is_end") == 1, F.struct("ts", "line_no", "source"))).alias("_last"),
        F.max(F.col("event").isin("RESTORE_START", "RESTORE_TARGET", "CHECKPOINT_READ", "CHECKPOINT_MISSING",
                                  "CHECKPOINT_NONE").cast("int")).alias("_has_opening"),
    )
    g = g.where(F.col("_has_opening") == 1)
    start_offset = F.coalesce(F.col("_start_off"), F.col("_ckpt") + 1, F.when(F.col("_scratch") == 1, F.lit(0)))
    g = g.select(
        "*", start_offset.alias("start_offset"),
        (F.col("_scratch") == 1).alias("from_scratch"), (F.col("_done") == 1).alias("completed"),
        F.col("_first.source").alias("start_source"), F.col("_first.line_no").alias("start_line_no"),
        F.coalesce(F.col("_last.source"), F.col("_first.source")).alias("source"),
        F.coalesce(F.col("_last.line_no"), F.col("_first.line_no")).alias("line_no"),
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
    reason: Column = F.lit(None).cast("string")
    for pattern, name in reversed(_WIPE_REASONS):
        reason = F.when(F.col("message").rlike(pattern), F.lit(name)).otherwise(reason)
    reason = (F.when(F.col("event") == "DIR_CLEANED", F.lit("cleaner"))
              .when(F.col("event") == "DIR_CLEANED_USER", F.lit("user-cleanup"))
              .when(F.col("event") == "DIR_PURGED_STARTUP", F.lit("startup-purge"))
              .otherwise(F.coalesce(reason, F.lit("other"))))
    w = events.where(_is(("STATE_WIPED", "DIR_CLEANED", "DIR_CLEANED_USER", "DIR_PURGED_STARTUP")))
    return _conform(w.select("*", reason.alias("reason")), "wipes")


#: Task lists of assignment summaries that say what a thread holds after the rebalance.
_HELD_LISTS = (*_ASSIGNED_LISTS, r"Existing active tasks: \[([^\]]*)\]", r"Existing standby tasks: \[([^\]]*)\]")


def _held_by_summaries(events: DataFrame) -> DataFrame:
    """Per assignment summary (host, run, thread, ts): every task the thread holds after it."""
    summaries = events.where(F.col("event") == "ASSIGNMENT_APPLIED").select(
        "host", "run_id", "stream_thread", "ts", "message")
    lists = [F.split(F.regexp_extract("message", pattern, 1), r",\s*") for pattern in _HELD_LISTS]
    held = F.array_distinct(F.filter(F.flatten(F.array(*lists)), lambda t: t != ""))
    return summaries.select("host", "run_id", "stream_thread", "ts", held.alias("held"))


def dir_cleanups(events: DataFrame, lifecycles: DataFrame) -> DataFrame:
    """Cleaner deletions, each with the task's last owner on that host and whether it was still assigned.

    Where the run logs assignment summaries, they decide: the task is assigned when the latest summary
    of some thread before the deletion lists it, and it left the host at the first summary after the
    last one that listed it (a close of an unassigned task is often DEBUG only). Otherwise the task
    lifecycles decide.
    """
    cleaned = events.where(F.col("event") == "DIR_CLEANED").select(
        "host", "run_id", "task_id", "ts", F.col("duration_ms").alias("age_ms"), F.col("limit_ms").alias("delay_ms"),
        "source", "line_no").alias("c")
    lc = lifecycles.alias("l")
    joined = cleaned.join(lc, (F.col("c.host") == F.col("l.host")) & (F.col("c.task_id") == F.col("l.task_id"))
                          & (F.col("l.start") <= F.col("c.ts")), "left")
    last = joined.groupBy("c.host", "c.run_id", "c.task_id", "c.ts", "c.age_ms", "c.delay_ms", "c.source", "c.line_no").agg(
        F.max(F.struct(F.col("l.start"), F.col("l.stream_thread"), F.col("l.role"), F.col("l.end"), F.col("l.phase"))).alias("_o"))
    assigned = (~F.col("_o.phase").isin("closed-clean", "closed-dirty", "recycled", "migrated")
                & (F.col("_o.end").isNull() | (F.col("_o.end") >= F.col("ts"))))
    out = last.select("*", F.col("_o.stream_thread").alias("last_owner_thread"), F.col("_o.role").alias("last_owner_role"),
                      F.col("_o.end").alias("_lc_until"), F.coalesce(assigned, F.lit(False)).alias("_lc_assigned"))
    # What the assignment summaries of the same run say.
    held = _held_by_summaries(events).withColumnRenamed("ts", "s_ts")
    keys = ["host", "run_id", "task_id", "ts"]
    with_s = out.select(*keys).join(held, ["host", "run_id"]).where(F.col("s_ts") <= F.col("ts"))
    latest = with_s.groupBy(*keys, "stream_thread").agg(F.max_by("held", "s_ts").alias("latest_held"))
    by_summary = latest.groupBy(*keys).agg(
        F.max(F.array_contains("latest_held", F.col("task_id")).cast("int")).alias("_s_assigned"))
    listed = with_s.where(F.array_contains("held", F.col("task_id"))).groupBy(*keys).agg(
        F.max("s_ts").alias("_last_listed"))
    left = with_s.join(listed, keys).where(F.col("s_ts") > F.col("_last_listed")).groupBy(*keys).agg(
        F.min("s_ts").alias("_left_at"))
    out = out.join(by_summary, keys, "left").join(left, keys, "left")
    out = out.withColumn("assigned_at_the_time", F.when(F.col("_s_assigned").isNotNull(), F.col("_s_assigned") == 1)
                         .otherwise(F.col("_lc_assigned")))
    out = out.withColumn("last_owner_until", F.when(F.col("_s_assigned") == 1, F.lit(None).cast("timestamp"))
                         .otherwise(F.coalesce(F.col("_left_at"), F.col("_lc_until"))))
    return _conform(out, "dir_cleanups")


# --------------------------------------------------------------------------- NiFi

_MIGRATION_EVENTS = (
    "CHECKPOINT_TABLE_SCHEMA_DETECTED", "CHECKPOINT_TABLE_EXISTS", "CHECKPOINT_TABLE_CREATE_REQUESTED",
    "CHECKPOINT_TABLE_ACTIVE", "CHECKPOINT_TABLE_DELETED", "CHECKPOINT_TABLE_DELETE_CONFIRMED",
    "MIGRATION_TABLE_CREATE_REQUESTED", "MIGRATION_TABLE_DELETED", "MIGRATION_COPY_STARTED",
    "MIGRATION_COPY_COMPLETED", "MIGRATION_DETECTED_LEGACY", "MIGRATION_SCAN_STARTED", "MIGRATION_SCAN_COMPLETED",
    "MIGRATION_LOCK_ACQUIRED", "RENAME_LOCK_ACQUIRED", "RENAME_OBSERVED_COMPLETE", "LINGERING_MIGRATION_DELETED",
    "LINGERING_MIGRATION_RECOPY", "ORPHANED_MIGRATION_FOUND", "CHECKPOINT_TABLE_IN_USE", "MIGRATION_ITEM_SKIPPED",
)


def nifi_processor_events(events: DataFrame) -> DataFrame:
    """NiFi process and processor lifecycle: starts, failures (with the exception class), stops."""
    ev = events.where((F.col("product") == "nifi")
                      & (F.col("event").startswith("PROCESSOR_") | F.col("event").startswith("NIFI_")))
    return _conform(ev.withColumn("detail", _first_line()), "nifi_processor_events")


def migration_steps(events: DataFrame, state: StateFacts) -> DataFrame:
    """Checkpoint-table migration steps per table, from NiFi lines and CloudTrail records."""
    logs = events.where((F.col("product") == "nifi") & F.col("event").isin(list(_MIGRATION_EVENTS))
                        & F.col("table").isNotNull()).select(
        "table", "ts", F.col("event").alias("step"), F.lit("log").alias("origin"), "host",
        F.lit(None).cast("string").alias("error_code"), _first_line().alias("detail"), "source", "line_no")
    # The copy failure has no line of its own: the start failure whose cause names DynamoDB stands for it.
    failed = events.where((F.col("event") == "PROCESSOR_START_FAILED")
                          & F.col("message").contains("DynamoDb")).select(
        F.col("table"), "ts", F.lit("PROCESSOR_START_FAILED").alias("step"), F.lit("log").alias("origin"), "host",
        F.col("error_class").alias("error_code"), _first_line().alias("detail"), "source", "line_no")
    ct = state.cloudtrail
    trail = ct.where(F.col("table").isNotNull()).select(
        "table", F.col("time").alias("ts"), F.coalesce("event", F.concat(F.lit("CLOUDTRAIL_"), F.upper("event_name"))).alias("step"),
        F.lit("cloudtrail").alias("origin"), "host", "error_code",
        F.concat_ws(" ", "event_name", "error_code", "error_message").alias("detail"), "source", "line_no",
        F.coalesce(*[F.col(c) for c in ("source_ip", "user_arn") if c in ct.columns], F.lit(None).cast("string"))
        .alias("actor"),
    ) if "event_name" in ct.columns else ct.limit(0)
    steps = _conform(logs.unionByName(failed).withColumn("base_table", F.regexp_replace("table", "_migration$", "")),
                     "migration_steps")
    if "event_name" in ct.columns:
        steps = steps.unionByName(_conform(trail.withColumn("base_table", F.regexp_replace("table", "_migration$", "")),
                                           "migration_steps"))
    return steps


# --------------------------------------------------------------------------- clock skew


def clock_skew(gens: DataFrame) -> DataFrame:
    """Per-host clock offset from moments every member logs together (join/sync of a generation).

    All members of a generation receive the JoinGroup (and SyncGroup) response from the
    coordinator within milliseconds, so the median difference of those times between a host and
    the reference host (the one present in most generations) estimates the host's clock offset.
    """
    moments = gens.select("group_id", "generation", "host", F.col("joined").alias("t"), F.lit("join").alias("m")).unionByName(
        gens.select("group_id", "generation", "host", F.col("synced").alias("t"), F.lit("sync").alias("m"))
    ).where(F.col("t").isNotNull())
    # One time per host, generation and moment kind (several threads of one host agree closely).
    moments = moments.groupBy("group_id", "generation", "m", "host").agg(F.min("t").alias("t"))
    hosts = moments.groupBy("host").agg(F.countDistinct("group_id", "generation").alias("n"))
    ref = hosts.orderBy(F.desc("n"), "host").limit(1).select(F.col("host").alias("reference_host"))
    ref_times = moments.join(ref, moments.host == ref.reference_host).select(
        "group_id", "generation", "m", "reference_host", F.col("t").alias("t_ref"))
    diffs = moments.join(ref_times, ["group_id", "generation", "m"]).select(
        "host", "reference_host", (F.unix_millis("t") - F.unix_millis("t_ref")).alias("d"))
    skew = diffs.groupBy("host", "reference_host").agg(
        F.percentile_approx("d", 0.5).alias("offset_ms"), F.count(F.lit(1)).cast("int").alias("samples"),
        (F.max("d") - F.min("d")).alias("spread_ms"))
    confidence = (F.when(F.col("host") == F.col("reference_host"), F.lit("reference"))
                  .when((F.col("samples") >= 4) & (F.col("spread_ms") <= 200), F.lit("high"))
                  .when((F.col("samples") >= 2) & (F.col("spread_ms") <= 1000), F.lit("medium"))
                  .otherwise(F.lit("low")))
    skew = skew.withColumn("confidence", confidence).withColumn("method", F.lit("generation join/sync"))
    return _conform(skew, "clock_skew")


# --------------------------------------------------------------------------- assembly


def config_with_runs(events: DataFrame, config: DataFrame | None) -> DataFrame | None:
    """Config rows with the ``run_id`` of their dump: a config dump belongs to the run of its own line."""
    if config is None or "run_id" in config.columns:
        return config
    dumps = events.select("source", "line_no", "run_id")
    return config.join(dumps, ["source", "line_no"], "left")


def build(events: DataFrame, state: StateFacts, config: DataFrame | None = None,
          run_bounds: DataFrame | None = None) -> Timeline:
    """All tables; each is a lazy DataFrame (``Timeline.write`` or a detector triggers the work).

    ``events`` are run-tagged (:func:`toolkit.events.tag_runs`). ``run_bounds``
    (:func:`toolkit.events.run_bounds` of the records) places each run's end at its last line of any
    kind; without it the last classified event ends the run.
    """
    if "run_id" not in events.columns:
        raise ValueError("events must carry run_no and run_id (toolkit.events.tag_runs) before the timeline is built")
    spark = events.sparkSession
    config = config_with_runs(events, config)
    runs = process_runs(events, config, run_bounds)
    lifecycles = task_lifecycles(events, runs)
    thread_states, client_states = state_intervals(events, runs)
    gens = generations(events)
    return Timeline(
        events=events,
        config=config if config is not None else spark.createDataFrame([], "host string, run_id string, key string, value string"),
        state=state,
        process_runs=runs,
        generations=gens,
        thread_states=thread_states,
        client_states=client_states,
        task_lifecycles=lifecycles,
        locks=locks(events, lifecycles),
        checkpoints=checkpoints(events, state),
        restorations=restorations(events),
        wipes=wipes(events),
        dir_cleanups=dir_cleanups(events, lifecycles),
        nifi_processor_events=nifi_processor_events(events),
        migration_steps=migration_steps(events, state),
        clock_skew=clock_skew(gens),
    )
