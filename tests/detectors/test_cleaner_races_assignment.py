"""The cleaner-races-assignment detector: the state cleaner deletes the directory of a task that is assigned or
has just left; routine cleanups and stateless tasks stay informational. Small timelines and the hand-built
healthy twins.
"""

from __future__ import annotations

import pytest

from support.bundles import bundle_tests
from support.findings import raised
from support.timelines import at, ev, make_timeline
from toolkit.detectors import run_detectors

ID = "cleaner-races-assignment"


# --- decision rules on small timelines -----------------------------------------------------------------------------

def _cleanup(spark, *, left_before_s, back_after_s=600, assigned=False):
    cleaned_at = 3600
    return make_timeline(
        spark,
        process_runs=[{"host": "h0", "run_id": "h0#1", "run_no": 1, "state_cleanup_delay_ms": 600000}],
        dir_cleanups=[{"host": "h0", "run_id": "h0#1", "task_id": "0_1", "ts": at(cleaned_at), "delay_ms": 600000,
                       "last_owner_thread": "app-StreamThread-1", "last_owner_role": "active",
                       "last_owner_until": at(cleaned_at - left_before_s), "assigned_at_the_time": assigned,
                       "source": "h0/app.log", "line_no": 9}],
        task_lifecycles=[{"host": "h0", "run_id": "h0#1", "stream_thread": "app-StreamThread-1", "task_id": "0_1",
                          "role": "active", "phase": "assigned", "start": at(cleaned_at + back_after_s),
                          "source": "h0/app.log", "line_no": 20}])


def test_cleaner_routine_cleanup_of_a_task_that_left_long_ago_is_info(spark):
    found = run_detectors(_cleanup(spark, left_before_s=1800), only=["cleaner-races-assignment"])
    assert raised(found, "cleaner-races-assignment") == [] and [f.severity for f in found] == ["info"]


@pytest.mark.parametrize("case", ["assigned", "left-recently"])
def test_cleaner_deleting_an_assigned_or_just_released_directory_is_a_race(spark, case):
    tl = _cleanup(spark, left_before_s=1800, assigned=True) if case == "assigned" else _cleanup(spark, left_before_s=60)
    (finding,) = raised(run_detectors(tl, only=["cleaner-races-assignment"]), "cleaner-races-assignment")
    assert finding.tasks == ["0_1"]


def test_cleaner_deleting_a_stateless_task_directory_is_routine_up_to_2_5(spark):
    """Up to 2.5 a stateless task's directory is made but never locked nor written: the cleaner deletes it while the
    task is assigned, and nothing is lost. The sub-topology with a changelog stays judged as before."""
    cleaned = [{"host": "h0", "run_id": "h0#1", "task_id": task, "ts": at(3600), "delay_ms": 600000,
                "last_owner_thread": "app-StreamThread-1", "last_owner_role": "active", "last_owner_until": None,
                "assigned_at_the_time": True, "source": "h0/app.log", "line_no": n} for n, task in ((9, "0_1"), (10, "1_1"))]
    state = [ev(3, at(10), "stream-thread [app-StreamThread-1] No checkpoint found for task 1_1 state store s changelog "
                          "app-s-changelog-1 with EOS turned on. Reinitializing the task and restore its state from the "
                          "beginning.", "CHECKPOINT_MISSING", task_id="1_1", store="s", topic="app-s-changelog",
                partition=1, run_id="h0#1")]

    def judged(version):
        return run_detectors(make_timeline(
            spark, events=state, dir_cleanups=cleaned,
            process_runs=[{"host": "h0", "run_id": "h0#1", "run_no": 1, "version": version}]),
            only=["cleaner-races-assignment"])

    found = judged("2.1.1")
    assert [f.tasks for f in raised(found, "cleaner-races-assignment")] == [["1_1"]]
    assert [f.tasks for f in found if f.severity == "info"] == [["0_1"]]
    assert [f.tasks for f in raised(judged("2.6.0"), "cleaner-races-assignment")] == [["0_1", "1_1"]]


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)
