"""The eos-checkpoint-stale-during-running detector: an exactly-once checkpoint frozen on disk while its task
runs; a hand-over or a suspend that is not resumed is no such checkpoint. Small timelines, the shipped
sample, and the hand-built healthy twin.
"""

from __future__ import annotations

import pytest

from support.bundles import bundle_tests
from support.findings import raised
from support.timelines import RUNNING_ACTIVE, at, ev, make_timeline, task_phase
from toolkit.detectors import run_detectors

ID = "eos-checkpoint-stale-during-running"


# --- decision rules on small timelines -----------------------------------------------------------------------------

def test_frozen_eos_checkpoint_from_a_trace_write_and_quiet_when_written_again(spark):
    runs = [{"host": "h0", "run_id": "h0#1", "run_no": 1, "start": at(0), "end": at(4000), "end_kind": "unknown",
             "guarantee": "exactly_once_v2", "version": "4.0.1"}]

    def write(seconds, line_no):
        return {"host": "h0", "task_id": "0_1", "ts": at(seconds), "kind": "written", "origin": "log",
                "run_id": "h0#1", "source": "h0/app.json", "line_no": line_no}

    (finding,) = raised(run_detectors(make_timeline(spark, process_runs=runs, checkpoints=[write(6, 3)]),
                                      only=["eos-checkpoint-stale-during-running"]), "eos-checkpoint-stale-during-running")
    assert finding.tasks == ["0_1"]
    rewritten = make_timeline(spark, process_runs=runs, checkpoints=[write(6, 3), write(3990, 90)])
    assert run_detectors(rewritten, only=["eos-checkpoint-stale-during-running"]) == []


@pytest.mark.parametrize("read_at,fires", [(4.3, False), (900, True)])
def test_a_checkpoint_written_after_the_new_owner_read_none_is_the_handover(spark, read_at, fires):
    """Up to 2.5 the new owner of a task moved inside one JVM reads before the old owner's close writes: a frozen
    file next to its 'No checkpoint found' line is that hand-over (KAFKA-7672), not a checkpoint taken while running."""
    runs = [{"host": "h0", "run_id": "h0#1", "run_no": 1, "start": at(0), "end": at(4000), "end_kind": "unknown",
             "guarantee": "exactly_once", "version": "2.0.1"}]
    missing = [ev(7, at(read_at), "stream-thread [app-StreamThread-1] No checkpoint found for task 0_0 state store s "
                                  "changelog app-s-changelog-0 with EOS turned on. Reinitializing the task and restore "
                                  "its state from the beginning.", "CHECKPOINT_MISSING", task_id="0_0", store="s",
                  topic="app-s-changelog", partition=0, run_id="h0#1")]
    state = {"checkpoints": [{"host": "h0", "source": "h0/state.tar.gz", "task_id": "0_0", "topic": "app-s-changelog",
                              "partition": 0, "offset": 1000, "file": "app/0_0/.checkpoint", "file_mtime": at(4),
                              "capture_time": at(3900)}]}
    found = run_detectors(make_timeline(spark, events=missing, state=state, process_runs=runs),
                          only=["eos-checkpoint-stale-during-running"])
    assert [f.tasks for f in raised(found, "eos-checkpoint-stale-during-running")] == ([["0_0"]] if fires else [])
    assert [f.severity for f in found] == ["warning" if fires else "info"]


@pytest.mark.parametrize("after_suspend,fires", [("restoring", True), ("closed-clean", False), (None, False),
                                                 ("no phase in this run", True)])
def test_a_suspend_checkpoint_is_frozen_only_if_the_task_resumes_with_it(spark, after_suspend, fires):
    """KAFKA-10362 (2.6.0): a revocation suspends the task and writes its checkpoint; a task resumed with that
    file still on disk processes over it, a task closed or left suspended does not. The previous run's phases say
    nothing of this run."""
    runs = [{"host": "h0", "run_id": "h0#1", "run_no": 1, "start": at(0), "end": at(4000), "end_kind": "crash",
             "guarantee": "exactly_once", "version": "2.6.0"}]
    write = {"host": "h0", "task_id": "0_0", "ts": at(1000), "kind": "written", "origin": "log", "run_id": "h0#1",
             "source": "h0/app.log", "line_no": 40}
    phases = [task_phase("closed-clean", -100, run_id="h0#0", event="TASK_CLOSED_CLEAN")]
    if after_suspend != "no phase in this run":
        phases += [*RUNNING_ACTIVE, task_phase("suspended", 1000, event="TASK_SUSPENDED")]
    if after_suspend in ("restoring", "closed-clean"):
        phases.append(task_phase(after_suspend, 1001, event="TASK_RESUMED" if after_suspend == "restoring"
                             else "TASK_CLOSED_CLEAN"))
    found = raised(run_detectors(make_timeline(spark, process_runs=runs, checkpoints=[write], task_lifecycles=phases),
                                 only=["eos-checkpoint-stale-during-running"]), "eos-checkpoint-stale-during-running")
    assert [f.tasks for f in found] == ([["0_0"]] if fires else [])


# --- shipped samples -----------------------------------------------------------------------------------------------

def test_frozen_eos_checkpoint_is_confirmed_by_the_capture_and_likely_from_logs_elsewhere(detected):
    _, findings = detected("kafka-eos-stale-checkpoint")
    frozen = {f.hosts[0]: f for f in findings if f.detector == "eos-checkpoint-stale-during-running"}
    assert sorted(frozen) == ["orders-agg-0", "orders-agg-1"], [f.title for f in findings]
    captured, logged = frozen["orders-agg-0"], frozen["orders-agg-1"]
    # orders-agg-0's state copy (newest file 10:02:12, during run 1) still holds the 09:00:06 checkpoint.
    assert (captured.confidence, captured.tasks) == ("confirmed", ["0_0", "0_2"])
    assert any(e.kind == "state" and "mtime 2026-03-07 09:00:06" in e.text for e in captured.evidence)
    # orders-agg-1 has no capture: its DEBUG write with no later write or delete decides.
    assert (logged.confidence, logged.tasks) == ("likely", ["0_1", "0_3"])
    assert any(e.kind == "log" and "Writing checkpoint" in e.text for e in logged.evidence)


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)
