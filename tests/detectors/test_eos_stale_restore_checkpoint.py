"""The eos-stale-restore-checkpoint detector (KAFKA-20685): an exactly-once task restored from a checkpoint
written while it ran, after a crash. Small timelines for each decision rule and its legitimate look-alikes,
long logs, the shipped samples, the hand-built bundles with their healthy twins, and the verdicts of its bug.
"""

from __future__ import annotations

import pytest

from support.bundles import bundle_tests
from support.findings import raised
from support.known_bugs import verdict
from support.long_logs import routine_rows, run_one, same_finding, sql_seconds, with_rows
from support.samples import expected_of
from support.timelines import CHANGELOG, RUNNING_ACTIVE, eos_timeline, eos_versioned_timeline, task_phase
from toolkit.detectors import run_detectors

ID = "eos-stale-restore-checkpoint"


# --- decision rules on small timelines -----------------------------------------------------------------------------

def test_eos_stale_checkpoint_confirmed_by_a_write_at_restore_end(spark):
    tl = eos_timeline(spark)
    (finding,) = run_detectors(tl, only=["eos-stale-restore-checkpoint"])
    assert (finding.severity, finding.confidence) == ("critical", "confirmed")
    assert finding.tasks == ["0_0"] and finding.hosts == ["h0"]
    assert finding.impact.figures["replayed_records"] == 500
    assert {(e.source, e.line_no) for e in finding.evidence} >= {("h0/app.log", 11), ("h0/app.log", 40)}
    assert all(e.text for e in finding.evidence)
    assert any("KAFKA-20685" in s and "4.1.2" in s for s in finding.known_bugs)
    assert finding.missing_evidence == []
    assert finding.playbook == "playbooks/eos-stale-restore-checkpoint.md"


def test_eos_stale_checkpoint_info_only_is_likely_with_missing_evidence(spark):
    (finding,) = run_detectors(eos_timeline(spark, with_write=False), only=["eos-stale-restore-checkpoint"])
    assert finding.confidence == "likely"
    text = " ".join(finding.missing_evidence)
    assert ".checkpoint" in text and "capture" in text and "ProcessorStateManager" in text and "DEBUG" in text


def test_eos_stale_checkpoint_confirmed_by_a_capture(spark):
    (finding,) = run_detectors(eos_timeline(spark, with_write=False, capture=True),
                               only=["eos-stale-restore-checkpoint"])
    assert finding.confidence == "confirmed"
    assert any(e.kind == "state" and e.source == "h0/state.tar.gz" for e in finding.evidence)


@pytest.mark.parametrize("change", [{"end_kind": "clean"}, {"wiped": True}])
def test_eos_stale_checkpoint_quiet_after_clean_close_or_wipe(spark, change):
    assert run_detectors(eos_timeline(spark, **change), only=["eos-stale-restore-checkpoint"]) == []


@pytest.mark.parametrize("version,updater_lines", [("4.1.2", False), ("3.8.1", False), ("4.2.1", False),
                                                   ("3.6.1", True)])
def test_eos_stale_fires_for_a_running_active_task_on_affected_versions(spark, version, updater_lines):
    tl = eos_versioned_timeline(spark, version=version, lifecycle=RUNNING_ACTIVE, updater_lines=updater_lines)
    (finding,) = raised(run_detectors(tl, only=["eos-stale-restore-checkpoint"]), "eos-stale-restore-checkpoint")
    assert finding.tasks == ["0_0"] and finding.confidence == "confirmed"


@pytest.mark.parametrize("case", ["standby", "crash-during-restoration", "closed-clean", "suspended",
                                  "3.6-updater-off", "4.1.3-fixed", "4.2.2-fixed", "4.3", "3.2"])
def test_eos_stale_quiet_on_legitimate_checkpoints(spark, case):
    lifecycle, version, completed = RUNNING_ACTIVE, "4.1.2", True
    if case == "standby":
        lifecycle = [task_phase("running", 6.5, role="standby", event="STANDBY_UPDATING")]
    elif case == "crash-during-restoration":
        lifecycle, completed = [task_phase("restoring", 5, event="RESTORE_QUEUED")], False
    elif case == "closed-clean":
        lifecycle = [*RUNNING_ACTIVE, task_phase("closed-clean", 3000, event="TASK_CLOSED_CLEAN")]
    elif case == "suspended":
        lifecycle = [*RUNNING_ACTIVE, task_phase("suspended", 3000, event="TASK_SUSPENDED")]
    else:
        version = {"3.6-updater-off": "3.6.1", "4.1.3-fixed": "4.1.3", "4.2.2-fixed": "4.2.2", "4.3": "4.3.0",
                   "3.2": "3.2.3"}[case]
    tl = eos_versioned_timeline(spark, version=version, lifecycle=lifecycle, completed=completed)
    found = run_detectors(tl, only=["eos-stale-restore-checkpoint"])
    assert raised(found, "eos-stale-restore-checkpoint") == [], [f.title for f in found]


