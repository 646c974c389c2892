"""One detector on a few rows typed by hand: no bundle, no parsing, the runner's own rules.

A detector is written with its test beside it: the lines of the incident it names (their real wording, with
the ``event`` and fields the catalogue gives them) and of a healthy twin, run through the detector alone::

    from toolkit.detectors.harness import run_detector

    found = run_detector(spark, "lock-contention", events=[
        {"source": "h0/app.log", "line_no": 1, "host": "h0", "ts": datetime(2026, 3, 7, 9, 0),
         "event": "LOCK_FAILED", "message": "...", "task_id": "0_1"},
    ], process_runs=[{"host": "h0", "run_id": "h0#1", "run_no": 1}])

Each table is built from its declared schema (:data:`toolkit.timeline.schemas.TABLES`,
:data:`toolkit.state.schemas.STATE_SCHEMAS`, :func:`event_schema`): a column a row does not give is null, and a
column the schema does not have is an error, so a typo cannot pass as a missing value. The detector then runs as
:func:`toolkit.detectors.runner.run_detectors` runs it: its precondition checked first (``gate``), on a view of
only the tables it declares, its cited lines read from ``events``.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import IntegralType, StructType

from toolkit import utc
from toolkit.catalogue import FIELD_TYPES
from toolkit.detectors.runner import DetectorResults, run_detectors
from toolkit.state.schemas import STATE_SCHEMAS
from toolkit.timeline import StateFacts, Timeline
from toolkit.timeline.schemas import TABLES

#: One item of an event's ``partitions`` (the partitions a line names, with offsets and counts where it gives them).
PARTITION_ITEM = "struct<topic:string,partition:int,offset:bigint,end_offset:bigint,records:bigint>"
#: Columns of a classified event besides the catalogue's typed fields: the record, its classification, the
#: lists a line names and the process run it belongs to.
EVENT_COLUMNS = ("source string, line_no bigint, host string, ts timestamp, level string, thread string, "
                 "logger string, message string, stack string, product string, template_id string, event string, "
                 "also_events array<string>, prefix_kind string")
#: The startup config dumps (``StreamsConfig values:``), one row per setting of a run.
CONFIG_SCHEMA = "run_id string, key string, value string"

#: Rows as a harness takes them: dicts, or a pandas DataFrame (its missing values become nulls).
Rows = Iterable[Mapping[str, Any]] | Any


def event_schema() -> StructType:
    """The schema of ``Timeline.events``: record and classification columns, every typed field of the catalogue
    (:data:`toolkit.catalogue.FIELD_TYPES`), ``partitions``, ``task_ids`` and the run (``run_no``, ``run_id``)."""
    cols = [EVENT_COLUMNS, *(f"`{name}` {kind}" for name, kind in FIELD_TYPES.items()),
            f"partitions array<{PARTITION_ITEM}>", "task_ids array<string>", "run_no int", "run_id string"]
    return StructType.fromDDL(", ".join(cols))


def _plain(value: Any) -> Any:
    """A pandas or NumPy cell as Python: NaN and NaT are ``None``, times ``datetime``, scalars ``int``/``float``."""
    if value is None or isinstance(value, (str, bytes, list, tuple, dict)):
        return value
    if hasattr(value, "to_pydatetime"):
        return None if str(value) == "NaT" else value.to_pydatetime()
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _records(rows: Rows) -> list[dict[str, Any]]:
    """Plain dicts from dicts or a pandas DataFrame (see :func:`_plain`)."""
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):
        rows = rows.to_dict("records")
    return [{key: _plain(value) for key, value in dict(row).items()} for row in rows]


def _checked(schema: StructType, rows: Rows, table: str) -> list[dict[str, Any]]:
    """``rows`` as plain dicts; a column not in ``schema`` raises ``ValueError`` naming ``table``."""
    records = _records(rows)
    names = [f.name for f in schema.fields]
    unknown = sorted({key for row in records for key in row} - set(names))
    if unknown:
        raise ValueError(f"{table} has no column {', '.join(unknown)} (its columns: {', '.join(names)})")
    return records


def _frame(spark: SparkSession, schema: StructType, records: list[dict[str, Any]]) -> DataFrame:
    names = [f.name for f in schema.fields]
    # pandas holds a whole-number column with a gap as floats (1.0, NaN): back to the integers the schema declares.
    integral = {f.name for f in schema.fields if isinstance(f.dataType, IntegralType)}
    return utc.create_frame(spark, [tuple(int(row[n]) if n in integral and isinstance(row.get(n), float)
                                          and row[n].is_integer() else row.get(n) for n in names)
                                    for row in records], schema)


def frame_of(spark: SparkSession, schema: StructType, rows: Rows, table: str = "table") -> DataFrame:
    """A DataFrame of ``schema`` holding ``rows``; a column not in the schema raises ``ValueError``."""
    return _frame(spark, schema, _checked(schema, rows, table))


def timeline_of(spark: SparkSession, *, events: Rows = (), config: Rows = (),
                state: Mapping[str, Rows] | None = None, **tables: Rows) -> Timeline:
    """A :class:`~toolkit.timeline.Timeline` whose tables hold the given rows and nothing else.

    ``events`` are classified log lines (:func:`event_schema`), ``config`` startup settings, ``state`` the
    state-capture tables by name (``checkpoints``, ``state_files``...), and every other keyword a derived table
    of :data:`toolkit.timeline.schemas.TABLES` (``process_runs``, ``restorations``...). The derived tables are
    taken as given, not derived from ``events``: a test states exactly the facts its detector reads. Every
    table is checked before any is built, so a mistake costs no Spark job.
    """
    state = dict(state or {})
    unknown = sorted(set(tables) - set(TABLES)) + sorted(f"state {name}" for name in set(state) - set(STATE_SCHEMAS))
    if unknown:
        raise ValueError(f"no timeline table {', '.join(unknown)}; tables: {', '.join(TABLES)}; "
                         f"state tables: {', '.join(STATE_SCHEMAS)}")
    given = {"events": (event_schema(), events), "config": (StructType.fromDDL(CONFIG_SCHEMA), config),
             **{f"state.{name}": (schema, state.get(name, ())) for name, schema in STATE_SCHEMAS.items()},
             **{name: (schema, tables.get(name, ())) for name, schema in TABLES.items()}}
    checked = {name: (schema, _checked(schema, rows, name)) for name, (schema, rows) in given.items()}
    frames = {name: _frame(spark, schema, records) for name, (schema, records) in checked.items()}
    facts = StateFacts(**{name: frames[f"state.{name}"] for name in STATE_SCHEMAS})
    return Timeline(events=frames["events"], config=frames["config"], state=facts,
                    **{name: frames[name] for name in TABLES})


def run_detector(spark: SparkSession, detector_id: str, *, events: Rows = (), config: Rows = (),
                 state: Mapping[str, Rows] | None = None, gate: bool = True, **tables: Rows) -> DetectorResults:
    """Run the one detector ``detector_id`` on a timeline of the given rows (:func:`timeline_of`); its findings.

    As in a full run: with ``gate`` the detector is skipped when the rows provably lack its precondition (the
    result's ``skipped`` then names it, ``ran`` is empty), it sees only the tables it declares, a failure
    becomes a finding of severity ``error``, and the lines its findings cite are read from ``events``.
    An unknown id raises ``KeyError``.
    """
    timeline = timeline_of(spark, events=events, config=config, state=state, **tables)
    return run_detectors(timeline, only=[detector_id], gate=gate)

