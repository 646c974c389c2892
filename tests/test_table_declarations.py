"""Each table list is declared once: the state tables by ``toolkit.state.schemas.STATE_SCHEMAS``."""

from __future__ import annotations

from dataclasses import fields

from toolkit import ingest
from toolkit.state import StateRows, StateTables
from toolkit.state.schemas import STATE_SCHEMAS, STATE_TABLES
from toolkit.timeline import StateFacts

# fields that are not tables
_NOT_TABLES = {"problems", "digest", "row_counts"}


def test_state_table_names_follow_the_schema_declaration() -> None:
    assert STATE_TABLES == tuple(STATE_SCHEMAS)
    assert ingest.STATE_TABLES is STATE_TABLES


def test_state_dataclasses_hold_exactly_the_declared_tables_in_order() -> None:
    for holder in (StateFacts, StateTables, StateRows):
        tables = tuple(f.name for f in fields(holder) if f.name not in _NOT_TABLES)
        assert tables == STATE_TABLES, holder.__name__



# --- the table registry (toolkit.tables) -----------------------------------------------------------------------

import pytest  # noqa: E402
from pyspark.sql.types import LongType, StringType, StructField, StructType  # noqa: E402

from toolkit import tables  # noqa: E402
from toolkit.detectors.base import REGISTRY as DETECTORS, detector  # noqa: E402
from toolkit.detectors.preconditions import all_of, columns_read, events_named, rows_in  # noqa: E402
from toolkit.events.schemas import EVENTS_SCHEMA  # noqa: E402
from toolkit.events import EVENT_COLUMNS  # noqa: E402
from toolkit.schemas import TableMismatch, require_schema  # noqa: E402
from toolkit.timeline import Timeline  # noqa: E402
from toolkit.timeline.schemas import TABLES  # noqa: E402


def test_every_stage_table_is_registered_once_with_a_file_of_its_own() -> None:
    assert [n for n in tables.REGISTRY if tables.REGISTRY[n].stage == "timeline"] == list(TABLES)
    assert [n.removeprefix("state.") for n in tables.tables_of("state")] == list(STATE_TABLES)
    assert set(tables.tables_of("events")) == {"events", "config", "run_bounds", "unknown_shapes"}
    assert list(tables.tables_of("parse")) == ["records"]
    paths = [spec.path for spec in tables.REGISTRY.values()]
    assert len(paths) == len(set(paths))
    assert all(spec.stage in tables.STAGES for spec in tables.REGISTRY.values())


def test_the_timeline_holds_exactly_the_tables_a_detector_may_need() -> None:
    held = {f.name for f in fields(Timeline) if f.name != "notes"}
    assert held == set(tables.timeline_attributes())
    assert tuple(f.name for f in fields(Timeline))[3:3 + len(TABLES) - 2] == tuple(TABLES)[:-2]


def test_events_declaration_is_the_classifier_output_and_its_run() -> None:
    assert EVENTS_SCHEMA.fieldNames() == [*EVENT_COLUMNS, "run_no", "run_id"]


def test_strict_conformance_names_the_table_and_the_column() -> None:
    declared = StructType([StructField("host", StringType()), StructField("offset", LongType())])
    require_schema(StructType([StructField("offset", LongType()), StructField("host", StringType(), False)]),
                   declared, "t")  # order and nullability are not part of the contract
    with pytest.raises(TableMismatch, match=r"table 't'.*missing column 'offset' \(is 'ofset' a misspelling\?\)"):
        require_schema(StructType([StructField("host", StringType()), StructField("ofset", LongType())]), declared, "t")
    with pytest.raises(TableMismatch, match=r"column 'offset' is string, declared bigint"):
        require_schema(StructType([StructField("host", StringType()), StructField("offset", StringType())]),
                       declared, "t")
    with pytest.raises(TableMismatch, match=r"undeclared column 'extra'"):
        require_schema(StructType([*declared.fields, StructField("extra", StringType())]), declared, "t")
    with pytest.raises(TableMismatch, match=r"table 'locks'.*missing column 'kind'"):
        tables.check_table(StructType([f for f in TABLES["locks"].fields if f.name != "kind"]), "locks")
    tables.check_table(TABLES["locks"], "locks")


def test_columns_read_off_a_condition() -> None:
    assert columns_read("kind = 'failed' AND `end` IS NULL AND lower(guarantee) LIKE 'exactly%'") == {
        "kind", "end", "guarantee"}
    assert columns_read("exists(partitions, p -> p.offset > 0) AND ts > INTERVAL 5 MINUTES") == {"partitions", "ts"}
    assert columns_read("from_scratch AND coalesce(start_offset, 0) <= 0") == {"from_scratch", "start_offset"}


def _probe(**kwargs):
    return detector(id="test-registry-probe", title="probe", severity="info", **kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"needs": ("lockz",)}, r"needs names 'lockz', which is no table the Timeline holds"),
    ({"needs": ("run_bounds",)}, r"'run_bounds'.*a file, not a Timeline attribute"),
    ({"needs": ("locks",), "requires": rows_in("locks", "knd = 'failed'")},
     r"reads column 'knd' of 'locks', which the table does not declare \(did you mean 'kind'\?\)"),
    ({"needs": ("state",), "requires": rows_in("state.checkpointz")},
     r"reads table 'state.checkpointz', which the table registry does not declare"),
    ({"needs": ("state",), "requires": rows_in("state.checkpoints", "problem IS NULL AND offsett >= 0")},
     r"column 'offsett' of 'state.checkpoints'"),
    ({"needs": ("events", "process_runs"),
      "requires": all_of(events_named("TASK_CORRUPTED", where="stream_threads IS NOT NULL"),
                         rows_in("process_runs", "guarantee IS NOT NULL"))},
     r"column 'stream_threads' of 'events'.*did you mean 'stream_thread'"),
])
def test_a_detector_naming_an_undeclared_table_or_column_fails_at_registration(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        _probe(**kwargs)
    assert "test-registry-probe" not in DETECTORS


def test_a_detector_reading_declared_columns_registers() -> None:
    try:
        fn = _probe(needs=("config", "state", "events"),
                    requires=all_of(rows_in("config", "run_id IS NOT NULL AND `key` = 'processing.guarantee'"),
                                    rows_in("state.nifi_local_state", "cleared"),
                                    events_named("THREAD_STATE", where="to_state = 'RUNNING'")))(lambda tl: [])
        assert fn.detector_id == "test-registry-probe"
    finally:
        DETECTORS.pop("test-registry-probe", None)


def test_every_table_a_sample_analysis_writes_is_declared_and_matches(analysis_of) -> None:
    """Strict: the files of a real analysis (parse, state, events, timeline) are exactly their declarations, and
    nothing else is written as a table; the timeline holds its tables in their declared shape."""
    analysis = analysis_of("kafka-eos-stale-checkpoint")
    out, spark = analysis.out_dir, analysis.events.sparkSession
    written = {str(p.relative_to(out)) for p in out.rglob("*.parquet")
               if p.is_dir() and p.relative_to(out).parts[0] != "work"}
    assert written == {spec.path for spec in tables.REGISTRY.values()}
    for name, spec in tables.REGISTRY.items():
        tables.check_table(spark.read.parquet(str(out / spec.path)), name)
    timeline = analysis.timeline
    for name in tables.timeline_attributes():
        if name != tables.STATE_GROUP:
            tables.check_table(getattr(timeline, name), name, as_written=False)
    for name in STATE_TABLES:
        tables.check_table(getattr(timeline.state, name), f"state.{name}", as_written=False)
