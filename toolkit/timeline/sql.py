"""SQL text for the timeline's expressions.

Classic PySpark makes a round trip to the JVM for every Column it builds (about ten with the query
context it records), while one ``selectExpr``, ``where`` or ``F.expr`` of SQL text makes a single one
for the whole expression. The timeline tables are a few hundred expressions, so they are written as SQL
text: the plans are the same, they are built in a fraction of the time, and Spark Connect accepts them
unchanged.
"""

from __future__ import annotations

from typing import Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType, TimestampType

from toolkit.schemas import TableMismatch, require_schema
from toolkit.sqltext import event_in, sql_str
from toolkit.timeline.schemas import TABLES


def sql_map(pairs: Mapping[str, str]) -> str:
    """A literal ``map(...)`` of strings to strings."""
    return "map(" + ", ".join(f"{sql_str(k)}, {sql_str(v)}" for k, v in pairs.items()) + ")"


def sql_type(data_type: DataType) -> str:
    """A column type as SQL text; ``TimestampType`` is named ``timestamp_ltz`` so that it means the same
    whatever ``spark.sql.timestampType`` says."""
    return "timestamp_ltz" if isinstance(data_type, TimestampType) else data_type.simpleString()


def quoted(name: str) -> str:
    """A column name as an SQL identifier (column names such as ``end`` or ``table`` are keywords)."""
    return "`" + name.replace("`", "``") + "`"


def conform(df: DataFrame, schema: StructType) -> DataFrame:
    """Exactly the schema's columns, in order, each of its type (missing ones as typed nulls): one projection.

    Lenient on purpose, for input that may lack columns (frames built by older callers); the table builders
    use :func:`_conform`, which fails on a column they do not produce unless they say it is absent."""
    present = {f.name: f.dataType for f in df.schema.fields}
    columns = []
    for f in schema.fields:
        name = quoted(f.name)
        if f.name not in present:
            columns.append(f"CAST(NULL AS {sql_type(f.dataType)}) AS {name}")
        elif present[f.name] == f.dataType:
            columns.append(name)
        else:
            columns.append(f"CAST({name} AS {sql_type(f.dataType)}) AS {name}")
    return df.selectExpr(*columns)


# --------------------------------------------------------------------------- shared by the table builders


def _conform(df: DataFrame, name: str, absent: tuple[str, ...] = ()) -> DataFrame:
    """Select exactly the columns of the timeline table ``name``, in order, each of its type.

    Strict: a declared column ``df`` lacks fails (``TableMismatch`` naming the table and the column, and the
    closest name ``df`` has when it looks misspelt), unless it is in ``absent``: a column rows of this origin
    never have (a log line has no file mtime, a capture fact no line number), which becomes a typed null."""
    schema = TABLES[name]
    unknown = [c for c in absent if c not in schema.fieldNames()]
    if unknown:
        raise TableMismatch(f"table {name!r}: columns said to be absent are not declared: {', '.join(unknown)}")
    present = set(df.columns)
    expected = StructType([f for f in schema.fields if f.name in present or f.name not in absent])
    require_schema(df.schema, expected, name, extra_ok=True, types=False)
    return conform(df, schema)


def _is(event: str | tuple[str, ...]) -> str:
    """SQL: the row's event is one of these, or lists one of them in ``also_events``."""
    return event_in((event,) if isinstance(event, str) else event)


def _exprs(*texts: str) -> list:
    """Columns from SQL text (for ``agg`` and ``groupBy``, which take no text of their own)."""
    return [F.expr(t) for t in texts]


#: SQL: the first line of the message.
FIRST_LINE = "substring_index(message, '\\n', 1)"


def _explode_partitions(df: DataFrame) -> DataFrame:
    """One row per changelog partition: list-valued lines (checkpoint maps) become several rows."""
    df = df.selectExpr("*", "explode_outer(CASE WHEN size(partitions) > 1 THEN partitions END) AS _p")
    return df.withColumns({
        name: F.expr(f"coalesce(_p.{name}, {name})") for name in ("topic", "partition", "offset", "end_offset", "records")
    }).drop("_p")
