"""Column contracts shared by the pipeline stages (see docs/outputs/tables.md).

Each stage promises these columns; later stages may rely on them and nothing else.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Callable, Iterable

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


class TableMismatch(ValueError):
    """A table's columns differ from its declaration (raised by :func:`require_schema`)."""


def _type_text(data_type: DataType) -> str:
    # Nullability is not part of a table's contract: parquet reads every column back as nullable.
    return data_type.simpleString()


def schema_mismatches(actual: StructType, expected: StructType, *, extra_ok: bool = False,
                      types: bool = True) -> list[str]:
    """What keeps ``actual`` from being ``expected``: missing columns (with the closest present name when one
    looks misspelt), columns of another type (unless not ``types``: a caller that casts) and, unless ``extra_ok``,
    columns the declaration lacks; the order of columns is not checked. Empty when they conform."""
    from difflib import get_close_matches

    have = {f.name: f.dataType for f in actual.fields}
    want = {f.name: f.dataType for f in expected.fields}
    extra = [name for name in have if name not in want]
    problems = []
    for name, kind in want.items():
        if name not in have:
            near = get_close_matches(name, extra, n=1)
            problems.append(f"missing column {name!r}" + (f" (is {near[0]!r} a misspelling?)" if near else ""))
        elif types and _type_text(have[name]) != _type_text(kind):
            problems.append(f"column {name!r} is {_type_text(have[name])}, declared {_type_text(kind)}")
    if not extra_ok and extra:
        problems.append(f"undeclared column{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))}")
    return problems


def require_schema(actual: StructType, expected: StructType, table: str, *, extra_ok: bool = False,
                   types: bool = True) -> None:
    """Fail with :class:`TableMismatch` naming ``table`` and each difference when ``actual`` does not conform
    to ``expected`` (see :func:`schema_mismatches`): a missing or misspelt column is an error, never a null."""
    problems = schema_mismatches(actual, expected, extra_ok=extra_ok, types=types)
    if problems:
        raise TableMismatch(f"table {table!r} does not match its declaration: {'; '.join(problems)}")


def table_fields(names: Iterable[str], annotation: str, *, after: str | None = None, optional: Iterable[str] = (),
                 default_factory: Callable[[], Any] | None = None) -> Callable[[type], type]:
    """Class decorator, applied under ``@dataclass``: one field per table name, so a class that holds one value
    per table (``Timeline``, the state containers) is derived from the declaration of the tables, not a copy.

    Each name becomes a field annotated ``annotation`` (text, read in the class's module). Required tables are
    placed right after the field ``after`` (first when ``None``); ``optional`` ones go last with default
    ``None``, for callers that may leave them out; ``default_factory`` gives every table field that default.
    A table the class already declares is an error: the list is here, and only here.
    """
    names = tuple(names)
    optional = set(optional)

    def decorate(cls: type) -> type:
        own = dict(cls.__dict__.get("__annotations__", {}))
        clash = sorted(set(own) & set(names))
        if clash:
            raise TypeError(f"{cls.__name__} declares table fields {clash} itself; they come from the table list")
        required = {name: annotation for name in names if name not in optional}
        at = 0 if after is None else list(own).index(after) + 1
        items = list(own.items())
        merged = dict([*items[:at], *required.items(), *items[at:]])
        for name in names:
            if name in optional:
                merged[name] = f"{annotation} | None"
                setattr(cls, name, None)
            elif default_factory is not None:
                setattr(cls, name, field(default_factory=default_factory))
        cls.__annotations__ = merged
        return cls

    return decorate
