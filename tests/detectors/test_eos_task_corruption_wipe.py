"""The eos-task-corruption-wipe detector: exactly-once state wiped after a clean stop (a surprise) or after a
crash (informational). Small timelines, long logs of many wipes, and the hand-built healthy twin.
"""

from __future__ import annotations

import pytest

from support.bundles import bundle_tests
from support.findings import raised
from support.long_logs import routine_rows, run_one, same_finding, sql_seconds, with_rows
from support.timelines import at, make_timeline, runs_ending
from toolkit.detectors import run_detectors

ID = "eos-task-corruption-wipe"


# --- decision rules on small timelines -----------------------------------------------------------------------------

def test_eos_wipe_is_a_warning_only_after_a_clean_stop(spark):
    wipes = [{"host": "h0", "run_id": "h0#2", "task_id": "0_1", "ts": at(210), "reason": "task-corrupted",
              "source": "h0/app.log", "line_no": 30}]

    def judged(end_kinds, guarantee="exactly_once_v2"):
        return run_detectors(make_timeline(spark, process_runs=runs_ending(end_kinds, guarantee), wipes=wipes),
                             only=["eos-task-corruption-wipe"])

    (finding,) = raised(judged(["clean", "unknown"]), "eos-task-corruption-wipe")
    assert finding.tasks == ["0_1"]
    after_crash = judged(["crash", "unknown"])
    assert raised(after_crash, "eos-task-corruption-wipe") == [] and [f.severity for f in after_crash] == ["info"]
    # At-least-once keeps its stores: corruption there is re-initialisation, never an exactly-once wipe warning.
    (at_least_once,) = judged(["clean", "unknown"], guarantee="at_least_once")
    assert at_least_once.severity == "info" and "at_least_once" in at_least_once.title


@pytest.mark.parametrize("held_before,fires", [(False, False), (True, True)])
def test_eos_no_checkpoint_after_a_clean_stop_warns_only_for_a_task_the_previous_run_held(spark, held_before, fires):
    """2.0.1-2.5 print 'No checkpoint found ... with EOS turned on' for every task without a checkpoint: routine for a
    task new to the host, a surprise for one the previous run held and closed cleanly."""
    runs = [dict(r, version="2.0.1") for r in runs_ending(["clean", "unknown"], "exactly_once")]
    wipes = [{"host": "h0", "run_id": "h0#2", "task_id": "1_1", "ts": at(210), "reason": "eos-no-checkpoint",
              "source": "h0/app.log", "line_no": 30}]
    phases = [{"host": "h0", "run_id": "h0#2", "stream_thread": "app-StreamThread-1", "task_id": "1_1",
               "role": "active", "phase": "assigned", "start": at(209.5), "source": "h0/app.log", "line_no": 29}]
    if held_before:
        phases.append(dict(phases[0], run_id="h0#1", start=at(101), line_no=12))
    found = run_detectors(make_timeline(spark, process_runs=runs, wipes=wipes, task_lifecycles=phases),
                          only=["eos-task-corruption-wipe"])
    assert [f.tasks for f in raised(found, "eos-task-corruption-wipe")] == ([["1_1"]] if fires else [])
    assert [f.severity for f in found] == ["warning" if fires else "info"]


# --- long logs: wipe and corruption lines grouped per run ----------------------------------------------------------

def _wipe_runs() -> list[dict]:
    return [{"host": host, "run_id": f"{host}#{n}", "run_no": n, "product": "kafka-streams", "start": at(100 * n),
             "end": at(100 * n + 50), "end_kind": kind, "guarantee": "exactly_once_v2"}
            for host in ("h0", "h1") for n, kind in ((1, "clean"), (2, "unknown"))]


def test_wipes_of_a_long_run_are_grouped_per_run(spark):
    """h0 wipes a task after a clean stop; h1 wipes its tasks after every rebalance of a long run."""
    wipes = [{"host": "h0", "run_id": "h0#2", "task_id": "0_1", "ts": at(210), "reason": "task-corrupted",
              "source": "h0/app.log", "line_no": 30}]
    tl = make_timeline(spark, process_runs=_wipe_runs(), wipes=wipes)
    (plain,) = run_one(tl, "eos-task-corruption-wipe")
    many = routine_rows(tl.wipes, host="'h1'", run_id="'h1#2'", task_id="concat('1_', id % 8)", ts=sql_seconds(210, 1),
                 reason="'eos-dirty-close'", source="'h1/app.log'", line_no="1000 + id")
    found = run_one(with_rows(tl, wipes=many), "eos-task-corruption-wipe")
    (h0,) = [f for f in found if f.hosts == ["h0"]]
    (h1,) = [f for f in found if f.hosts == ["h1"]]
    same_finding(h0, plain)
    assert h1.severity == "warning" and h1.tasks == [f"1_{n}" for n in range(8)]


def test_wipes_after_a_crash_stay_informational_however_many(spark):
    runs = [dict(r, end_kind="crash") if r["run_no"] == 1 else r for r in _wipe_runs()]
    tl = make_timeline(spark, process_runs=runs)
    many = routine_rows(tl.wipes, host="'h1'", run_id="'h1#2'", task_id="concat('1_', id % 8)", ts=sql_seconds(210, 1),
                 reason="'eos-dirty-close'", source="'h1/app.log'", line_no="1000 + id")
    (finding,) = run_one(with_rows(tl, wipes=many), "eos-task-corruption-wipe")
    assert finding.severity == "info" and finding.impact.figures["tasks"] == 8


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)
