"""The restore-skipped-after-reassignment detector (KAFKA-7672): a task that comes back to a thread which held it
before goes RUNNING without restoring its changelog. Small timelines for 2.0.1-2.1 and the versions around
them, long logs, the shipped sample, the hand-built bundles with their healthy twins, and the verdicts of its
bug.
"""

from __future__ import annotations

import pytest

from support.bundles import bundle_tests
from support.findings import raised
from support.known_bugs import verdict
from support.long_logs import routine_rows, run_one, same_finding, sql_seconds, with_rows
from support.samples import expected_of
from support.timelines import A1, A2, AUDIT, at, ev, make_timeline, skipped_restore_timeline
from toolkit.detectors import run_detectors

ID = "restore-skipped-after-reassignment"


# --- decision rules on small timelines -----------------------------------------------------------------------------

def _restore_skipped_events(restore_again: bool):
    t1 = "audit-StreamThread-1"
    common = {"run_id": "h0#1", "stream_thread": t1}
    events = [
        ev(1, at(0), "Restoring partition audit-changelog-1 from offset 0 to endOffset 734112", "RESTORE_START",
           topic="audit-changelog", partition=1, offset=0, end_offset=734112, **common),
        ev(2, at(40), "State transition from PARTITIONS_ASSIGNED to RUNNING", "THREAD_STATE", to_state="RUNNING",
           **common),
        ev(3, at(4000), "No checkpoint found for task 1_1 state store store1 changelog audit-changelog-1 with EOS "
                        "turned on. Reinitializing the task and restore its state from the beginning.",
           "CHECKPOINT_MISSING", task_id="1_1", topic="audit-changelog", partition=1, **common),
        ev(5, at(4001), "State transition from PARTITIONS_ASSIGNED to RUNNING", "THREAD_STATE", to_state="RUNNING",
           **common),
    ]
    if restore_again:
        events.append(ev(4, at(4000.5), "Restoring partition audit-changelog-1 from offset 0 to endOffset 802377",
                         "RESTORE_START", topic="audit-changelog", partition=1, offset=0, end_offset=802377, **common))
    return events


def test_restore_skipped_fires_when_the_thread_goes_running_unrestored(spark):
    tl = make_timeline(spark, events=_restore_skipped_events(False),
                       process_runs=[{"host": "h0", "run_id": "h0#1", "run_no": 1, "version": "2.1.0"}])
    (finding,) = run_detectors(tl, only=["restore-skipped-after-reassignment"])
    assert (finding.severity, finding.confidence, finding.tasks) == ("critical", "confirmed", ["1_1"])
    assert {e.line_no for e in finding.evidence} == {1, 3, 5}
    assert finding.impact.figures["offsets_missing_at_least"] == 734112


def test_restore_skipped_quiet_when_another_thread_restores(spark):
    events = [dict(e, stream_thread="audit-StreamThread-2") if e["line_no"] in (3, 5) else e
              for e in _restore_skipped_events(False)]
    tl = make_timeline(spark, events=events,
                       process_runs=[{"host": "h0", "run_id": "h0#1", "run_no": 1, "version": "2.1.0"}])
    assert run_detectors(tl, only=["restore-skipped-after-reassignment"]) == []


@pytest.mark.parametrize("version,kind", [("2.1.1", "from-beginning"), ("2.0.1", "tail"), ("2.1.0", "tail"),
                                          ("2.0.1", "no-checkpoint")])
def test_restore_skipped_fires_under_both_guarantees_and_for_the_tail(spark, version, kind):
    (finding,) = raised(run_detectors(skipped_restore_timeline(spark, version=version, kind=kind),
                                      only=["restore-skipped-after-reassignment"]), "restore-skipped-after-reassignment")
    assert finding.confidence == "confirmed" and finding.hosts == ["h0"]
    if kind == "tail":
        assert finding.impact.figures["offsets_missing_at_least"] == 802377 - 790001
    else:
        assert finding.tasks == ["1_1"] and finding.impact.figures["offsets_missing_at_least"] == 734112


@pytest.mark.parametrize("version", ["2.2.0", "2.3.1", "1.1.1"])
def test_restore_skipped_gated_to_2_0_1_through_2_1(spark, version):
    found = run_detectors(skipped_restore_timeline(spark, version=version, kind="no-checkpoint"),
                          only=["restore-skipped-after-reassignment"])
    assert raised(found, "restore-skipped-after-reassignment") == [], [f.title for f in found]


def test_restore_skipped_quiet_when_another_thread_restores_the_partition(spark):
    found = run_detectors(skipped_restore_timeline(spark, second_thread=A2), only=["restore-skipped-after-reassignment"])
    assert raised(found, "restore-skipped-after-reassignment") == []


