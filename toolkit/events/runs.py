"""Process runs: which JVM / NiFi start each line belongs to (:func:`tag_runs`), and each run's bounds."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

# Run markers: a JVM start. Strong ones are logged once per start; `Kafka version` is logged once per
# Kafka client (consumer, restore consumer, producer, admin...), so it only counts on hosts without
# strong markers.
_STRONG_START = (
    r"^(?:StreamsConfig values:"
    r"|(?:stream-client \[[^\]]*\] ?)?Kafka Streams version: "
    r"|stream-client \[[^\]]*\] ?State transition from CREATED to "
    r"|Starting NiFi \S+ using Java "
    r"|Launching NiFi\.\.\.)"
)
_WEAK_START = r"^Kafka version ?: "


def _marker_kind(message: Column) -> Column:
    """Which strong start marker a message is (null when none): one kind is logged once per start."""
    return (F.when(message.rlike(r"^StreamsConfig values:"), F.lit("config"))
            .when(message.rlike(r"^(?:stream-client \[[^\]]*\] ?)?Kafka Streams version: "), F.lit("version"))
            .when(message.rlike(r"^stream-client \[[^\]]*\] ?State transition from CREATED to "), F.lit("created"))
            .when(message.rlike(r"^(?:Starting NiFi \S+ using Java |Launching NiFi\.\.\.)"), F.lit("nifi")))


#: Threads a JVM starts on (the lines before the Kafka Streams start markers belong to the new run).
STARTUP_THREADS = ("main", "restartedmain")
#: How long before its first start marker a JVM's own start-up lines may begin.
STARTUP_BURST_SECONDS = 120
#: Without thread names: the silence that separates the previous run's last line from a new JVM's first.
STARTUP_SILENCE_SECONDS = 5

#: Loggers of NiFi's bootstrap process (``nifi-bootstrap.log``), full or abbreviated.
NIFI_BOOTSTRAP_LOGGER = r"^(?:org\.apache\.nifi\.bootstrap|o\.a\.n\.b)\."


def is_nifi_bootstrap(df: DataFrame) -> Column:
    """True on rows NiFi's bootstrap process logged (by logger, or by template on events without one)."""
    by_logger = F.col("logger").rlike(NIFI_BOOTSTRAP_LOGGER) if "logger" in df.columns else F.lit(False)
    by_template = F.col("template_id").startswith("nifi.bootstrap.") if "template_id" in df.columns else F.lit(False)
    return F.coalesce(by_logger, F.lit(False)) | F.coalesce(by_template, F.lit(False))


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
    by_file = Window.partitionBy("host", "source").orderBy("line_no").rowsBetween(Window.unboundedPreceding, 0)
    body = F.regexp_replace(F.col("message"), r"^(?:stream-client \[[^\]]*\] ?)", "")
    strong = F.coalesce(F.col("message").rlike(_STRONG_START), F.lit(False))
    weak = F.coalesce(body.rlike(_WEAK_START), F.lit(False))
    marked = (
        df.withColumn("_order_ts", F.coalesce(F.col("ts"), F.last("ts", ignorenulls=True).over(by_file)))
        .withColumn("_strong", strong)
        .withColumn("_weak", weak)
        .withColumn("_host_has_strong", F.max(F.col("_strong").cast("int")).over(Window.partitionBy("host")) == 1)
        .withColumn("_marker", F.col("_strong") | (F.col("_weak") & ~F.col("_host_has_strong")))
        .withColumn("_kind", F.when(F.col("_strong"), F.coalesce(_marker_kind(F.col("message")), F.lit("other"))))
    )
    order = Window.partitionBy("host").orderBy(F.col("_order_ts").asc_nulls_first(), "source", "line_no")
    before = order.rowsBetween(Window.unboundedPreceding, -1)
    markers_only = F.when(F.col("_marker"), F.col("_order_ts"))
    previous_marker_ts = F.last(markers_only, ignorenulls=True).over(before)
    any_marker_before = F.max(F.col("_marker").cast("int")).over(before)
    gap = F.col("_order_ts").cast("double") - previous_marker_ts.cast("double")
    same_kind = Window.partitionBy("host", "_kind").orderBy(F.col("_order_ts").asc_nulls_first(), "source", "line_no")
    previous_same_kind = F.lag("_order_ts").over(same_kind)
    since_same_kind = F.col("_order_ts").cast("double") - previous_same_kind.cast("double")
    # The same kind again within the start-up window: a second start (a quick restart). Further apart, the
    # gap rule decides (a slow start-up may print its kinds seconds apart).
    repeated = (F.col("_kind").isNotNull() & previous_same_kind.isNotNull()
                & (since_same_kind > same_start_seconds) & (since_same_kind <= startup_gap_seconds))
    candidate = F.col("_marker") & (
        F.coalesce(any_marker_before, F.lit(0)).eqNullSafe(0)
        | previous_marker_ts.isNull()
        | F.col("_order_ts").isNull()
        | (gap > startup_gap_seconds)
        | F.coalesce(repeated, F.lit(False))
    )
    marked = marked.withColumn("_candidate", candidate)
    # Several markers of one start (config dump, version banner, CREATED) open one run, not three.
    previous_candidate_ts = F.last(F.when(F.col("_candidate"), F.col("_order_ts")), ignorenulls=True).over(before)
    starts_run = F.col("_candidate") & (
        previous_candidate_ts.isNull() | F.col("_order_ts").isNull()
        | (F.col("_order_ts").cast("double") - previous_candidate_ts.cast("double") > same_start_seconds))
    result = marked.withColumn("_starts_run", starts_run).withColumn(
        "run_no", F.sum(F.col("_starts_run").cast("int")).over(order.rowsBetween(Window.unboundedPreceding, 0)).cast("int")
    )
    # A JVM prints on its "main" thread before the first marker (framework banners, "Starting ... with PID");
    # those lines open the next run rather than close the previous one.
    # "The nearest such row after this one" as a running frame over the reversed order: Spark recomputes a frame
    # that ends at UNBOUNDED FOLLOWING for every row (quadratic in a host's lines), a growing one it does not.
    reverse = Window.partitionBy("host").orderBy(F.col("_order_ts").desc_nulls_last(), F.col("source").desc(),
                                                 F.col("line_no").desc())
    after = reverse.rowsBetween(Window.unboundedPreceding, -1)
    boot = is_nifi_bootstrap(df)
    main = F.coalesce(F.lower(F.col("thread")).isin(*STARTUP_THREADS), F.lit(False)) if "thread" in df.columns \
        else F.lit(False)
    main = main & ~boot
    result = result.withColumn("_main", main)
    next_start = F.last(F.when(F.col("_starts_run"), F.col("_order_ts")), ignorenulls=True).over(after)
    next_other = F.last(F.when(~F.col("_main") & ~F.col("_starts_run"), F.col("_order_ts")), ignorenulls=True).over(after)
    next_start_row = F.last(F.when(F.col("_starts_run"), F.struct("_order_ts", "source", "line_no")),
                            ignorenulls=True).over(after)
    next_other_row = F.last(F.when(~F.col("_main") & ~F.col("_starts_run"), F.struct("_order_ts", "source", "line_no")),
                            ignorenulls=True).over(after)
    soon = next_start.isNotNull() & (next_start.cast("double") - F.col("_order_ts").cast("double") <= STARTUP_BURST_SECONDS)
    by_main_thread = (F.col("_main") & ~F.col("_starts_run") & soon
                      & (next_other.isNull() | (next_other_row >= next_start_row)))
    # Layouts without a thread: the burst of lines right before the marker, after a silence, is the new JVM's.
    silence = (F.col("_order_ts").cast("double")
               - F.lag("_order_ts").over(order).cast("double")) >= STARTUP_SILENCE_SECONDS
    result = result.withColumn("_burst", F.sum(F.coalesce(silence, F.lit(True)).cast("int")).over(
        order.rowsBetween(Window.unboundedPreceding, 0)))
    next_start_burst = F.last(F.when(F.col("_starts_run"), F.col("_burst")), ignorenulls=True).over(after)
    no_thread = F.col("thread").isNull() if "thread" in df.columns else F.lit(True)
    by_burst = no_thread & ~F.col("_starts_run") & soon & (next_start_burst == F.col("_burst"))
    opens_next = by_main_thread | F.coalesce(by_burst, F.lit(False))
    result = result.withColumn("run_no", F.when(opens_next, F.col("run_no") + 1).otherwise(F.col("run_no")))
    # NiFi's bootstrap launches the first run before that run's first line: its lines go with the run in
    # progress, or with the first run when none is yet.
    host_has_marker = F.max(F.col("_marker").cast("int")).over(Window.partitionBy("host")) == 1
    result = result.withColumn("run_no", F.when(boot & (F.col("run_no") == 0) & host_has_marker, F.lit(1))
                               .otherwise(F.col("run_no")))
    result = result.withColumn("run_id", F.concat_ws("#", F.coalesce(F.col("host"), F.lit("?")), F.col("run_no").cast("string")))
    return result.drop("_order_ts", "_strong", "_weak", "_host_has_strong", "_marker", "_starts_run", "_kind",
                       "_candidate", "_main", "_burst")


