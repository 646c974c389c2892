"""Process runs: which JVM / NiFi start each line belongs to (:func:`tag_runs`), and each run's bounds."""

from __future__ import annotations

from functools import reduce
from typing import Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from toolkit.catalogue.markers import run_markers
from toolkit.sqltext import sql_list, sql_str

# Run markers (``toolkit/catalogue/runs.toml``): a JVM start. Strong ones are logged once per start; `Kafka version`
# is logged once per Kafka client (consumer, restore consumer, producer, admin...), so it only counts on hosts
# without strong markers.
_MARKERS = run_markers()
_STRONG_START = _MARKERS.strong
_WEAK_START = _MARKERS.weak
#: Which strong start marker a message is: one kind is logged once per start.
_MARKER_KINDS = _MARKERS.kinds
#: A Kafka Streams client's last lines of a run (after its client prefix).
_CLIENT_STOP = _MARKERS.stop
#: The client prefix a ``Kafka version`` banner may carry.
_CLIENT_PREFIX = r"^(?:stream-client \[[^\]]*\] ?)"


#: Threads a JVM starts on (the lines before the Kafka Streams start markers belong to the new run).
STARTUP_THREADS = ("main", "restartedmain")
#: How long before its first start marker a JVM's own start-up lines may begin.
STARTUP_BURST_SECONDS = 120
#: Without thread names: the silence that separates the previous run's last line from a new JVM's first.
STARTUP_SILENCE_SECONDS = 5

#: Loggers of NiFi's bootstrap process (``nifi-bootstrap.log``), full or abbreviated.
NIFI_BOOTSTRAP_LOGGER = r"^(?:org\.apache\.nifi\.bootstrap|o\.a\.n\.b)\."


def _chain(operator: str, *terms: str) -> str:
    """SQL: ``terms`` joined by ``operator`` (AND, OR), grouped from the left as written (the SQL parser would
    balance a longer chain, which evaluates the conditions in another order)."""
    return reduce(lambda left, right: f"({left} {operator} {right})", terms)


def nifi_bootstrap_condition(columns: Iterable[str]) -> str:
    """SQL text of :func:`is_nifi_bootstrap` for a frame with these columns."""
    by_logger = f"logger RLIKE {sql_str(NIFI_BOOTSTRAP_LOGGER)}" if "logger" in columns else "false"
    by_template = "startswith(template_id, 'nifi.bootstrap.')" if "template_id" in columns else "false"
    return f"(coalesce({by_logger}, false) OR coalesce({by_template}, false))"


def is_nifi_bootstrap(df: DataFrame) -> Column:
    """True on rows NiFi's bootstrap process logged (by logger, or by template on events without one)."""
    return F.expr(nifi_bootstrap_condition(df.columns))


def tag_runs(df: DataFrame, *, startup_gap_seconds: int = 60, same_start_seconds: int = 5) -> DataFrame:
    """Add ``run_no`` (int) and ``run_id`` (``<host>#<n>``): the process run of each row, per host.

    Works on records or events (needs ``host``, ``source``, ``line_no``, ``ts``, ``message``).
    A run starts at a JVM start marker: ``StreamsConfig values:``, ``Kafka Streams version:``,
    a client ``State transition from CREATED to ..``, NiFi ``Starting NiFi .. using Java``
    / ``Launching NiFi...``; ``Kafka version:`` banners count only on hosts with none of those
    (they repeat for every Kafka client of one start). A marker starts a new run when it is the
    host's first, when more than ``startup_gap_seconds`` passed since the previous marker, or when
    a marker of the same kind was already printed more than ``same_start_seconds`` earlier (each kind
    is printed once per start, so a quick restart is a new run, not part of the previous start);
    markers within ``same_start_seconds`` of such a start belong to it. NiFi bootstrap lines take the run in
    progress (the first run before any). Lines the JVM printed on its
    ``main`` thread just before a start marker (framework banners, ``Starting ... with PID``) belong to
    the run that marker opens; in layouts without thread names, so does the burst of lines right before
    the marker that follows a silence of ``STARTUP_SILENCE_SECONDS``. Other rows before the first marker get run 0. Rows without ``ts`` take
    the last known ``ts`` of their file for ordering.
    """
    numbered = _numbered(_with_run_flags(df), startup_gap_seconds, same_start_seconds)
    return numbered.drop(*_RUN_FLAGS, "_order_ts")


