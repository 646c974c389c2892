"""Helpers shared by detectors: evidence lines, versions, known-bug sentences, small Spark idioms.

Everything collects bounded results only (``limit`` before ``collect``), through :mod:`toolkit.utc`:
collected timestamps are naive ``datetime`` values in UTC whatever the driver's time zone, so detectors
may subtract and print them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Sequence, TypeVar

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from toolkit import utc
from toolkit.detectors.base import MAX_EVIDENCE, Evidence
from toolkit.knowledge import get_known_bug, missing_evidence_steps, verdicts_for_detector, version_verdict
from toolkit.knowledge.versions import VersionError, compare_versions
from toolkit.sqltext import event_in
from toolkit.state.schemas import CHANGELOG_CHECKPOINT_FILES

#: Guarantee values that mean exactly-once (``exactly_once`` is the pre-2.6 / deprecated spelling).
EOS_PREFIX = "exactly_once"
#: A process run under exactly-once, as a Spark SQL condition on ``process_runs``.
EOS_RUN_SQL = f"startswith(lower(guarantee), '{EOS_PREFIX}')"
#: A process run of Kafka Streams or a Kafka client (a run's product may come from a client line first).
NOT_NIFI_SQL = "(product IS NULL OR product <> 'nifi')"


def first_line(col: Column | str) -> Column:
    """The first line of a (possibly multi-line) message."""
    return F.substring_index(F.col(col) if isinstance(col, str) else col, "\n", 1)


def event_is(*names: str) -> Column:
    """The event (or one of its ``also_events``) is one of ``names``."""
    return F.expr(event_in(names))


def events_of(tl: Any, *names: str) -> DataFrame:
    """Events (log lines) classified as one of ``names``."""
    return tl.events.where(event_is(*names))


def rows(df: DataFrame, limit: int = 50, order: Sequence[str] | None = None) -> list:
    """A bounded ``collect``: at most ``limit`` rows, ordered by ``order`` when given.

    Only for lists whose length is not reported; :func:`bounded` also says how many there were.
    """
    if order:
        df = df.orderBy(*order)
    return utc.collect(df.limit(limit))


@dataclass(frozen=True)
class Bounded:
    """Rows of a bounded ``collect`` and how many rows the query really has."""

    rows: list
    total: int

    @property
    def truncated(self) -> bool:
        return self.total > len(self.rows)

    def record(self, what: str, truncation: dict | None = None) -> dict:
        """``truncation`` plus ``{what: {"total": ..., "shown": ...}}`` when rows were cut."""
        out = dict(truncation or {})
        if self.truncated:
            out[what] = {"total": self.total, "shown": len(self.rows)}
        return out


def bounded(df: DataFrame, limit: int, order: Sequence[Any] | None = None) -> Bounded:
    """At most ``limit`` rows and the true row count (counted only when the limit was reached)."""
    ordered = df.orderBy(*order) if order else df
    got = utc.collect(ordered.limit(limit + 1))
    if len(got) <= limit:
        return Bounded(got, len(got))
    return Bounded(got[:limit], df.count())


def log_evidence(df: DataFrame, limit: int = MAX_EVIDENCE) -> list[Evidence]:
    """Evidence references for event rows (``source``, ``line_no``), oldest first; the runner reads the lines."""
    keys = df.where(F.col("source").isNotNull() & F.col("line_no").isNotNull()).select("source", "line_no", "ts")
    return log_refs((r.source, r.line_no) for r in keys.orderBy("ts", "source", "line_no").limit(limit).collect())


def log_refs(refs: Iterable[tuple[str | None, int | None]]) -> list[Evidence]:
    """Evidence references (``text`` still ``None``) for (source, line_no) pairs; the runner reads the
    lines of every finding in one join (:func:`toolkit.detectors.resolve_evidence`)."""
    pairs = sorted({(s, int(n)) for s, n in refs if s and n is not None})
    return [Evidence(source, line_no, None, "log") for source, line_no in pairs]


def evidence_at(tl: Any, refs: DataFrame, limit: int = MAX_EVIDENCE) -> list[Evidence]:
    """Evidence references for timeline rows (their ``source``/``line_no``), oldest rows first."""
    keys = refs.where(F.col("line_no").isNotNull() & F.col("source").isNotNull()).select("source", "line_no")
    return log_refs((r.source, r.line_no) for r in keys.limit(limit * 2).collect())


def evidence_lines(tl: Any, refs: Iterable[tuple[str | None, int | None]], limit: int = MAX_EVIDENCE) -> list[Evidence]:
    """Evidence references for (source, line_no) pairs collected earlier (no query here)."""
    return log_refs(refs)


def merge_evidence(*groups: Iterable[Evidence], limit: int | None = None) -> list[Evidence]:
    """Concatenate evidence lists without duplicates; the runner orders and bounds the result."""
    seen: set[tuple] = set()
    merged: list[Evidence] = []
    for group in groups:
        for item in group:
            key = (item.source, item.line_no, item.text)
            if key not in seen:
                seen.add(key)
                merged.append(item)
    return merged


_T = TypeVar("_T")


def shared(tl: Any, key: Any, compute: Callable[[], _T]) -> _T:
    """``compute()``, once per detector run for ``key``: the detectors of one run share the result.

    A view handed out by :func:`toolkit.detectors.run_detectors` carries the run's memo; a timeline
    given directly computes every time. Read the tables a result depends on before calling this, so
    a detector that does not declare them still fails as it would without the memo.
    """
    memo = getattr(tl, "_memo", None)
    return compute() if memo is None else memo.get(key, compute)


def run_versions(tl: Any, hosts: Iterable[str] | None = None) -> list[str]:
    """Distinct product versions of the process runs (of ``hosts`` when given), sorted (20 at most): the versions
    runs printed first, then the template ranges (``2.0-2.1``) of runs without a banner, so that the first item is a
    printed version whenever a run printed one.
    """
    wanted = set(hosts or [])
    runs = [r for r in run_rows(tl) if not wanted or r.host in wanted]
    printed = sorted({r.version for r in runs if r.version is not None})
    ranges = sorted({r.version_range for r in runs if r.version is None and r.version_range is not None})
    return [*printed, *ranges][:20]


def version_args(version: str | None, version_range: str | None = None
                 ) -> tuple[str | None, tuple[str | None, str | None] | None]:
    """(version, (low, high)) as :func:`toolkit.knowledge.version_verdict` takes them, from a run's
    ``version`` and ``version_range`` (``2.0-2.1``, ``3.8``, ``>=4.1``)."""
    if version:
        if "-" in version and version[:1].isdigit() and version.split("-", 1)[1][:1].isdigit():
            version, version_range = None, version  # a range passed where a version was expected
        else:
            return version, None
    text = (version_range or "").strip()
    if not text or not text[:1].isdigit() and not text.startswith(">="):
        return None, None
    if text.startswith(">="):
        return None, (text[2:], None)
    low, _, high = text.partition("-")
    return None, (low, high or low)


def bug_status(bug_id: str, version: str | None, version_range: str | None = None) -> str:
    """``affected``, ``fixed``, ``not_affected`` or ``unknown``: what the run's version says about ``bug_id``."""
    v, span = version_args(version, version_range)
    return version_verdict(get_known_bug(bug_id), v, span).status