def run_bounds(records: DataFrame) -> DataFrame:
    """Per host and process run (the numbering of :func:`tag_runs`), its first and last line of any kind.

    Columns: ``host``, ``run_no``, ``run_id``, ``first_ts``, ``first_source``, ``last_ts``, ``last_source``, ``last_line_no``,
    ``last_text``, ``lines``, ``last_of_file`` (the run's last line is the last line of its file). Classified
    events alone miss the application's own lines, so a run's end is taken from here; lines no layout
    understands (``layout = 'unparsed'``: a supervisor's or shell's lines) and NiFi bootstrap lines are left out.
    """
    # Lines no layout understands are not the application's (a supervisor's "Main process exited", a shell
    # prompt in a pasted log): they neither extend nor open a run.
    parsed = F.col("layout").isNull() | (F.col("layout") != "unparsed") if "layout" in records.columns else F.lit(True)
    keep = [c for c in ("host", "source", "line_no", "ts", "thread", "message") if c in records.columns]
    # NiFi's bootstrap is another JVM that outlives the application (it logs the launch before and the
    # termination after): its lines neither open, extend nor end the application's run.
    parsed = parsed & ~is_nifi_bootstrap(records)
    base = records.where(F.col("host").isNotNull() & parsed).select(*keep)
    file_end = base.groupBy("host", "source").agg(F.max("line_no").alias("_file_last"))
    tagged = tag_runs(base).where(F.col("ts").isNotNull())
    per_run = tagged.groupBy("host", "run_no", "run_id").agg(
        F.min("ts").alias("first_ts"),
        F.min(F.struct("ts", "line_no", "source")).alias("_first"),
        F.max(F.struct("ts", "line_no", "source", F.substring_index("message", "\n", 1).alias("text"))).alias("_last"),
        F.count(F.lit(1)).alias("lines"),
    )
    out = per_run.select("host", "run_no", "run_id", "first_ts", F.col("_first.source").alias("first_source"),
                         F.col("_last.ts").alias("last_ts"),
                         F.col("_last.source").alias("last_source"), F.col("_last.line_no").alias("last_line_no"),
                         F.col("_last.text").alias("last_text"), "lines")
    out = out.join(file_end.withColumnRenamed("source", "last_source"), ["host", "last_source"], "left")
    return out.withColumn("last_of_file", F.col("last_line_no") == F.col("_file_last")).drop("_file_last")
