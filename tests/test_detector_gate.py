"""The detector gate: preconditions checked in one query; a detector whose precondition is false is skipped.

The timelines are written from real template wording (as in the detectors' tests, ``tests/detectors/``); that
gating never changes the findings of the shipped samples is checked in ``test_detector_framework``.
"""

from __future__ import annotations

import pytest

from support.timelines import at, eos_timeline, ev, failed_lock, make_timeline
from toolkit.detectors import DetectorResults, gate_detectors, registered_detectors, run_detectors
from toolkit.detectors.base import REGISTRY, detector
from toolkit.detectors.preconditions import (
    all_of,
    any_of,
    check_row_counts,
    evaluate,
    events_named,
    rows_in,
)

PROBE = "test-gate-probe"


@pytest.fixture
def probe():
    """A detector that needs a failed lock and records each call (it finds nothing itself)."""
    calls = []

    @detector(id=PROBE, title="probe", severity="warning", needs=("locks",), requires=rows_in("locks", "kind = 'failed'"))
    def _probe(tl):
        calls.append(tl)
        return []

    yield calls
    del REGISTRY[PROBE]


def _jobs_of(spark, group, fn):
    """What ``fn()`` returns and how many Spark jobs it ran."""
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        result = fn()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return result, len(context.statusTracker().getJobIdsForGroup(group))


def test_false_precondition_skips_the_detector_without_running_it(spark, probe):
    tl = make_timeline(spark, locks=[{**failed_lock("0_1", 0, 1), "kind": "acquired"}])
    found = run_detectors(tl, only=[PROBE, "lock-contention"])
    assert found == [] and probe == []
    assert isinstance(found, DetectorResults)
    assert found.ran == () and set(found.skipped) == {PROBE, "lock-contention"}
    assert "locks has rows where kind = 'failed'" in found.skipped["lock-contention"]


def test_true_precondition_runs_the_detector(spark, probe):
    locks = [failed_lock("0_1", 0, 1), failed_lock("0_1", 90, 2)]
    found = run_detectors(make_timeline(spark, locks=locks), only=[PROBE, "lock-contention"])
    assert len(probe) == 1 and found.skipped == {}
    assert found.ran == (PROBE, "lock-contention")
    assert [f.detector for f in found] == ["lock-contention"]


def test_without_the_gate_every_detector_runs(spark, probe):
    found = run_detectors(make_timeline(spark), only=[PROBE], gate=False)
    assert len(probe) == 1 and found.ran == (PROBE,) and found.skipped == {}


def test_a_skipped_detector_runs_no_spark_job(spark, probe):
    tl = make_timeline(spark)
    gated, gated_jobs = _jobs_of(spark, "gate-only", lambda: gate_detectors(tl, [registered_detectors()["lock-contention"]]))
    assert gated == {"lock-contention": "locks has rows where kind = 'failed'"}
    found, jobs = _jobs_of(spark, "gate-and-skip", lambda: run_detectors(tl, only=[PROBE, "lock-contention"]))
    assert found == [] and probe == []
    assert jobs == gated_jobs  # the gate's own query and nothing else


def test_every_precondition_is_checked_in_one_query(spark, monkeypatch):
    """All detectors' preconditions: one aggregate whose result has a row per matched check at most."""
    tl = eos_timeline(spark)
    frame_class = type(tl.events)
    collects = []
    original = frame_class.collect

    def counted(self):
        collects.append(self)
        return original(self)

    monkeypatch.setattr(frame_class, "collect", counted)
    specs = list(registered_detectors().values())
    skipped = gate_detectors(tl, specs)
    assert len(collects) == 1
    assert "eos-stale-restore-checkpoint" not in skipped and "unclean-shutdown" not in skipped
    assert {"lock-contention", "kinesis-checkpoint-migration-loss", "nifi-checkpoints-stopped"} <= set(skipped)


def test_row_checks_count_min_rows_and_state_tables(spark):
    tl = eos_timeline(spark, capture=True)
    facts = check_row_counts(tl, [
        rows_in("process_runs"), rows_in("process_runs", min_rows=3), rows_in("process_runs", "end_kind = 'crash'"),
        rows_in("state.checkpoints", "offset = 1000"), rows_in("locks"),
        events_named("RESTORE_END"), events_named("RESTORE_END", where="records > 1000"),
        rows_in("no_such_table")])
    assert list(facts.values()) == [True, False, True, True, False, True, False, None]


def test_also_events_match(spark):
    line = ev(1, at(1), "stream-thread [app-StreamThread-1] Detected the states of tasks [0_1] are corrupted.",
              "TASK_CLOSED_DIRTY", also_events=["TASK_CORRUPTED"])
    facts = check_row_counts(make_timeline(spark, events=[line]),
                             [events_named("TASK_CORRUPTED"), events_named("TASK_CORRUPTED", also=False)])
    assert list(facts.values()) == [True, False]


def test_unknown_checks_never_skip():
    known, unknown = rows_in("locks"), rows_in("wipes")
    facts = {known: False, unknown: None}
    assert evaluate(known, facts) is False
    assert evaluate(all_of(known, unknown), facts) is False
    assert evaluate(any_of(known, unknown), facts) is None
    assert evaluate(all_of(unknown), facts) is None
    assert evaluate(None, facts) is True


def test_a_timeline_without_the_tables_runs_every_detector(spark):
    """A table the gate cannot read leaves the decision to the detector (which reports what is missing)."""
    found = run_detectors(object(), only=["lock-contention"])
    assert found.skipped == {} and [f.severity for f in found] == ["error"]


def test_requires_must_read_only_declared_tables():
    with pytest.raises(ValueError, match="needs does not declare"):
        detector(id="test-undeclared", title="x", severity="info", needs=("events",),
                 requires=rows_in("state.checkpoints"))
    assert "test-undeclared" not in REGISTRY