def known_bug_sentences(detector_id: str, versions: Sequence[str | None]) -> list[str]:
    """One verdict sentence per known issue of the detector, for each version (or template range) seen,
    or 'version unknown'."""
    sentences: list[str] = []
    for text in (list(v for v in versions if v) or [None]):
        version, span = version_args(text, None)
        for verdict in verdicts_for_detector(detector_id, version, span):
            if verdict.sentence not in sentences:
                sentences.append(verdict.sentence)
    return sentences


#: Events only the state updater prints (or that name its thread).
STATE_UPDATER_EVENTS = ("STATE_UPDATER_START", "RESTORE_QUEUED")


def state_updater_of_runs(tl: Any, run_ids: Sequence[str]) -> dict[str, bool | None]:
    """Run id -> whether the state updater ran in it: ``True``/``False`` when the logs or config say, else ``None``.

    On: a ``__state.updater.enabled__ = true`` setting, a line of the updater thread (``state-updater [``
    prefix, a ``-StateUpdater-`` thread) or an event only it prints. Off: the setting false, or the
    ``Restoration took`` summary a StreamThread prints only when it restores itself.
    """
    from toolkit.sqltext import sql_in, sql_list

    runs = sql_in("run_id", run_ids)
    on = (f"prefix_kind = 'state-updater' OR coalesce(thread, '') LIKE '%-StateUpdater-%' "
          f"OR event IN ({sql_list(STATE_UPDATER_EVENTS)})")
    off = "event = 'RESTORE_ALL_DONE' AND message LIKE '%Restoration took%'"
    logged = {r.run_id: r for r in all_rows(tl.events.where(runs).groupBy("run_id").agg(
        F.expr(f"max(CAST(({on}) AS INT))").alias("on"), F.expr(f"max(CAST(({off}) AS INT))").alias("off")),
        "runs")}
    settings: dict[str, str | None] = {}
    for r in all_rows(tl.config.where(f"key = '{STATE_UPDATER_KEY}' AND {runs}").selectExpr(
            "run_id", "lower(trim(value)) AS value"), "state-updater settings"):
        settings.setdefault(r.run_id, r.value)
    verdicts: dict[str, bool | None] = {}
    for run_id in sorted(set(logged) | set(settings)):
        setting, lines = settings.get(run_id), logged.get(run_id)
        verdicts[run_id] = (True if setting == "true" else False if setting == "false"
                            else True if lines is not None and lines.on == 1
                            else False if lines is not None and lines.off == 1 else None)
    return verdicts