def tag_runs_by_key(df: DataFrame, *, startup_gap_seconds: int = 60, same_start_seconds: int = 5) -> DataFrame:
    """:func:`tag_runs` for a wide frame whose rows are unique by ``source`` and ``line_no`` and cheap to read
    twice (persisted, or read from a file): the same ``run_no`` and ``run_id``, columns in the same order.

    The start markers are tested on each row once; the windows then sort only the row keys, the time and those
    flags, and the run numbers are joined back. Sorting whole rows (messages, stack traces, partition lists)
    once per window made numbering the events of an eventful bundle cost more than classifying them."""
    needed = [c for c in ("host", "source", "line_no", "ts") if c in df.columns]
    flags = _with_run_flags(df).select(*needed, *_RUN_FLAGS)
    keys = _numbered(flags, startup_gap_seconds, same_start_seconds).select("source", "line_no", "run_no")
    joined = df.join(keys, ["source", "line_no"], "left")
    return joined.select(*df.columns, "run_no", F.expr(_RUN_ID).alias("run_id"))


#: What :func:`_with_run_flags` reads off each row for the windows of :func:`_numbered`.
_RUN_FLAGS = ("_strong", "_weak", "_kind", "_stop", "_boot", "_main", "_no_thread")
_RUN_ID = "concat_ws('#', coalesce(host, '?'), CAST(run_no AS STRING))"


def _with_run_flags(df: DataFrame) -> DataFrame:
    """``df`` with :data:`_RUN_FLAGS`: the start markers, a client's stop, NiFi's bootstrap, the start-up threads."""
    body = f"regexp_replace(message, {sql_str(_CLIENT_PREFIX)}, '')"
    marker_kind = "CASE " + " ".join(f"WHEN message RLIKE {sql_str(p)} THEN '{k}'" for p, k in _MARKER_KINDS) + " END"
    boot = nifi_bootstrap_condition(df.columns)
    main = (f"coalesce(lower(thread) IN ({sql_list(STARTUP_THREADS)}), false)"
            if "thread" in df.columns else "false")
    flagged = df.withColumns({
        "_strong": F.expr(f"coalesce(message RLIKE {sql_str(_STRONG_START)}, false)"),
        "_weak": F.expr(f"coalesce({body} RLIKE {sql_str(_WEAK_START)}, false)"),
        # A client's last lines ("Streams client stopped completely") may be on main too: they end the old
        # run, and so do the main-thread lines before them.
        "_stop": F.expr(f"coalesce({body} RLIKE {sql_str(_CLIENT_STOP)}, false)"),
        "_boot": F.expr(boot),
        "_main": F.expr(f"{main} AND NOT {boot}"),
        "_no_thread": F.expr("thread IS NULL" if "thread" in df.columns else "true"),
    })
    return flagged.withColumn("_kind", F.expr(f"CASE WHEN _strong THEN coalesce({marker_kind}, 'other') END"))


