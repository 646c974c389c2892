"""Process runs, versions, consumer-group generations, thread and client state intervals and clock skew: the
tables about hosts and their runs (``process_runs``, ``generations``, ``thread_states``, ``client_states``,
``clock_skew``).

Pure DataFrame transformations, SQL text where it can be (see :mod:`toolkit.timeline.build`).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from toolkit.events.runs import nifi_bootstrap_condition
from toolkit.events.versions import KNOWN_LINES, template_version_map
from toolkit.sqltext import earliest, sql_list, sql_str
from toolkit.timeline.sql import FIRST_LINE, _conform, _exprs, _is, quoted

# --------------------------------------------------------------------------- process runs

CLEAN_STOP = ("CLIENT_STOPPED", "NIFI_SHUTDOWN_COMPLETE", "NIFI_PROCESS_EXITED")
ERROR_STOP = ("CLIENT_ERROR", "APP_SHUTDOWN_REQUESTED", "NIFI_START_FAILED")
#: A thread died of an exception: the run ended in an error unless it still closed cleanly afterwards
#: (REPLACE_THREAD, or the other threads kept going).
THREAD_DIED = ("UNCAUGHT_EXCEPTION",)
_ROTATION_INDEX = r"\.(\d+)(?:\.gz)?$"
_ERROR_WORD = r"\bERROR\b"

#: Per-run settings read from the configuration dump: (key, column, SQL type).
RUN_SETTINGS = (
    ("processing.guarantee", "guarantee", "string"), ("commit.interval.ms", "commit_interval_ms", "bigint"),
    ("num.standby.replicas", "num_standby_replicas", "int"), ("num.stream.threads", "num_stream_threads", "int"),
    ("state.dir", "state_dir", "string"), ("state.cleanup.delay.ms", "state_cleanup_delay_ms", "bigint"),
    ("group.instance.id", "group_instance_id", "string"), ("application.id", "_config_app_id", "string"),
)


def _rotation(source: str) -> tuple[str, str]:
    """SQL: (file name without its rotation index, the index: 0 for the live file, n for ``app.log.n[.gz]``)."""
    inner = f"regexp_replace({source}, '^.*!/', '')"
    digits = f"regexp_extract({inner}, {sql_str(_ROTATION_INDEX)}, 1)"
    index = f"CASE WHEN {digits} = '' THEN 0 ELSE CAST({digits} AS INT) END"
    return f"regexp_replace({inner}, {sql_str(_ROTATION_INDEX)}, '')", index


def _run_settings(config: DataFrame) -> DataFrame:
    """Per run: the first value of each key of :data:`RUN_SETTINGS` in its configuration dump (one aggregation)."""
    keys = [key for key, _, _ in RUN_SETTINGS]
    return config.where(f"key IN ({sql_list(keys)})").groupBy("run_id").agg(*_exprs(*[
        f"{earliest(f'CASE WHEN key = {sql_str(key)} THEN value END')} AS {col}" for key, col, _ in RUN_SETTINGS
    ]))


def run_spans(events: DataFrame, bounds: DataFrame | None = None) -> DataFrame:
    """Per process run and host: the aggregate of its events, its bounds (see :func:`process_runs`), ``start``
    and ``end``.

    :func:`process_runs` is built on it; the other tables need only each run's end and take it from here,
    so their plans stay small (no version or configuration lookups in them).
    """
    to_not_running = "(event = 'CLIENT_STATE' AND to_state = 'NOT_RUNNING')"
    to_error = "(event = 'CLIENT_STATE' AND to_state IN ('ERROR', 'PENDING_ERROR'))"
    stopped_in_error = f"({_is('CLIENT_STOPPED')} AND coalesce(message RLIKE {sql_str(_ERROR_WORD)}, false))"
    clean = f"(({_is(CLEAN_STOP)} AND NOT {stopped_in_error}) OR {to_not_running})"
    error = f"({_is(ERROR_STOP)} OR {to_error} OR {stopped_in_error})"
    died = _is(THREAD_DIED)
    evidence = f"struct(ts, line_no, source, {FIRST_LINE} AS text)"
    banner = f"struct(version, source, line_no, {FIRST_LINE} AS text)"
    app_banner = f"CASE WHEN event = 'APP_START' AND version IS NOT NULL THEN {banner} END"
    nifi_banner = f"CASE WHEN event IN ('NIFI_STARTING', 'NIFI_STARTED') AND version IS NOT NULL THEN {banner} END"
    ev = events.where("run_no IS NOT NULL AND host IS NOT NULL").selectExpr(
        "*", f"{evidence} AS _evidence",
        # The bootstrap's lines speak about the application's run (launch, termination) but are not part of it.
        f"NOT {nifi_bootstrap_condition(events.columns)} AS _app")
    runs = ev.groupBy("host", "run_id", "run_no").agg(*_exprs(
        # A Streams run also logs Kafka client lines; name the run after the richer product.
        "max(struct(CASE WHEN product = 'kafka-client' THEN 0 ELSE 1 END, product)) AS _product",
        f"{earliest('app_id')} AS app_id",
        f"{earliest('client_id')} AS client_id",
        f"{earliest('process_id')} AS process_id",
        f"{earliest(app_banner)} AS _banner",
        f"{earliest(nifi_banner)} AS _nifi_banner",
        "coalesce(min(CASE WHEN _app THEN ts END), min(ts)) AS _ev_start",
        f"coalesce(max(CASE WHEN _app THEN {evidence} END), max({evidence})) AS _ev_last",
        f"max(CASE WHEN {clean} THEN _evidence END) AS _clean",
        f"max(CASE WHEN {error} THEN _evidence END) AS _error",
        f"max(CASE WHEN {died} THEN _evidence END) AS _died",
        "coalesce(min(CASE WHEN _app THEN struct(ts, line_no, source) END), min(struct(ts, line_no, source))) AS _first",
    ))
    if bounds is not None:
        runs = runs.join(bounds.select("host", "run_no", "first_ts", "first_source", "last_ts", "last_source",
                                       "last_line_no", "last_text", "last_of_file"), ["host", "run_no"], "left")
    else:
        runs = runs.selectExpr(
            "*", "CAST(NULL AS timestamp_ltz) AS first_ts", "_first.source AS first_source",
            "CAST(NULL AS timestamp_ltz) AS last_ts", "CAST(NULL AS STRING) AS last_source",
            "CAST(NULL AS BIGINT) AS last_line_no", "CAST(NULL AS STRING) AS last_text",
            "CAST(NULL AS BOOLEAN) AS last_of_file")
    last_is_bound = "(last_ts IS NOT NULL AND last_ts >= _ev_last.ts)"
    return runs.selectExpr(
        "*", "least(_ev_start, first_ts) AS start", "greatest(_ev_last.ts, last_ts) AS `end`",
        f"CASE WHEN {last_is_bound} THEN last_source ELSE _ev_last.source END AS _last_source",
        f"CASE WHEN {last_is_bound} THEN last_line_no ELSE _ev_last.line_no END AS _last_line",
        f"CASE WHEN {last_is_bound} THEN last_text ELSE _ev_last.text END AS _last_text")


def process_runs(events: DataFrame, config: DataFrame | None, bounds: DataFrame | None = None, *,
                 spans: DataFrame | None = None) -> DataFrame:
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
    ``spans``: :func:`run_spans` of the same events and bounds, when the caller already has it.
    """
    runs = spans if spans is not None else run_spans(events, bounds)
    runs = runs.join(version_ranges(events), "run_id", "left").selectExpr(
        "*", "_product.product AS product",
        "coalesce(_banner, _nifi_banner) AS _run_banner",
        "lead(first_source) OVER (PARTITION BY host ORDER BY run_no) AS _next_source",
        "lead(run_no) OVER (PARTITION BY host ORDER BY run_no) IS NOT NULL AS _has_next",
    )
    runs = runs.selectExpr(
        "*", "_run_banner.version AS version",
        "CASE WHEN _run_banner IS NOT NULL THEN concat('banner \\'', _run_banner.text, '\\' at ', _run_banner.source,"
        " ':', CAST(_run_banner.line_no AS STRING)) ELSE _range_evidence END AS version_evidence")
    # The run's file ends and the next run begins in a later rotated file, with one missing in between:
    # the end of this run was not collected.
    this_file, this_index = _rotation("_last_source")
    next_file, next_index = _rotation("_next_source")
    gap_in_rotation = (f"(coalesce(last_of_file, false) AND {this_file} = {next_file}"
                       f" AND {this_index} - {next_index} > 1)")
    clean_after_death = "(_clean IS NOT NULL AND (_died IS NULL OR _clean.ts >= _died.ts))"
    runs = runs.selectExpr(
        "*",
        f"CASE WHEN _error IS NOT NULL THEN 'error' WHEN {clean_after_death} THEN 'clean'"
        f" WHEN _died IS NOT NULL THEN 'error' WHEN _has_next AND NOT coalesce({gap_in_rotation}, false) THEN 'crash'"
        " ELSE 'unknown' END AS end_kind",
        f"CASE WHEN _error IS NOT NULL THEN _error WHEN {clean_after_death} THEN _clean"
        " WHEN _died IS NOT NULL THEN _died END AS _end_ev",
        "_first.source AS source", "_first.line_no AS line_no",
    )
    runs = runs.selectExpr(
        "*", "coalesce(_end_ev.text, CASE WHEN end_kind = 'crash' THEN _last_text END) AS end_evidence",
        "coalesce(_end_ev.source, _last_source) AS end_source",
        "coalesce(_end_ev.line_no, _last_line) AS end_line_no",
    )
    if config is not None:
        runs = runs.join(_run_settings(config), "run_id", "left").withColumns(
            {col: F.expr(f"try_cast({col} AS {cast})") for _, col, cast in RUN_SETTINGS})
        runs = runs.withColumn("app_id", F.expr("coalesce(_config_app_id, app_id)"))
    # Without configuration dumps (config is optional input) the run's settings are unknown: typed nulls.
    unknown = () if config is not None else tuple(col for _, col, _ in RUN_SETTINGS if not col.startswith("_"))
    return _conform(runs, "process_runs", absent=unknown)


