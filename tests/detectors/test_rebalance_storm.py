"""The rebalance-storm detector: many generations in a short window, a warning when partitions or tasks were lost
in it; a rolling restart or a planned scale-out is no storm to worry about. Small timelines and the hand-built
bundles (the streams rebalance protocol's among them) with their healthy twins.
"""

from __future__ import annotations

import pytest

from support.bundles import bundle_tests
from support.findings import RAISED, raised
from support.timelines import at, ev, make_timeline
from toolkit.detectors import run_detectors
from toolkit.detectors.common import streams_task_losses

ID = "rebalance-storm"
STORM = "bundles/kip1071-rebalance-storm-4.1.1-log4j2"
SCALE = "bundles/healthy-kip1071-scale-out-in-4.1.1-log4j2"


# --- decision rules on small timelines -----------------------------------------------------------------------------

def test_rebalance_storm_fires_on_many_generations_and_not_on_a_rolling_restart(spark):
    def gens(n):
        return [{"group_id": "app", "generation": g, "host": f"h{g % 3}", "run_id": f"h{g % 3}#1",
                 "joined": at(20 * g), "source": f"h{g % 3}/app.log", "line_no": g} for g in range(1, n + 1)]

    lost = [ev(40, at(70), "stream-thread [app-StreamThread-1] at state RUNNING: partitions [orders-1] lost due to "
                           "missed rebalance.\n\tlost active tasks: [0_1]\n\tlost assigned standby tasks: []\n",
               "PARTITIONS_LOST", host="h1", run_id="h1#1")]
    (finding,) = raised(run_detectors(make_timeline(spark, generations=gens(8), events=lost), only=["rebalance-storm"]),
                        "rebalance-storm")
    assert len(finding.hosts) == 3
    # A storm that loses nothing is a pause, not damage; a rolling restart is not a storm at all.
    assert [f.severity for f in run_detectors(make_timeline(spark, generations=gens(8)), only=["rebalance-storm"])] == ["info"]
    assert run_detectors(make_timeline(spark, generations=gens(3)), only=["rebalance-storm"]) == []


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)


def test_the_storm_costs_lost_tasks_and_names_the_reprocessing(detected):
    _, findings = detected(STORM)
    storm = [f for f in findings if f.detector == "rebalance-storm"]
    assert [f.severity for f in storm] == ["warning"]
    assert storm[0].impact.figures["generations"] == 8
    alos = [f for f in findings if f.detector == "alos-crash-reprocessing" and f.severity in RAISED]
    assert [(f.hosts, f.tasks) for f in alos] == [(["invoice-router-1"], ["0_1", "0_4"])]
    assert alos[0].impact.figures["interruptions"] == 4
    assert not [f for f in findings if f.severity in RAISED and f.detector not in ("rebalance-storm",
                                                                                    "alos-crash-reprocessing")]


@pytest.mark.parametrize("name", [SCALE])
def test_healthy_streams_protocol_bundles_raise_nothing(detected, name):
    _, findings = detected(name)
    assert [(f.detector, f.title) for f in findings if f.severity in RAISED] == []


def test_a_planned_scale_out_and_in_is_a_storm_without_cost(detected):
    analysis, findings = detected(SCALE)
    tl = analysis.timeline
    assert sorted({g.generation for g in tl.generations.collect()}) == list(range(23, 29))
    assert streams_task_losses(tl).count() == 0
    assert [f.severity for f in findings if f.detector == "rebalance-storm"] == ["info"]
