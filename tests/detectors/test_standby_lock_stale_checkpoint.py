"""The standby-lock-stale-checkpoint detector (KAFKA-8187): a standby task that failed to lock its state
directory, the cleaner that deleted it and the stale checkpoint written back, then a partial restore. Small
timelines for each version family, long logs, its gate, the shipped sample, the hand-built bundles with their
healthy twins, and the verdicts of its bug.
"""

from __future__ import annotations

import pytest

from support.bundles import bundle_tests
from support.findings import raised
from support.known_bugs import verdict
from support.long_logs import routine_rows, run_one, same_finding, sql_seconds, with_rows
from support.samples import expected_of
from support.timelines import LEDGER, at, ev, make_timeline, standby_timeline
from toolkit.detectors import gate_detectors, registered_detectors, run_detectors
from toolkit.knowledge.known_bugs import verdicts_for_detector

ID = "standby-lock-stale-checkpoint"


# --- decision rules on small timelines -----------------------------------------------------------------------------

def test_standby_lock_cleaner_writeback_and_partial_restore(spark):
    t1, t2 = "app-StreamThread-1", "app-StreamThread-2"
    events = [
        ev(2, at(2), "standby-task [1_0] Writing checkpoint: {ledger-changelog-0=48211}", "CHECKPOINT_WRITTEN",
           run_id="h0#1", task_id="1_0", topic="ledger-changelog", partition=0, offset=48211, stream_thread=t1),
        ev(5, at(3), "Could not create standby task 1_0 due to standby-task [1_0] Failed to lock the state directory "
                     "for task 1_0; will retry", "LOCK_FAILED", run_id="h0#1", task_id="1_0", stream_thread=t2),
        ev(9, at(1200), "Deleting obsolete state directory 1_0 for task 1_0 as 1196311ms has elapsed", "DIR_CLEANED",
           run_id="h0#1", task_id="1_0"),
        ev(12, at(1920), "Writing checkpoint: {ledger-changelog-0=48211}", "CHECKPOINT_WRITTEN", run_id="h0#1",
           task_id="1_0", topic="ledger-changelog", partition=0, offset=48211),
        ev(20, at(3660), "Restoring partition ledger-changelog-0 from offset 48211 to endOffset 61877", "RESTORE_START",
           run_id="h0#1", topic="ledger-changelog", partition=0, offset=48211, end_offset=61877),
    ]
    tl = make_timeline(
        spark, events=events,
        process_runs=[{"host": "h0", "run_id": "h0#1", "run_no": 1, "version": "2.0.1", "start": at(0), "end": at(4000),
                       "end_kind": "unknown", "guarantee": "at_least_once"}],
        locks=[{"host": "h0", "run_id": "h0#1", "task_id": "1_0", "kind": "failed", "ts": at(3), "thread": t2,
                "role": "standby", "holder_thread": t1, "source": "h0/app.log", "line_no": 5}],
        dir_cleanups=[{"host": "h0", "run_id": "h0#1", "task_id": "1_0", "ts": at(1200), "source": "h0/app.log",
                       "line_no": 9}],
        checkpoints=[{"host": "h0", "task_id": "1_0", "topic": "ledger-changelog", "partition": 0, "ts": at(2),
                      "kind": "written", "offset": 48211, "origin": "log", "run_id": "h0#1", "source": "h0/app.log",
                      "line_no": 2},
                     {"host": "h0", "task_id": "1_0", "topic": "ledger-changelog", "partition": 0, "ts": at(1920),
                      "kind": "written", "offset": 48211, "origin": "log", "run_id": "h0#1", "source": "h0/app.log",
                      "line_no": 12}],
        restorations=[{"host": "h0", "run_id": "h0#1", "topic": "ledger-changelog", "partition": 0,
                       "start": at(3660), "end": at(3666), "start_offset": 48211, "end_offset": 61877,
                       "completed": True, "start_source": "h0/app.log", "start_line_no": 20,
                       "source": "h0/app.log", "line_no": 20}],
    )
    (finding,) = run_detectors(tl, only=["standby-lock-stale-checkpoint"])
    assert (finding.severity, finding.confidence, finding.tasks) == ("critical", "confirmed", ["1_0"])
    assert finding.impact.figures["stale_offset"] == 48211
    assert finding.impact.figures["records_restored"] == 61877 - 48211
    assert {e.line_no for e in finding.evidence} == {5, 9, 12, 20}
    assert any("2.0.1 is affected by KAFKA-8187" in s for s in finding.known_bugs)


@pytest.mark.parametrize("version", ["2.0.1", "2.1.1", "2.2.1"])
def test_standby_lock_confirmed_on_affected_versions(spark, version):
    (finding,) = raised(run_detectors(standby_timeline(spark, version=version), only=["standby-lock-stale-checkpoint"]),
                        "standby-lock-stale-checkpoint")
    assert (finding.confidence, finding.tasks, finding.hosts) == ("confirmed", ["1_0"], ["h0"])
    assert finding.impact.figures["stale_offset"] == 48211


def test_standby_lock_needs_a_standby_task(spark):
    found = run_detectors(standby_timeline(spark, role="active"), only=["standby-lock-stale-checkpoint"])
    assert raised(found, "standby-lock-stale-checkpoint") == [], [f.title for f in found]