def _numbered(flagged: DataFrame, startup_gap_seconds: int, same_start_seconds: int) -> DataFrame:
    """``flagged`` (:func:`_with_run_flags`) with ``_order_ts``, ``run_no`` and ``run_id`` (see :func:`tag_runs`)."""
    # Expressions are SQL text: building one makes a single round trip to the JVM, not several per Column operator.
    order_by = "ORDER BY _order_ts ASC NULLS FIRST, source, line_no"
    order = f"PARTITION BY host {order_by}"
    so_far = "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"
    before = f"{order} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING"
    marked = (
        flagged.withColumn("_order_ts", F.expr(
            f"coalesce(ts, last(ts, true) OVER (PARTITION BY host, source ORDER BY line_no {so_far}))"))
        .withColumn("_host_has_strong", F.expr("max(CAST(_strong AS INT)) OVER (PARTITION BY host) = 1"))
        .withColumn("_marker", F.expr("_strong OR (_weak AND NOT _host_has_strong)"))
    )
    previous_marker_ts = f"last(CASE WHEN _marker THEN _order_ts END, true) OVER ({before})"
    any_marker_before = f"max(CAST(_marker AS INT)) OVER ({before})"
    gap = f"CAST(_order_ts AS DOUBLE) - CAST({previous_marker_ts} AS DOUBLE)"
    previous_same_kind = f"lag(_order_ts) OVER (PARTITION BY host, _kind {order_by})"
    since_same_kind = f"CAST(_order_ts AS DOUBLE) - CAST({previous_same_kind} AS DOUBLE)"
    # The same kind again within the start-up window: a second start (a quick restart). Further apart, the
    # gap rule decides (a slow start-up may print its kinds seconds apart).
    repeated = _chain("AND", "_kind IS NOT NULL", f"{previous_same_kind} IS NOT NULL",
                      f"{since_same_kind} > {same_start_seconds}", f"{since_same_kind} <= {startup_gap_seconds}")
    candidate = _chain("OR", f"coalesce({any_marker_before}, 0) <=> 0", f"{previous_marker_ts} IS NULL",
                       "_order_ts IS NULL", f"{gap} > {startup_gap_seconds}", f"coalesce({repeated}, false)")
    marked = marked.withColumn("_candidate", F.expr(f"_marker AND {candidate}"))
    # Several markers of one start (config dump, version banner, CREATED) open one run, not three.
    previous_candidate_ts = f"last(CASE WHEN _candidate THEN _order_ts END, true) OVER ({before})"
    starts_run = (f"_candidate AND ({previous_candidate_ts} IS NULL OR _order_ts IS NULL"
                  f" OR CAST(_order_ts AS DOUBLE) - CAST({previous_candidate_ts} AS DOUBLE) > {same_start_seconds})")
    result = marked.withColumn("_starts_run", F.expr(starts_run)).withColumn(
        "run_no", F.expr(f"CAST(sum(CAST(_starts_run AS INT)) OVER ({order} {so_far}) AS INT)"))
    # A JVM prints on its "main" thread before the first marker (framework banners, "Starting ... with PID");
    # those lines open the next run rather than close the previous one.
    # "The nearest such row after this one" as a running frame over the reversed order: Spark recomputes a frame
    # that ends at UNBOUNDED FOLLOWING for every row (quadratic in a host's lines), a growing one it does not.
    after = ("PARTITION BY host ORDER BY _order_ts DESC NULLS LAST, source DESC, line_no DESC"
             " ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING")
    other = "(NOT _main OR _stop) AND NOT _starts_run"
    next_start = f"last(CASE WHEN _starts_run THEN _order_ts END, true) OVER ({after})"
    next_other = f"last(CASE WHEN {other} THEN _order_ts END, true) OVER ({after})"
    next_start_row = f"last(CASE WHEN _starts_run THEN struct(_order_ts, source, line_no) END, true) OVER ({after})"
    next_other_row = f"last(CASE WHEN {other} THEN struct(_order_ts, source, line_no) END, true) OVER ({after})"
    soon = (f"({next_start} IS NOT NULL"
            f" AND CAST({next_start} AS DOUBLE) - CAST(_order_ts AS DOUBLE) <= {STARTUP_BURST_SECONDS})")
    by_main_thread = _chain("AND", "_main", "NOT _stop", "NOT _starts_run", soon,
                            f"({next_other} IS NULL OR {next_other_row} >= {next_start_row})")
    # Layouts without a thread: the burst of lines right before the marker, after a silence, is the new JVM's.
    silence = (f"(CAST(_order_ts AS DOUBLE) - CAST(lag(_order_ts) OVER ({order}) AS DOUBLE))"
               f" >= {STARTUP_SILENCE_SECONDS}")
    result = result.withColumn("_burst", F.expr(f"sum(CAST(coalesce({silence}, true) AS INT)) OVER ({order} {so_far})"))
    next_start_burst = f"last(CASE WHEN _starts_run THEN _burst END, true) OVER ({after})"
    by_burst = _chain("AND", "_no_thread", "NOT _starts_run", soon, f"{next_start_burst} = _burst")
    opens_next = f"{by_main_thread} OR coalesce({by_burst}, false)"
    result = result.withColumn("run_no", F.expr(f"CASE WHEN {opens_next} THEN run_no + 1 ELSE run_no END"))
    # NiFi's bootstrap launches the first run before that run's first line: its lines go with the run in
    # progress, or with the first run when none is yet. When the application's log begins inside a run (lines
    # before the first marker), that run is in progress: the bootstrap's lines of its end (a process
    # "termination completed") are its own, not the next run's.
    host_has_marker = "max(CAST(_marker AS INT)) OVER (PARTITION BY host) = 1"
    run_in_progress = "max(CAST(run_no = 0 AND NOT _boot AS INT)) OVER (PARTITION BY host) = 1"
    result = result.withColumn("run_no", F.expr(
        f"CASE WHEN _boot AND run_no = 0 AND {host_has_marker} AND NOT {run_in_progress} THEN 1 ELSE run_no END"))
    result = result.withColumn("run_id", F.expr(_RUN_ID))
    return result.drop("_host_has_strong", "_marker", "_starts_run", "_candidate", "_burst")


