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