def _held_then_back(spark, *, back_to=A1, revoked_first=False):
    """INFO-only 2.1: A1 was assigned 1_1 (its restore, from a checkpoint, printed nothing) and went RUNNING; 1_1
    later comes back with no checkpoint to ``back_to``. ``revoked_first``: a new assignment came before RUNNING."""
    common = {"run_id": "h0#1"}
    summary = (f"stream-thread [{A1}] partition assignment took 15 ms.\n\tcurrent active tasks: [0_1, 1_1]\n"
               "\tcurrent standby tasks: []\n\tprevious active tasks: []\n")
    events = [ev(1, at(0), summary, "ASSIGNMENT_APPLIED", stream_thread=A1, **common)]
    if revoked_first:
        events.append(ev(2, at(20), summary.replace("[0_1, 1_1]", "[0_1]"), "ASSIGNMENT_APPLIED", stream_thread=A1,
                         **common))
    events += [
        ev(3, at(40), f"stream-thread [{A1}] State transition from PARTITIONS_ASSIGNED to RUNNING", "THREAD_STATE",
           to_state="RUNNING", stream_thread=A1, **common),
        ev(4, at(4000), f"stream-thread [{back_to}] No checkpoint found for task 1_1 state store store1 changelog "
                        f"{AUDIT}-1 with EOS turned on. Reinitializing the task and restore its state from the "
                        "beginning.", "CHECKPOINT_MISSING", task_id="1_1", store="store1", topic=AUDIT, partition=1,
           stream_thread=back_to, **common),
        ev(5, at(4000.3), f"stream-thread [{back_to}] State transition from PARTITIONS_ASSIGNED to RUNNING",
           "THREAD_STATE", to_state="RUNNING", stream_thread=back_to, **common),
    ]
    held = [{"host": "h0", "run_id": "h0#1", "stream_thread": A1, "task_id": "1_1", "role": "active",
             "phase": "assigned", "start": at(0), "end": None, "event": "ASSIGNMENT_APPLIED", "source": "h0/app.log",
             "line_no": 1}]
    return make_timeline(spark, events=events, task_lifecycles=held,
                         process_runs=[{"host": "h0", "run_id": "h0#1", "run_no": 1, "version": "2.1.1"}])


@pytest.mark.parametrize("back_to,revoked_first,fires", [(A1, False, True), (A2, False, False), (A1, True, False)])
def test_restore_skipped_when_the_earlier_holding_was_only_an_assignment(spark, back_to, revoked_first, fires):
    """Every partition of an active task a 2.0.1-2.1 thread initialises ends in its completedRestorers once it is
    RUNNING, restore line or not; an assignment revoked before RUNNING, or another thread, does not count."""
    found = raised(run_detectors(_held_then_back(spark, back_to=back_to, revoked_first=revoked_first),
                                 only=["restore-skipped-after-reassignment"]), "restore-skipped-after-reassignment")
    assert [(f.hosts, f.tasks) for f in found] == ([(["h0"], ["1_1"])] if fires else [])
    if fires:
        assert "held task 1_1 before" in found[0].explanation


# --- long logs: restore starts compared per partition --------------------------------------------------------------

def _routine_restores(tl):
    """Another partition's restore starts on the same thread, each with nothing left to restore."""
    starts = routine_rows(tl.events, source="'h0/app.log'", line_no="1000 + id", host="'h0'", ts=sql_seconds(5000, 0.5),
                   message=f"'stream-thread [{A1}] Restoring partition {AUDIT}-5 from offset 100 to endOffset 100'",
                   product="'kafka-streams'", event="'RESTORE_START'", topic=f"'{AUDIT}'", partition="5",
                   offset="100", end_offset="100", stream_thread=f"'{A1}'", run_id="'h0#1'")
    return with_rows(tl, events=starts)


def test_restore_skipped_found_among_routine_restore_starts(spark):
    (plain,) = run_one(skipped_restore_timeline(spark), "restore-skipped-after-reassignment")
    (finding,) = run_one(_routine_restores(skipped_restore_timeline(spark)), "restore-skipped-after-reassignment")
    assert finding.confidence == "confirmed" and finding.tasks == ["1_1"]
    same_finding(finding, plain)


def test_restore_by_another_thread_with_routine_restore_starts_is_quiet(spark):
    healthy = _routine_restores(skipped_restore_timeline(spark, second_thread=A2))
    assert run_one(healthy, "restore-skipped-after-reassignment", gate=False) == []


# --- shipped samples -----------------------------------------------------------------------------------------------

def test_restore_skipped_facts(detected):
    expected = expected_of("kafka-restore-skipped")
    _, findings = detected("kafka-restore-skipped")
    (finding,) = raised(findings, "restore-skipped-after-reassignment")
    assert (finding.hosts, finding.tasks) == ([expected["host"]], expected["tasks"])
    assert finding.impact.figures["changelog"] == f"{expected['changelog']}-{expected['partition']}"


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)


# --- KAFKA-7672 verdicts -------------------------------------------------------------------------------------------

def test_kafka_7672_seed_versions():
    assert verdict("KAFKA-7672", "2.1.0").status == "affected"
    assert verdict("KAFKA-7672", "2.0.1").status == "affected"
    assert verdict("KAFKA-7672", "2.0.0").status == "unknown"  # before the 2.0.1 reset path
    assert verdict("KAFKA-7672", "2.2.0").status == "fixed"
    assert verdict("KAFKA-7672", "1.0.2").status == "unknown"  # older than anything the ticket lists