def run_bounds(records: DataFrame) -> DataFrame:
    """Per host and process run (the numbering of :func:`tag_runs`), its first and last line of any kind.

    Columns: ``host``, ``run_no``, ``run_id``, ``first_ts``, ``first_source``, ``last_ts``, ``last_source``, ``last_line_no``,
    ``last_text``, ``lines``, ``last_of_file`` (the run's last line is the last line of its file). Classified
    events alone miss the application's own lines, so a run's end is taken from here; lines no layout
    understands (``layout = 'unparsed'``: a supervisor's or shell's lines) and NiFi bootstrap lines are left out.
    """
    # Lines no layout understands are not the application's (a supervisor's "Main process exited", a shell
    # prompt in a pasted log): they neither extend nor open a run.
    parsed = "(layout IS NULL OR layout != 'unparsed')" if "layout" in records.columns else "true"
    keep = [c for c in ("host", "source", "line_no", "ts", "thread", "message") if c in records.columns]
    # NiFi's bootstrap is another JVM that outlives the application (it logs the launch before and the
    # termination after): its lines neither open, extend nor end the application's run.
    parsed = f"({parsed} AND NOT {nifi_bootstrap_condition(records.columns)})"
    base = records.where(f"host IS NOT NULL AND {parsed}").select(*keep)
    file_end = base.groupBy("host", "source").agg(F.expr("max(line_no) AS _file_last"))
    tagged = tag_runs(base).where("ts IS NOT NULL")
    per_run = tagged.groupBy("host", "run_no", "run_id").agg(*[F.expr(e) for e in (
        "min(ts) AS first_ts",
        "min(struct(ts, line_no, source)) AS _first",
        "max(struct(ts, line_no, source, substring_index(message, '\\n', 1) AS text)) AS _last",
        "count(1) AS lines",
    )])
    out = per_run.selectExpr("host", "run_no", "run_id", "first_ts", "_first.source AS first_source",
                             "_last.ts AS last_ts", "_last.source AS last_source", "_last.line_no AS last_line_no",
                             "_last.text AS last_text", "lines")
    out = out.join(file_end.withColumnRenamed("source", "last_source"), ["host", "last_source"], "left")
    return out.withColumn("last_of_file", F.expr("last_line_no = _file_last")).select(*BOUNDS_COLUMNS)


#: The columns of the run-bounds table, in order (:func:`toolkit.events.bounds.run_bounds` gives the same).
BOUNDS_COLUMNS = ("host", "run_no", "run_id", "first_ts", "first_source", "last_ts", "last_source", "last_line_no",
                  "last_text", "lines", "last_of_file")
