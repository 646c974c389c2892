"""The table registry: every table the toolkit writes or hands from one stage to the next, declared once.

Each :class:`TableSpec` names a table as the :class:`~toolkit.timeline.Timeline` reaches it (``events``,
``process_runs``, ``state.checkpoints``: the names detectors' ``needs`` and preconditions use), its Spark
schema, the stage that produces it and the parquet file it is written to under the output folder. The schemas
themselves stay with the stage that owns them (``toolkit.schemas``, ``toolkit.state.schemas``,
``toolkit.events.schemas``, ``toolkit.timeline.schemas``), where that stage's own code reads them without
reaching up the layers; this module is the one list of all of them. What is derived from it:

* the ``Timeline`` and state containers hold one field per table of their stage (``toolkit.schemas.table_fields``);
* ``@detector`` refuses a detector whose ``needs`` or precondition names a table or column not declared here;
* :func:`check_table` fails on a table whose columns differ from its declaration (tests check every table a
  sample analysis writes with it).

Not tables in this sense: ``ingest.json`` and ``findings.json`` (JSON documents, ``docs/findings-schema.md``),
and the parse cache's own storage (records keyed by file, kept copies of export entries), which is read back only
by the cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import get_close_matches
from typing import Iterable

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from toolkit.events.schemas import (
    CONFIG_SCHEMA,
    EVENTS_SCHEMA,
    RUN_BOUNDS_SCHEMA,
    TIMELINE_CONFIG_SCHEMA,
    UNKNOWN_SHAPES_SCHEMA,
)
from toolkit.schemas import CANDIDATE_COLUMN, STORED_RECORD_SCHEMA, require_schema
from toolkit.state.schemas import STATE_SCHEMAS
from toolkit.timeline.schemas import TABLES as TIMELINE_SCHEMAS

#: Stages that produce tables, in pipeline order.
STAGES: tuple[str, ...] = ("parse", "state", "events", "timeline")
#: The ``Timeline`` attribute that holds every state table (``state.<name>``): a group, not a table.
STATE_GROUP = "state"


@dataclass(frozen=True)
class TableSpec:
    """One table: its name (as the ``Timeline`` reaches it), schema, producing stage and file.

    ``path`` is relative to the output folder; ``partition_by`` the columns that are folder names in it (their
    values are in the path, not in the files); ``on_timeline`` whether the ``Timeline`` holds it (only those may be
    named in a detector's ``needs``); ``timeline_schema`` the shape the ``Timeline`` holds when it differs from
    the file's (``config`` gains each dump's ``run_id``).
    """

    name: str
    schema: StructType
    stage: str
    path: str
    summary: str
    on_timeline: bool = True
    partition_by: tuple[str, ...] = ()
    timeline_schema: StructType | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns of the table as the ``Timeline`` holds it."""
        return tuple((self.timeline_schema or self.schema).fieldNames())


def _declare() -> dict[str, TableSpec]:
    specs = [
        TableSpec("records", STORED_RECORD_SCHEMA, "parse", "records.parquet",
                  "one row per log record (first line and folded continuation lines)",
                  on_timeline=False, partition_by=(CANDIDATE_COLUMN,)),
        *(TableSpec(f"{STATE_GROUP}.{name}", schema, "state", f"state/{name}.parquet", "state-capture facts")
          for name, schema in STATE_SCHEMAS.items()),
        TableSpec("events", EVENTS_SCHEMA, "events", "events.parquet", "classified records, tagged with their run"),
        TableSpec("config", CONFIG_SCHEMA, "events", "config.parquet", "configuration dumps, one row per key",
                  timeline_schema=TIMELINE_CONFIG_SCHEMA),
        TableSpec("run_bounds", RUN_BOUNDS_SCHEMA, "events", "run_bounds.parquet",
                  "each process run's first and last line among all records", on_timeline=False),
        TableSpec("unknown_shapes", UNKNOWN_SHAPES_SCHEMA, "events", "unknown_shapes.parquet",
                  "message shapes no template classifies", on_timeline=False),
        *(TableSpec(name, schema, "timeline", f"{name}.parquet", "timeline table")
          for name, schema in TIMELINE_SCHEMAS.items()),
    ]
    return {spec.name: spec for spec in specs}


#: Every table by name, in pipeline order.
REGISTRY: dict[str, TableSpec] = _declare()


def table(name: str) -> TableSpec:
    """The declaration of ``name``; ``KeyError`` naming the registered tables when there is none."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"no table {name!r} in the table registry (toolkit.tables); tables: "
                       f"{', '.join(REGISTRY)}") from None


def tables_of(stage: str) -> dict[str, TableSpec]:
    """The tables ``stage`` (:data:`STAGES`) produces, in order."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, not {stage!r}")
    return {name: spec for name, spec in REGISTRY.items() if spec.stage == stage}


def timeline_attributes() -> tuple[str, ...]:
    """What a detector may name in ``needs``: the tables the ``Timeline`` holds, and ``state`` (its state tables)."""
    return (*(name for name, spec in REGISTRY.items() if spec.on_timeline and "." not in name), STATE_GROUP)


def check_table(df: DataFrame | StructType, name: str, *, as_written: bool = True) -> None:
    """Fail (``toolkit.schemas.TableMismatch``, naming the table and each missing, misspelt, mistyped or
    undeclared column) unless ``df`` (a DataFrame or a schema) is exactly the declared table.

    ``as_written``: the table as its file holds it (a partitioned table read back has its partition columns as
    folder names, whose type the reader guesses: only their presence is checked); else as the ``Timeline``
    holds it."""
    spec = table(name)
    actual = df if isinstance(df, StructType) else df.schema
    expected = spec.schema if as_written else (spec.timeline_schema or spec.schema)
    if as_written and spec.partition_by:
        missing = [c for c in spec.partition_by if c not in actual.fieldNames()]
        require_schema(StructType([f for f in actual.fields if f.name not in spec.partition_by]),
                       StructType([f for f in expected.fields if f.name not in spec.partition_by]), name)
        if missing:
            require_schema(actual, expected, name)  # names the missing partition column
        return
    require_schema(actual, expected, name)


def check_detector_reads(detector_id: str, needs: Iterable[str], reads: Iterable[tuple[str, Iterable[str]]]) -> None:
    """Fail (``ValueError``) when a detector's ``needs`` name something the ``Timeline`` does not hold, or its
    precondition (``reads``: each table it reads with the columns it reads there) names a table or a column the
    registry does not declare. Called by ``@detector`` at registration, so a misspelling fails at import, not
    as a silently skipped detector."""
    allowed = timeline_attributes()
    problems = []
    for name in needs:
        if name not in allowed:
            known = " (a file, not a Timeline attribute)" if name in REGISTRY else ""
            problems.append(f"needs names {name!r}, which is no table the Timeline holds{known}")
    for name, columns in reads:
        spec = REGISTRY.get(name)
        if spec is None or not spec.on_timeline:
            problems.append(f"its precondition reads table {name!r}, which the table registry does not declare")
            continue
        declared = set(spec.columns)
        for column in sorted(set(columns) - declared):
            near = get_close_matches(column, spec.columns, n=1)
            problems.append(f"its precondition reads column {column!r} of {name!r}, which the table does not "
                            "declare" + (f" (did you mean {near[0]!r}?)" if near else ""))
    if problems:
        raise ValueError(f"detector {detector_id!r}: " + "; ".join(problems))