# --------------------------------------------------------------------------- versions


def _key_text(key: str) -> str:
    return f"concat_ws('.', CAST(CAST({key} / 100 AS INT) AS STRING), CAST({key} % 100 AS STRING))"


def version_ranges(events: DataFrame) -> DataFrame:
    """Per run: the release lines most of the templates seen in it were printed by, and the evidence.

    Each template records the versions that print it; every known minor line gets one vote per
    distinct template of the run that covers it, and the range is the span of the lines with the
    most votes (a template whose range is recorded too narrowly, or a line from another
    application version, cannot make the range empty). The range reads ``4.1-4.1`` for one line,
    ``2.0-2.1`` for two; never open-ended, never empty.

    One shuffle: each run's distinct templates are collected, their version facts gathered per run, and
    the votes are counted over that small array (a run has at most a few hundred distinct templates).
    """
    facts = template_version_map()
    lines = "map(" + ", ".join(f"{sql_str(family)}, array({', '.join(str(major * 100 + minor) for major, minor in known)})"
                               for family, known in KNOWN_LINES.items()) + ")"
    ids = events.where("run_no IS NOT NULL").groupBy("run_id").agg(F.expr("collect_set(template_id) AS _ids"))
    # Templates without version facts do not vote. The facts, and the number of templates of each family,
    # come from a second aggregation (on the first one's partitioning: no shuffle) rather than from
    # expressions over the array: the optimizer copies such an expression into each lambda below that
    # reads it, where every copy would look every id up again, per line and per template.
    found = ids.selectExpr("run_id", "explode(_ids) AS id").selectExpr(
        "run_id", "id", f"split({facts}[id], '/') AS v").where("v IS NOT NULL")
    per_run = found.groupBy("run_id").agg(
        F.expr("collect_list(named_struct('id', id, 'v', named_struct('family', v[0], 'lo', CAST(v[1] AS INT),"
               " 'hi', CAST(v[2] AS INT)))) AS _templates"),
        *[F.expr(f"count_if(v[0] = {sql_str(family)}) AS {quoted('_n_' + family)}") for family in KNOWN_LINES])
    # The product's own templates decide (Kafka client lines share the Kafka version): the family most of
    # the run's templates belong to, ties broken by name (a family without templates never wins: the run
    # has at least one).
    most = ", ".join(f"named_struct('fewer', -{quoted('_n_' + family)}, 'family', {sql_str(family)})"
                     for family in KNOWN_LINES)
    per_run = per_run.selectExpr("run_id", "_templates", f"array_min(array({most})).family AS _family")
    # Each known line of that family, with the templates that cover it (lines nobody covers are left out).
    per_run = per_run.selectExpr(
        "run_id", f"filter(transform({lines}[_family], line -> named_struct('line', line, 'voters',"
                  " filter(_templates, t -> t.v.family = _family AND line BETWEEN t.v.lo AND t.v.hi))),"
                  " p -> size(p.voters) > 0) AS _lines")
    per_run = per_run.where("size(_lines) > 0").selectExpr(
        "run_id", "_lines", "array_max(transform(_lines, p -> size(p.voters))) AS votes")
    best = per_run.selectExpr("run_id", "votes", "filter(_lines, p -> size(p.voters) = votes) AS _best")
    best = best.selectExpr("run_id", "votes", "_best", "array_min(transform(_best, p -> p.line)) AS lo",
                           "array_max(transform(_best, p -> p.line)) AS hi")
    # Ties broken by template id, so the evidence reads the same on every engine and partitioning.
    ranges = best.selectExpr(
        "run_id", "votes", "lo", "hi",
        "array_max(transform(filter(_best, p -> p.line = lo)[0].voters,"
        " t -> named_struct('lo', t.v.lo, 'id', t.id))).id AS lo_by",
        "array_min(transform(filter(_best, p -> p.line = hi)[0].voters,"
        " t -> named_struct('hi', t.v.hi, 'id', t.id))).id AS hi_by")
    text = f"concat({_key_text('lo')}, '-', {_key_text('hi')})"
    return ranges.selectExpr(
        "run_id", f"{text} AS version_range",
        f"concat('log templates: ', CAST(votes AS STRING), ' template(s) agree on ', {text}, ' (e.g. ', lo_by, ', ',"
        " hi_by, ')') AS _range_evidence")