#: Internal config that switches the state updater on (3.4-3.7, default off) or off (3.8-4.2, default on).
STATE_UPDATER_KEY = "__state.updater.enabled__"


def default_state_updater(version: str | None, version_range: str | None = None) -> bool | None:
    """Whether the state updater is on by default in this version (3.8+), off (before 3.8), or unknown."""
    v, span = version_args(version, version_range)
    try:
        if v:
            return compare_versions(v, "3.8.0") >= 0
        if span and span[0]:
            low_on = compare_versions(span[0], "3.8") >= 0
            high_on = span[1] is None or compare_versions(span[1], "3.8") >= 0
            return low_on if low_on == high_on else None
    except VersionError:
        return None
    return None


def may_predate(version: str | None, version_range: str | None, floor: str) -> bool:
    """Whether the run may be older than ``floor``: its version is below it, or it is unknown (no version, or a
    range that reaches below it). False only when the run is known to be ``floor`` or later."""
    v, span = version_args(version, version_range)
    try:
        if v:
            return compare_versions(v, floor) < 0
        if span and span[0]:
            return compare_versions(span[0], floor) < 0
    except VersionError:
        return True
    return True


def missing_steps(detector_id: str, *extra: str) -> list[str]:
    """Specific gaps first (``extra``), then the detector's standard evidence steps."""
    try:
        standard = missing_evidence_steps(detector_id)
    except KeyError:
        standard = []
    return [*extra, *[s for s in standard if s not in extra]]


#: Rows of one set of facts a detector reads onto the driver to compare there (checkpoint reads of the
#: runs after crashes, the restorations of those runs...): far more than any incident has.
MAX_FACT_ROWS = 20_000


def all_rows(df: DataFrame, what: str, limit: int = MAX_FACT_ROWS) -> list:
    """Every row of ``df``, a small set of facts the detector compares on the driver.

    More than ``limit`` rows raise ``ValueError`` (the detector then reports that it failed) rather than
    compare a silently cut set.
    """
    got = utc.collect(df.limit(limit + 1))
    if len(got) > limit:
        raise ValueError(f"more than {limit:,} {what} to compare")
    return got


