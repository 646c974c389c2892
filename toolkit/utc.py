"""Timestamps between Spark and the driver, independent of the driver's time zone.

PySpark hands a collected ``TIMESTAMP`` to Python as a naive ``datetime`` in the *local* zone of the
Python process (and turns a naive ``datetime`` given to ``lit`` back from that zone). On a driver whose
zone has daylight saving time, two collected times an hour apart across the change then differ by 0 or
2 hours, and a time printed as UTC is in fact local time.

The toolkit's sessions run in UTC (``spark.sql.session.timeZone``, set by :mod:`toolkit.spark`). Read
through :func:`collect`, :func:`first` or :func:`to_pandas`, every timestamp (also inside structs,
arrays and maps) arrives as a naive ``datetime`` in UTC, whatever the driver's zone: Spark casts it to
``TIMESTAMP_NTZ`` first, which PySpark converts without a zone. :func:`lit` and :func:`epoch_micros`
take such values (or aware ones) back to Spark, and :func:`create_frame` builds a table from rows held in
Python, reading a naive ``datetime`` as UTC.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Sequence

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType, TimestampNTZType, TimestampType

_EPOCH = datetime(1970, 1, 1)


def _utc_type(dt: DataType) -> DataType | None:
    """``dt`` with every ``TIMESTAMP`` in it as ``TIMESTAMP_NTZ``; ``None`` when it holds none."""
    if isinstance(dt, TimestampType):
        return TimestampNTZType()
    if isinstance(dt, ArrayType):
        inner = _utc_type(dt.elementType)
        return None if inner is None else ArrayType(inner, dt.containsNull)
    if isinstance(dt, MapType):
        key, value = _utc_type(dt.keyType), _utc_type(dt.valueType)
        if key is None and value is None:
            return None
        return MapType(key or dt.keyType, value or dt.valueType, dt.valueContainsNull)
    if isinstance(dt, StructType):
        inner = [_utc_type(f.dataType) for f in dt.fields]
        if all(t is None for t in inner):
            return None
        return StructType([StructField(f.name, t or f.dataType, f.nullable, f.metadata)
                           for f, t in zip(dt.fields, inner)])
    return None


def utc_naive(df: DataFrame) -> DataFrame:
    """``df`` with every ``TIMESTAMP`` (also nested) cast to ``TIMESTAMP_NTZ``: its UTC wall-clock time."""
    fields = df.schema.fields
    types = [_utc_type(f.dataType) for f in fields]
    if all(t is None for t in types):
        return df
    # Positional names, so columns with dots or the same name are cast alike and keep their names.
    positional = df.toDF(*[f"_c{i}" for i in range(len(fields))])
    return positional.select(*[
        (F.col(f"_c{i}") if t is None else F.col(f"_c{i}").cast(t)).alias(f.name)
        for i, (f, t) in enumerate(zip(fields, types))])


def collect(df: DataFrame) -> list[Row]:
    """``df.collect()``, timestamps as naive ``datetime`` in UTC (bound ``df`` first: it is all read)."""
    return utc_naive(df).collect()


def first(df: DataFrame) -> Row | None:
    """``df.first()``, timestamps as naive ``datetime`` in UTC."""
    got = collect(df.limit(1))
    return got[0] if got else None


def to_pandas(df: DataFrame) -> Any:
    """``df.toPandas()``, timestamps as naive ``datetime64`` in UTC (bound ``df`` first), without the query's
    metrics.

    Spark Connect attaches the executed plan's metrics to the frame (``attrs``). pandas deep-copies ``attrs``
    into every frame derived from it and Altair deep-copies a chart's data, so a chart of a few dozen rows
    took seconds to draw through a Connect server."""
    frame = utc_naive(df).toPandas()
    frame.attrs.clear()
    return frame


def epoch_micros(value: datetime) -> int:
    """Microseconds since the epoch of a naive ``datetime`` in UTC (as collected here) or an aware one."""
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return (value - _EPOCH) // timedelta(microseconds=1)


def lit(value: datetime | str) -> Column:
    """A timestamp literal: a naive ``datetime`` is UTC; text is read in the session's zone (UTC)."""
    if isinstance(value, datetime):
        if hasattr(value, "to_pydatetime"):  # a pandas Timestamp
            value = value.to_pydatetime()
        return F.timestamp_micros(F.lit(epoch_micros(value)))
    return F.lit(value).cast("timestamp_ltz")


def arrow_schema(schema: StructType) -> Any:
    """``schema`` as a ``pyarrow`` schema, timestamps in microseconds adjusted to UTC (as Spark writes them)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # PySpark before 4.1 has no timezone argument and always uses UTC
        return to_arrow_schema(schema)


@functools.lru_cache(maxsize=64)
def _schema_of(ddl: str) -> StructType:
    return DataType.fromDDL(ddl)  # type: ignore[return-value]


def create_frame(spark: SparkSession, rows: Iterable[Sequence[Any]], schema: StructType | str) -> DataFrame:
    """A table of ``rows`` (tuples in the order of ``schema``, a ``StructType`` or DDL text) held in Python.

    The rows go to Spark as one Arrow table. ``spark.createDataFrame`` given a list instead pickles it, and
    on a classic session every query that reads such a table starts Python worker processes to unpickle it:
    about 0.15 s more per query here, and seconds for the first one of a process. A naive ``datetime`` is
    read as UTC, an aware one is converted."""
    import pyarrow as pa

    struct = _schema_of(schema) if isinstance(schema, str) else schema
    target = arrow_schema(struct)
    rows = list(rows)
    columns = [pa.array([row[i] for row in rows], type=field.type) for i, field in enumerate(target)]
    return spark.createDataFrame(pa.Table.from_arrays(columns, schema=target), struct)