# --------------------------------------------------------------------------- rebalances


def generations(events: DataFrame) -> DataFrame:
    """Generations per member: when each thread joined and synced, and the leader's assignment.

    Classic protocol: JoinGroup/SyncGroup lines. Streams protocol (KIP-1071, 4.1+): the member epoch of the
    ``StreamsMembershipManager`` transitions (see :func:`_streams_generations`).
    """
    ev = events.where(f"{_is(('REBALANCE_JOINED', 'REBALANCE_SYNCED', 'LEADER_ASSIGNMENT_DONE'))}"
                      " AND generation IS NOT NULL")
    g = ev.groupBy(*_exprs("coalesce(app_id, '?') AS group_id", "generation", "host", "run_id", "stream_thread")).agg(
        *_exprs(
            f"{earliest('member_id')} AS member_id",
            "min(CASE WHEN event = 'REBALANCE_JOINED' THEN ts END) AS joined",
            "min(CASE WHEN event = 'REBALANCE_SYNCED' THEN ts END) AS synced",
            "min(CASE WHEN event = 'LEADER_ASSIGNMENT_DONE' THEN ts END) AS leader_assignment",
            "min(struct(ts, line_no, source)) AS _first",
        )).selectExpr("*", "'classic' AS protocol")
    g = g.unionByName(_streams_generations(events))
    g = g.selectExpr("*", "CAST(count(1) OVER (PARTITION BY group_id, protocol, generation) AS INT) AS members",
                     "_first.source AS source", "_first.line_no AS line_no")
    return _conform(g, "generations")


