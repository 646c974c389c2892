"""The timeline object: :class:`Timeline` (one DataFrame per table of :mod:`toolkit.timeline.schemas` plus the
inputs it was built from) and :class:`StateFacts` (the state-capture tables it carries), with the queries every
table shares (a task, a time range, clock-skew correction, counts, writing).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from functools import reduce
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from toolkit import utc
from toolkit.schemas import table_fields
from toolkit.state.schemas import STATE_SCHEMAS, STATE_TABLES
from toolkit.timeline.schemas import TABLES

#: State tables a caller may leave out of :class:`StateFacts` (the NiFi write-ahead logs came later): empty then.
OPTIONAL_STATE_TABLES = ("nifi_repository_files", "nifi_local_state")
#: Timeline tables a caller may leave out of :class:`Timeline`: NiFi repository checkpoints/restores and
#: component-state changes (``toolkit.timeline.nifi``). The build derives them with the other tables, and every
#: timeline made from this one carries them over; derived from ``events`` and ``state`` here only when a caller
#: builds a Timeline without them.
OPTIONAL_TIMELINE_TABLES = ("nifi_checkpoints", "nifi_state_changes")


@dataclass
@table_fields(STATE_TABLES, "DataFrame", optional=OPTIONAL_STATE_TABLES)
class StateFacts:
    """State-capture tables, one per name of ``toolkit.state.schemas.STATE_TABLES`` in that order.

    Empty frames when nothing was captured.
    """

    # One DataFrame per state table, added by ``table_fields``; the NiFi write-ahead logs' are optional, as
    # empty frames when not given (older callers build StateFacts without them).

    def __post_init__(self) -> None:
        spark = self.state_files.sparkSession
        for name, schema in STATE_SCHEMAS.items():
            if getattr(self, name) is None:
                setattr(self, name, utc.create_frame(spark, [], schema))


@dataclass
@table_fields(TABLES, "DataFrame", after="state", optional=OPTIONAL_TIMELINE_TABLES)
class Timeline:
    """The reconstructed incident: every table is a Spark DataFrame (schemas in ``schemas.py``)."""

    events: DataFrame
    config: DataFrame
    state: StateFacts
    # then one DataFrame per table of ``toolkit.timeline.schemas.TABLES``, added by ``table_fields``
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.nifi_checkpoints is None or self.nifi_state_changes is None:
            from toolkit.timeline.nifi import nifi_tables

            built = nifi_tables(self.events, self.state)
            self.nifi_checkpoints = built["nifi_checkpoints"] if self.nifi_checkpoints is None else self.nifi_checkpoints
            self.nifi_state_changes = (built["nifi_state_changes"] if self.nifi_state_changes is None
                                       else self.nifi_state_changes)

    @property
    def spark(self) -> SparkSession:
        return self.events.sparkSession

    def tables(self) -> dict[str, DataFrame]:
        """The derived tables by name (not the inputs)."""
        return {name: getattr(self, name) for name in TABLES}

    def for_task(self, task_id: str) -> "Timeline":
        """The same timeline restricted to rows about one task (tables without a task keep all rows)."""
        return self._filtered(lambda df: df.where(F.col("task_id") == task_id) if "task_id" in df.columns else df)

    def between(self, start: datetime | str, end: datetime | str) -> "Timeline":
        """Rows whose time (``ts``, or an interval ``start``..``end``) overlaps [start, end]."""
        t0, t1 = utc.lit(start), utc.lit(end)

        def cut(df: DataFrame) -> DataFrame:
            if "ts" in df.columns:
                return df.where(F.col("ts").isNull() | F.col("ts").between(t0, t1))
            if "start" in df.columns and "end" in df.columns:
                return df.where((F.coalesce("start", t0) <= t1) & (F.coalesce("end", t1) >= t0))
            return df

        return self._filtered(cut)

    def corrected_for_clock_skew(self, min_confidence: str = "medium") -> "Timeline":
        """The same timeline with each host's estimated clock offset removed from its times.

        Offsets come from ``clock_skew`` (reported always, applied only when asked: an estimate
        can be wrong when members genuinely joined at different moments). Hosts whose estimate is
        below ``min_confidence`` (``low`` < ``medium`` < ``high``) are left as they are.
        """
        levels = {"low": 0, "medium": 1, "high": 2}
        allowed = [c for c, n in levels.items() if n >= levels[min_confidence]]
        offsets = self.clock_skew.where(F.col("confidence").isin(allowed)).select(
            "host", F.col("offset_ms").alias("_skew_ms"))

        def shift(df: DataFrame) -> DataFrame:
            if "host" not in df.columns or df is self.clock_skew:
                return df
            times = [f.name for f in df.schema.fields if f.dataType.typeName() == "timestamp"]
            if not times:
                return df
            df = df.join(F.broadcast(offsets), "host", "left")
            for name in times:
                df = df.withColumn(name, F.when(F.col("_skew_ms").isNull(), F.col(name)).otherwise(
                    F.timestamp_millis(F.unix_millis(name) - F.col("_skew_ms"))))
            return df.drop("_skew_ms")

        # Capture files carry the host's clock; DynamoDB and CloudTrail times are AWS's own.
        host_clock_state = {"state_files", "checkpoints", "nifi_repository_files", "nifi_local_state"}
        corrected = self._filtered(shift, lambda name, df: shift(df) if name in host_clock_state else df)
        corrected.notes = [*self.notes, f"times corrected for clock skew ({min_confidence} confidence or better)"]
        return corrected

    def _filtered(self, fn, state_fn=None) -> "Timeline":
        kwargs = {}
        for f in fields(self):
            value = getattr(self, f.name)
            kwargs[f.name] = fn(value) if isinstance(value, DataFrame) else value
        state = self.state
        state_fn = state_fn or (lambda _name, df: fn(df))
        kwargs["state"] = StateFacts(**{f.name: state_fn(f.name, getattr(state, f.name)) for f in fields(state)})
        return Timeline(**kwargs)

    def summary(self) -> pd.DataFrame:
        """Row counts and time span per table (bounded pandas)."""
        # One query for all tables (a job per table is most of the time on a small bundle).
        parts = []
        for order, (name, df) in enumerate(self.tables().items()):
            time_col = "ts" if "ts" in df.columns else ("start" if "start" in df.columns else None)
            no_time = F.lit(None).cast("timestamp")
            parts.append(df.agg(
                F.lit(order).alias("order"), F.lit(name).alias("table"), F.count(F.lit(1)).alias("rows"),
                F.min(time_col).cast("timestamp").alias("first") if time_col else no_time.alias("first"),
                F.max(time_col).cast("timestamp").alias("last") if time_col else no_time.alias("last")))
        if not parts:
            return pd.DataFrame(columns=["table", "rows", "first", "last"])
        rows = sorted(utc.collect(reduce(DataFrame.unionByName, parts)), key=lambda r: r["order"])
        return pd.DataFrame([{"table": r["table"], "rows": r["rows"], "first": r["first"], "last": r["last"]}
                             for r in rows])

    def write(self, out_dir: Path | str) -> list[Path]:
        """Write every derived table as ``<out_dir>/<name>.parquet``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, df in self.tables().items():
            path = out / f"{name}.parquet"
            df.write.mode("overwrite").parquet(str(path.resolve()))
            written.append(path)
        return written
