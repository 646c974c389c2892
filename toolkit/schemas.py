"""Column contracts shared by the pipeline stages (see docs/outputs/tables.md).

Each stage promises these columns; later stages may rely on them and nothing else.
"""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)


def struct(*fields: tuple[str, DataType]) -> StructType:
    """A schema of nullable columns from ``(name, type)`` pairs, in order."""
    return StructType([StructField(name, kind, True) for name, kind in fields])


#: One row per log record (a first line plus its folded continuation lines).
RECORD_SCHEMA = StructType(
    [
        StructField("source", StringType(), False),  # path inside the bundle
        StructField("line_no", LongType(), False),  # 1-based number of the record's first line
        StructField("host", StringType(), True),
        StructField("ts", TimestampType(), True),  # UTC
        StructField("ts_raw", StringType(), True),
        StructField("level", StringType(), True),
        StructField("thread", StringType(), True),
        StructField("logger", StringType(), True),
        StructField("message", StringType(), True),  # first line plus non-stack continuation lines
        StructField("stack", StringType(), True),  # stack trace lines, if any
        StructField("layout", StringType(), False),  # layout id, or 'unparsed'
        StructField("ts_quality", StringType(), True),  # exact | date_inferred | missing
        StructField("line_count", IntegerType(), False),  # physical lines in this record
    ]
)

RECORD_COLUMNS: tuple[str, ...] = tuple(f.name for f in RECORD_SCHEMA.fields)

#: ``records.parquet`` is partitioned by this column: true for the records a catalogue template, a configuration
#: dump or a process-start marker may need (``toolkit.catalogue.gate``); classification reads only those.
CANDIDATE_COLUMN = "candidate"
#: The records as ``records.parquet`` holds them: :data:`RECORD_SCHEMA` and the partition column.
STORED_RECORD_SCHEMA = StructType([*RECORD_SCHEMA.fields, StructField(CANDIDATE_COLUMN, BooleanType(), True)])

UNPARSED = "unparsed"