#: Member states of the streams protocol that end a reconciliation (``StreamsMembershipManager#isCompletingRebalance``).
_STREAMS_RECONCILED = ("ACKNOWLEDGING", "STABLE")


def _streams_generations(events: DataFrame) -> DataFrame:
    """Streams-protocol generations: one row per member epoch a thread reconciled.

    There is no JoinGroup under KIP-1071. A member learns a new epoch from a heartbeat response and logs
    ``Member {} with epoch {} transitioned from {} to RECONCILING.`` (the epoch is set before the transition)
    when the new target assignment differs from what it owns; ``… from RECONCILING to ACKNOWLEDGING`` (or
    ``STABLE``) closes it. A revocation-first step keeps the member's old epoch, so it adds no generation;
    epochs 0 (joining) and -1 (leaving) are not generations. The ``Assigned tasks with local epoch`` block that
    follows names the tasks, but its local epoch is the member's own counter (it restarts at 0 after a fence
    or a stale leave), so it cannot order the group's rebalances. Members heartbeat independently: the join
    times of one epoch are seconds apart, unlike a classic JoinGroup response (see :func:`clock_skew`).
    """
    ev = events.where("event = 'MEMBER_STATE' AND generation > 0 AND (to_state = 'RECONCILING' OR "
                      f"(from_state = 'RECONCILING' AND to_state IN ({sql_list(_STREAMS_RECONCILED)})))")
    g = ev.groupBy(*_exprs("coalesce(app_id, '?') AS group_id", "generation", "host", "run_id", "stream_thread")).agg(
        *_exprs(
            f"{earliest('member_id')} AS member_id",
            "min(CASE WHEN to_state = 'RECONCILING' THEN ts END) AS joined",
            "min(CASE WHEN from_state = 'RECONCILING' THEN ts END) AS synced",
            "CAST(NULL AS TIMESTAMP) AS leader_assignment",
            "min(CASE WHEN to_state = 'RECONCILING' THEN struct(ts, line_no, source) END) AS _first",
        ))
    return g.where("joined IS NOT NULL").selectExpr("*", "'streams' AS protocol")


