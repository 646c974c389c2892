"""Stream threads' input rate before a moment, and the task losses of the streams rebalance protocol (KIP-1071).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F




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
