"""The detector harness (``toolkit.detectors.harness``): tables from a few typed rows, checked against their declared
schemas. Its use on real lines is in ``tests/detectors/`` (lock contention, unclean shutdown)."""

from __future__ import annotations

import pytest

from support.timelines import at
from toolkit.detectors.harness import event_schema, run_detector, timeline_of


def test_a_column_the_table_does_not_have_is_an_error_not_a_null(spark):
    with pytest.raises(ValueError, match=r"process_runs has no column end_knd"):
        timeline_of(spark, process_runs=[{"host": "h0", "end_knd": "crash"}])
    with pytest.raises(ValueError, match=r"no timeline table lock\b"):
        timeline_of(spark, lock=[{"host": "h0"}])
    with pytest.raises(ValueError, match=r"state checkpoint\b"):
        timeline_of(spark, state={"checkpoint": []})


def test_events_carry_the_catalogue_fields(spark):
    names = set(event_schema().fieldNames())
    assert {"source", "line_no", "ts", "message", "event", "task_id", "partitions", "run_id"} <= names


def test_rows_given_as_pandas_are_the_same_rows(spark):
    """NaN and NaT of a pandas table are nulls; its timestamps are the same instants."""
    import pandas as pd

    runs = [{"host": "h0", "run_id": "h0#1", "run_no": 1, "product": "kafka-streams", "start": at(0), "end": at(50),
             "end_kind": "crash", "end_source": "h0/app.log", "end_line_no": 10},
            {"host": "h0", "run_id": "h0#2", "run_no": 2, "product": "kafka-streams", "start": at(100), "end": None,
             "end_kind": "unknown", "end_source": None, "end_line_no": None}]
    as_dicts = run_detector(spark, "unclean-shutdown", process_runs=runs)
    as_pandas = run_detector(spark, "unclean-shutdown", process_runs=pd.DataFrame(runs))
    assert [f.title for f in as_dicts] == ["h0: 1 kafka-streams run(s) ended without a clean shutdown"]
    assert [(f.title, f.explanation, f.ts) for f in as_pandas] == [(f.title, f.explanation, f.ts) for f in as_dicts]