# --------------------------------------------------------------------------- state machines


def _intervals(ev: DataFrame, key: list[str], run_end: DataFrame) -> DataFrame:
    """Each state lasts until the next transition of the same machine, or the end of its run."""
    ev = ev.selectExpr("*", f"lead(ts) OVER (PARTITION BY {', '.join(key)} ORDER BY ts, line_no) AS `end`")
    ev = ev.join(run_end, ["host", "run_id"], "left")
    return ev.withColumn("end", F.expr("coalesce(`end`, run_end)"))


def _run_ends(runs: DataFrame) -> DataFrame:
    """Each run's end, from :func:`process_runs` or :func:`run_spans` (the leaner plan)."""
    return runs.selectExpr("host", "run_id", "`end` AS run_end")


def state_intervals(events: DataFrame, runs: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(thread_states, client_states) from ``State transition from X to Y`` lines."""
    return _split_states(_state_changes(events, runs))


def _split_states(iv: DataFrame) -> tuple[DataFrame, DataFrame]:
    return (_conform(iv.where("kind != 'client'"), "thread_states"),
            _conform(iv.where("kind = 'client'"), "client_states"))


def _state_changes(events: DataFrame, runs: DataFrame) -> DataFrame:
    """Every state interval of threads, clients and global threads (both state tables are cut from it)."""
    base = events.where(f"{_is(('THREAD_STATE', 'CLIENT_STATE', 'GLOBAL_THREAD_STATE'))} AND to_state IS NOT NULL")
    base = base.selectExpr(
        "host", "run_id", "ts", "source", "line_no", "from_state", "to_state AS state",
        "CASE WHEN event = 'CLIENT_STATE' THEN 'client' WHEN event = 'GLOBAL_THREAD_STATE' THEN 'global'"
        " ELSE 'thread' END AS kind",
        "coalesce(CASE WHEN event = 'CLIENT_STATE' THEN client_id END, stream_thread, thread) AS thread",
    )
    return _intervals(base, ["host", "run_id", "kind", "thread"], _run_ends(runs)).withColumnRenamed("ts", "start")


# --------------------------------------------------------------------------- clock skew


def clock_skew(gens: DataFrame) -> DataFrame:
    """Per-host clock offset from moments every member logs together (join/sync of a generation).

    All members of a generation receive the JoinGroup (and SyncGroup) response from the
    coordinator within milliseconds, so the median difference of those times between a host and
    the reference host (the one present in most generations) estimates the host's clock offset.
    """
    # Only classic JoinGroup/SyncGroup responses reach every member at once (streams-protocol members learn an
    # epoch from their own heartbeats, seconds apart).
    gens = gens.where("protocol = 'classic'")
    moments = gens.selectExpr("group_id", "generation", "host", "joined AS t", "'join' AS m").unionByName(
        gens.selectExpr("group_id", "generation", "host", "synced AS t", "'sync' AS m")
    ).where("t IS NOT NULL")
    # One time per host, generation and moment kind (several threads of one host agree closely).
    moments = moments.groupBy("group_id", "generation", "m", "host").agg(F.expr("min(t) AS t"))
    hosts = moments.groupBy("host").agg(F.expr("count(DISTINCT group_id, generation) AS n"))
    ref = hosts.orderBy(F.desc("n"), "host").limit(1).selectExpr("host AS reference_host")
    ref_times = moments.join(ref, F.expr("host = reference_host")).selectExpr(
        "group_id", "generation", "m", "reference_host", "t AS t_ref")
    diffs = moments.join(ref_times, ["group_id", "generation", "m"]).selectExpr(
        "host", "reference_host", "unix_millis(t) - unix_millis(t_ref) AS d")
    skew = diffs.groupBy("host", "reference_host").agg(*_exprs(
        "percentile_approx(d, 0.5D) AS offset_ms", "CAST(count(1) AS INT) AS samples",
        "max(d) - min(d) AS spread_ms"))
    confidence = ("CASE WHEN host = reference_host THEN 'reference'"
                  " WHEN samples >= 4 AND spread_ms <= 200 THEN 'high'"
                  " WHEN samples >= 2 AND spread_ms <= 1000 THEN 'medium' ELSE 'low' END")
    skew = skew.selectExpr("*", f"{confidence} AS confidence", "'generation join/sync' AS method")
    return _conform(skew, "clock_skew")