#: Process runs read onto the driver at most (one row per process start on a host).
MAX_RUNS = 10_000


def run_rows(tl: Any) -> list:
    """Every process run (all columns of ``process_runs``), read once per detector run and shared."""
    runs = tl.process_runs
    return shared(tl, "process_runs", lambda: all_rows(runs, "process runs", MAX_RUNS))


def captured_checkpoint_rows(tl: Any) -> list:
    """The rows of :func:`captured_checkpoints`, read once per detector run and shared."""
    files = captured_checkpoints(tl)
    return shared(tl, "captured_checkpoints", lambda: all_rows(files, "captured checkpoint files"))


def is_eos_guarantee(guarantee: str | None) -> bool:
    """A collected ``processing.guarantee`` is one of the exactly-once values (:data:`EOS_RUN_SQL` in Spark SQL)."""
    return (guarantee or "").lower().startswith(EOS_PREFIX)


def spark_order(*values: Any) -> tuple:
    """A sort key ordering by ``values`` as Spark orders them (and structs of them): field by field, ascending,
    nulls first. For ``sorted``, ``min`` and ``max`` over collected rows."""
    return tuple((value is not None, value) for value in values)


def in_spark_order(items: Iterable[Any], key: Callable[[Any], tuple]) -> list:
    """``items`` sorted by the values ``key`` gives, ascending with nulls first, as Spark's ``orderBy`` does."""
    return sorted(items, key=lambda item: spark_order(*key(item)))


def unix_millis(ts: datetime | None) -> int | None:
    """Milliseconds since the epoch, rounded down as Spark's ``unix_millis`` does, of a collected timestamp
    (naive UTC, see :mod:`toolkit.utc`; for comparing collected timestamps with each other)."""
    return None if ts is None else utc.epoch_micros(ts) // 1000


def unix_seconds(ts: datetime | None) -> int | None:
    """Seconds since the epoch, rounded down as Spark's ``unix_timestamp`` does, of a collected timestamp
    (naive UTC, see :mod:`toolkit.utc`; for comparing collected timestamps with each other)."""
    return None if ts is None else utc.epoch_micros(ts) // 1_000_000


def has_rows(df: DataFrame) -> bool:
    """Whether ``df`` has at least one row (reads one row at most)."""
    return bool(df.limit(1).collect())


def fmt_int(value: Any) -> str:
    """``81732`` -> ``81,732``; ``None`` -> ``unknown``."""
    return "unknown" if value is None else f"{int(value):,}"


def fmt_ts(value: datetime | None) -> str:
    """``2026-03-07 10:06:07.807 UTC`` (or ``unknown``) of a collected (naive UTC) or an aware timestamp."""
    if value is not None and value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return "unknown" if value is None else value.strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d} UTC"


def captured_checkpoints(tl: Any) -> DataFrame:
    """Readable changelog checkpoint entries of state captures (a task's ``.checkpoint``, 4.3's
    ``.checkpoint_<store>``; not ``<store>.position`` files, whose offsets are input positions), with an
    effective ``capture_time``.

    A plain copy or ``tar`` of ``state.dir`` has no capture time (``capture_time`` null); the newest
    file mtime of the same capture is then a lower bound of when it was taken.
    """
    newest = tl.state.state_files.groupBy("host", "source").agg(F.max("mtime").alias("_newest"))
    files = tl.state.checkpoints.where(F.col("problem").isNull() & F.col("offset").isNotNull()
                                       & (F.col("file_kind").isin(*CHANGELOG_CHECKPOINT_FILES)
                                          | F.col("file_kind").isNull()))
    return files.join(newest, ["host", "source"], "left").withColumn(
        "capture_time", F.coalesce(F.col("capture_time"), F.col("_newest"))).drop("_newest")