def test_standby_lock_not_confirmed_by_a_later_checkpoint_alone(spark):
    """Without the offset known before the lock failure, a later checkpoint with that offset proves nothing."""
    (finding,) = raised(run_detectors(standby_timeline(spark, prior=False), only=["standby-lock-stale-checkpoint"]),
                        "standby-lock-stale-checkpoint")
    assert finding.confidence == "likely" and finding.missing_evidence


@pytest.mark.parametrize("version", ["2.2.2", "2.3.0", "3.6.1"])
def test_standby_lock_quiet_on_versions_with_the_fix(spark, version):
    found = run_detectors(standby_timeline(spark, version=version), only=["standby-lock-stale-checkpoint"])
    assert raised(found, "standby-lock-stale-checkpoint") == [], [f.title for f in found]


def test_standby_lock_info_only_leans_on_the_capture(spark):
    (finding,) = run_detectors(standby_timeline(spark, lock=False, capture=True), only=["standby-lock-stale-checkpoint"])
    assert (finding.severity, finding.confidence, finding.tasks) == ("critical", "likely", ["1_0"])
    assert any(e.kind == "state" for e in finding.evidence)
    assert any("TRACE" in m for m in finding.missing_evidence)


def test_standby_lock_info_only_without_capture_says_what_is_missing(spark):
    (finding,) = run_detectors(standby_timeline(spark, lock=False), only=["standby-lock-stale-checkpoint"])
    assert finding.severity == "info"
    text = " ".join(finding.missing_evidence)
    assert "TRACE" in text and "capture" in text


# --- the gate ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lock", [True, False])
def test_standby_chain_and_info_only_paths_both_pass_the_gate(spark, lock):
    """The full chain (a failed lock) and the INFO-only path (a standby task, no lock line) both run."""
    spec = registered_detectors()["standby-lock-stale-checkpoint"]
    assert gate_detectors(standby_timeline(spark, lock=lock), [spec]) == {}


# --- long logs: every checkpoint and restore line of the task ------------------------------------------------------

def _routine_standby(tl):
    """After the lock failure the task's partition is checkpointed and restored from other offsets many times."""
    writes = routine_rows(tl.checkpoints, host="'h0'", task_id="'1_0'", topic=f"'{LEDGER}'", partition="0",
                   ts=sql_seconds(4, 0.1), kind="'written'", offset="50000 + id", origin="'log'", run_id="'h0#1'",
                   source="'h0/app.log'", line_no="1000 + id")
    restores = routine_rows(tl.restorations, host="'h0'", run_id="'h0#1'", task_id="'1_0'", topic=f"'{LEDGER}'",
                     partition="0", start=sql_seconds(10, 0.1), start_offset="50000 + id", end_offset="50001 + id",
                     completed="true", start_source="'h0/app.log'", start_line_no="100000 + id")
    return with_rows(tl, checkpoints=writes, restorations=restores)


def test_standby_lock_chain_found_among_routine_checkpoint_and_restore_lines(spark):
    (plain,) = run_one(standby_timeline(spark), "standby-lock-stale-checkpoint")
    (finding,) = run_one(_routine_standby(standby_timeline(spark)), "standby-lock-stale-checkpoint")
    assert finding.confidence == "confirmed" and finding.impact.figures["stale_offset"] == 48211
    same_finding(finding, plain)


def test_active_task_with_routine_checkpoint_and_restore_lines_is_quiet(spark):
    healthy = _routine_standby(standby_timeline(spark, role="active"))
    found = run_one(healthy, "standby-lock-stale-checkpoint", gate=False)
    assert [f for f in found if f.severity in ("critical", "warning")] == []


# --- shipped samples -----------------------------------------------------------------------------------------------

def test_standby_lock_stale_checkpoint_facts(detected):
    expected = expected_of("kafka-standby-lock-cleaner")
    _, findings = detected("kafka-standby-lock-cleaner")
    (finding,) = raised(findings, "standby-lock-stale-checkpoint")
    assert (finding.hosts, finding.tasks, finding.confidence) == ([expected["host"]], expected["tasks"], "confirmed")
    stale = expected["stale_checkpoint"]
    assert finding.impact.figures["stale_offset"] == stale["offset"]
    assert finding.impact.figures["restore_end_offset"] == stale["end_offset_at_restore"]


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)


# --- KAFKA-8187 verdicts -------------------------------------------------------------------------------------------

def test_kafka_8187_seed_versions():
    affected = verdict("KAFKA-8187", "2.0.1")
    assert affected.status == "affected"
    assert "2.3.0" in affected.sentence and "2.0.1" in affected.sentence
    assert verdict("KAFKA-8187", "2.3.0").status == "fixed"
    # the 2.2 line got the fix only in 2.2.2 (the 2.2.1 tag does not contain it)
    assert verdict("KAFKA-8187", "2.2.1").status == "affected"
    assert verdict("KAFKA-8187", "2.2.2").status == "fixed"
    assert "the ticket lists" in affected.sentence


def test_verdicts_for_detector():
    verdicts = verdicts_for_detector("standby-lock-stale-checkpoint", "2.0.1")
    assert [(v.bug_id, v.status) for v in verdicts] == [("KAFKA-8187", "affected")]