# --- long logs: every checkpoint write of the crashed run ----------------------------------------------------------

def _routine_eos(tl):
    """The crashed run writes a checkpoint of other offsets every 100 ms, its task goes RUNNING again and again,
    and the restart re-reads one checkpoint many times."""
    writes = routine_rows(tl.checkpoints, host="'h0'", task_id="'0_0'", topic=f"'{CHANGELOG}'", partition="0",
                   ts=sql_seconds(60, 0.1), kind="'written'", offset="2000 + id", origin="'log'", run_id="'h0#1'",
                   source="'h0/app.log'", line_no="100 + id")
    reads = routine_rows(tl.checkpoints, host="'h0'", task_id="'0_1'", topic=f"'{CHANGELOG}'", partition="1",
                  ts=sql_seconds(3705, 0.001), kind="'read'", offset="77", origin="'log'", run_id="'h0#2'",
                  source="'h0/app.log'", line_no="100000 + id")
    phases = routine_rows(tl.task_lifecycles, host="'h0'", run_id="'h0#1'", task_id="'0_0'", role="'active'",
                   phase="'running'", start=sql_seconds(10, 0.1), event="'TASK_RUNNING'", source="'h0/app.log'",
                   line_no="200000 + id")
    return with_rows(tl, checkpoints=writes.unionByName(reads), task_lifecycles=phases)


def test_eos_stale_checkpoint_found_among_routine_checkpoint_writes(spark):
    incident = eos_versioned_timeline(spark, lifecycle=RUNNING_ACTIVE)
    (plain,) = run_one(incident, "eos-stale-restore-checkpoint")
    (finding,) = run_one(_routine_eos(incident), "eos-stale-restore-checkpoint")
    assert finding.confidence == "confirmed" and finding.tasks == ["0_0"]
    same_finding(finding, plain)


def test_eos_clean_stop_with_routine_checkpoint_writes_is_quiet(spark):
    healthy = _routine_eos(eos_versioned_timeline(spark, lifecycle=RUNNING_ACTIVE, end_kind="clean"))
    assert run_one(healthy, "eos-stale-restore-checkpoint", gate=False) == []


# --- shipped samples -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["kafka-eos-stale-checkpoint", "kafka-eos-stale-checkpoint-info-only"])
def test_eos_stale_checkpoint_tasks_offsets_and_confidence(detected, name):
    expected = expected_of(name)
    _, findings = detected(name)
    (finding,) = raised(findings, "eos-stale-restore-checkpoint")
    assert finding.hosts == [expected["crashed_host"]]
    assert finding.tasks == expected["tasks"]
    by_task = {p["task"]: p for p in finding.impact.figures["partitions"]}
    for stale in expected["stale_checkpoints"]:
        assert by_task[stale["task"]]["checkpoint_offset"] == stale["checkpoint_offset"]
        assert by_task[stale["task"]]["replayed_records"] == stale["replayed_records"]
    assert any("4.1.2 is affected by KAFKA-20685" in s for s in finding.known_bugs)
    if expected["state_capture"] is None:
        assert finding.confidence == "likely"
        gaps = " ".join(finding.missing_evidence)
        assert "capture" in gaps and ".checkpoint" in gaps and "ProcessorStateManager" in gaps and "DEBUG" in gaps
    else:
        assert finding.confidence == "confirmed" and finding.missing_evidence == []


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)


# --- KAFKA-20685 verdicts ------------------------------------------------------------------------------------------

def test_kafka_20685_on_4_1_2_is_affected():
    v = verdict("KAFKA-20685", "4.1.2")
    assert v.status == "affected"
    assert v.sentence.startswith("Kafka Streams 4.1.2 is affected by KAFKA-20685")
    assert "exactly_once" in v.sentence  # the configuration it needs is part of the sentence


def test_kafka_20685_edges():
    assert verdict("KAFKA-20685", "3.8.0").status == "affected"
    assert verdict("KAFKA-20685", "4.2.1").status == "affected"
    assert verdict("KAFKA-20685", "4.3.0").status == "not_affected"
    # before 3.8 the state updater was opt-in: the version alone cannot decide
    v = verdict("KAFKA-20685", "3.6.1")
    assert v.status == "unknown" and "state updater" in v.sentence
    # the state updater restores active tasks from 3.4: 3.3 and earlier cannot have it
    assert verdict("KAFKA-20685", "3.4.0").status == "unknown"
    assert verdict("KAFKA-20685", "3.3.2").status == "not_affected"
    # the fix is merged but its release was not seen: say so
    fixed = verdict("KAFKA-20685", "4.2.2")
    assert fixed.status == "fixed" and "not verified" in fixed.sentence