def summary_before(tl: Any, moments: DataFrame) -> DataFrame:
    """For each row of ``moments`` (events with ``host, run_id, stream_thread, ts, source, line_no``), the same
    thread's last ``Processed N total records`` summary at or before it: the input rate just before that moment.

    Columns: ``source``, ``line_no`` (of the moment), ``summary`` (struct ``ts, line_no, records, span_ms,
    source``; ``span_ms`` is the time the summary covers). Moments without a summary before them are absent.
    """
    at = moments.where(F.col("stream_thread").isNotNull()).select(
        "host", "run_id", "stream_thread", F.col("ts").alias("_at"), F.col("source").alias("_at_source"),
        F.col("line_no").alias("_at_line"))
    by_thread = Window.partitionBy("run_id", "stream_thread").orderBy("ts", "line_no")
    summaries = (tl.events.where((F.col("event") == "PROCESSING_SUMMARY") & F.col("records").isNotNull()
                                 & F.col("stream_thread").isNotNull())
                 .withColumn("_prev", F.lag("ts").over(by_thread))
                 .select("host", "run_id", "stream_thread", "ts", "records", "source", "line_no",
                         F.coalesce(F.col("duration_ms").cast("double"),
                                    (F.unix_millis("ts") - F.unix_millis("_prev")).cast("double")).alias("span_ms")))
    return (summaries.join(at, ["host", "run_id", "stream_thread"]).where(F.col("ts") <= F.col("_at"))
            .groupBy(F.col("_at_source").alias("source"), F.col("_at_line").alias("line_no"))
            .agg(F.max(F.struct("ts", "line_no", "records", "span_ms", "source")).alias("summary")))


#: Streams rebalance protocol (KIP-1071): the member states in which a member has lost its tasks
#: (``StreamsMembershipManager#onFenced`` and ``#transitionToStale`` both invoke the tasks-lost callback).
STREAMS_LOSS_STATES = ("FENCED", "STALE")
#: Lines of one loss: the heartbeat's fence line, the member's transition, ``Revoking previously assigned and now lost
#: active tasks`` and ``Invoking tasks lost callback for all tasks`` follow each other within this many seconds, or
#: later when the stream thread was stuck in processing (the callback runs on its next ``poll()``).
STREAMS_LOSS_EPISODE_S = 300


def streams_loss_lines(tl: Any) -> DataFrame:
    """Every line of the streams protocol that says a thread's tasks were lost: a member transition to ``FENCED``
    or ``STALE`` and the ``TASKS_LOST`` lines (several per loss; see :func:`streams_task_losses`)."""
    return tl.events.where(
        (F.col("event") == "TASKS_LOST")
        | ((F.col("event") == "MEMBER_STATE") & F.col("to_state").isin(*STREAMS_LOSS_STATES)))


def streams_task_losses(tl: Any) -> DataFrame:
    """One row per loss of a stream thread's tasks under the streams protocol, counted once: its first line.

    A loss starts with the member's transition to ``FENCED`` or ``STALE``; the ``TASKS_LOST`` lines that follow on
    the same thread (``StreamsMembershipManager``'s ``Revoking previously assigned and now lost active tasks``, the
    invoker's ``Invoking tasks lost callback for all tasks``) belong to it. A ``TASKS_LOST`` line with no loss line of
    its thread in the :data:`STREAMS_LOSS_EPISODE_S` before it starts a loss of its own (a log that lost the
    transition, or a leave of a member that had no epoch yet). Rows carry the events' columns, with ``event``
    ``TASKS_LOST``.
    """
    lines = streams_loss_lines(tl).withColumn("_thread", F.coalesce("stream_thread", "thread"))
    by_thread = Window.partitionBy("host", "run_id", "_thread").orderBy("ts", "line_no")
    prev = F.lag("ts").over(by_thread)
    starts = (lines.withColumn("_prev", prev)
              .where((F.col("event") == "MEMBER_STATE") | F.col("_prev").isNull()
                     | (F.unix_timestamp("ts") - F.unix_timestamp("_prev") > STREAMS_LOSS_EPISODE_S)))
    return starts.withColumn("event", F.lit("TASKS_LOST")).drop("_thread", "_prev")
