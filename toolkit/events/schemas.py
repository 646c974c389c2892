"""Column contracts of the tables derived from all records (``toolkit.events.derive``): ``events``,
``config``, ``run_bounds`` and ``unknown_shapes``, as the pipeline writes them (``<name>.parquet``).

They were the schema of whatever the DataFrame held; declared here, each write is checked against them in
tests (``tests/test_table_declarations.py``), and ``toolkit.tables`` lists them with every other table.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from toolkit.catalogue import FIELD_TYPES, ITEM_FIELDS
from toolkit.schemas import RECORD_SCHEMA, struct

S, L, I, T, B = StringType(), LongType(), IntegerType(), TimestampType(), BooleanType()

#: The SQL type names ``toolkit.catalogue.FIELD_TYPES`` uses (read without a Spark session).
_SQL_TYPES: dict[str, DataType] = {"string": S, "int": I, "bigint": L}

#: Record columns carried into the events table, as the records declare them.
EVENT_RECORD_COLUMNS: tuple[str, ...] = (
    "source", "line_no", "host", "ts", "level", "thread", "logger", "message", "stack",
)

#: One element of an event's ``partitions`` list (a line naming several partitions).
PARTITION_ITEM = struct(*((name, _SQL_TYPES[FIELD_TYPES[name]]) for name in ITEM_FIELDS))

#: One row per classified log record (``toolkit.events.classify``), tagged with its process run
#: (``toolkit.events.tag_runs``): the record's columns, the template's event, its typed fields, the lists.
EVENTS_SCHEMA = struct(
    *((name, RECORD_SCHEMA[name].dataType) for name in EVENT_RECORD_COLUMNS),
    ("product", S), ("template_id", S), ("event", S), ("also_events", ArrayType(S)), ("prefix_kind", S),
    *((name, _SQL_TYPES[kind]) for name, kind in FIELD_TYPES.items()),
    ("partitions", ArrayType(PARTITION_ITEM)), ("task_ids", ArrayType(S)),
    ("run_no", I), ("run_id", S),
)

#: One row per key of a ``<Class>Config values:`` dump (``toolkit.events.extract_config``), secrets redacted.
CONFIG_SCHEMA = struct(
    ("host", S), ("source", S), ("line_no", L), ("ts", T), ("config_class", S), ("key", S), ("value", S),
)

#: ``config`` as the ``Timeline`` holds it: each dump's rows with the ``run_id`` of the dump's own line
#: (``toolkit.timeline.build.config_with_runs``); ``config.parquet`` does not store it.
TIMELINE_CONFIG_SCHEMA = StructType([*CONFIG_SCHEMA.fields, StructField("run_id", S, True)])

#: Each process run's first and last line among all records (``toolkit.events.run_bounds``).
RUN_BOUNDS_SCHEMA = struct(
    ("host", S), ("run_no", I), ("run_id", S), ("first_ts", T), ("first_source", S), ("last_ts", T),
    ("last_source", S), ("last_line_no", L), ("last_text", S), ("lines", L), ("last_of_file", B),
)

#: The most frequent message shapes no template classifies (``toolkit.events.unknown_shapes``).
UNKNOWN_SHAPES_SCHEMA = struct(
    ("logger", S), ("shape", S), ("count", L), ("example_source", S), ("example_line_no", L), ("example", S),
)
