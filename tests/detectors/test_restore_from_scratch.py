"""The restore-from-scratch detector: stores restored from the beginning of their changelog after a crash; after
a clean restart or a planned move that is routine. Small timelines and the hand-built healthy twin.
"""

from __future__ import annotations

import pytest

from support.bundles import bundle_tests
from support.findings import RAISED, raised
from support.timelines import at, make_timeline
from toolkit.detectors import run_detectors

ID = "restore-from-scratch"
ROLLING = "bundles/healthy-rolling-restart-4.1.1-streams-protocol-log4j2"


# --- decision rules on small timelines -----------------------------------------------------------------------------

def _scratch(spark, previous_end):
    runs = [{"host": "h0", "run_id": "h0#1", "run_no": 1, "end_kind": previous_end, "end": at(100)},
            {"host": "h0", "run_id": "h0#2", "run_no": 2, "end_kind": "unknown"}]
    restorations = [{"host": "h0", "run_id": "h0#2", "task_id": f"0_{p}", "topic": "app-store-changelog",
                     "partition": p, "start": at(200), "end": at(800), "start_offset": 0, "end_offset": 2_000_000,
                     "records": 2_000_000, "from_scratch": True, "completed": True, "start_source": "h0/app.log",
                     "start_line_no": 10 + p, "source": "h0/app.log", "line_no": 20 + p} for p in range(2)]
    return make_timeline(spark, process_runs=runs, restorations=restorations)


def test_restore_from_scratch_after_a_crash_is_a_warning(spark):
    (finding,) = raised(run_detectors(_scratch(spark, "crash"), only=["restore-from-scratch"]), "restore-from-scratch")
    assert finding.tasks == ["0_0", "0_1"]


def test_restore_from_scratch_after_a_clean_restart_is_routine(spark):
    found = run_detectors(_scratch(spark, "clean"), only=["restore-from-scratch"])
    assert raised(found, "restore-from-scratch") == [] and [f.severity for f in found] == ["info"]


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)


@pytest.mark.parametrize("name", [ROLLING])
def test_healthy_streams_protocol_bundles_raise_nothing(detected, name):
    _, findings = detected(name)
    assert [(f.detector, f.title) for f in findings if f.severity in RAISED] == []
