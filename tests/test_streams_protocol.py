"""The streams rebalance protocol (KIP-1071, 4.1+) in the rebalance history: member epochs as generations, each
loss of tasks counted once, the heartbeat's fence lines, on the hand-built 4.1.1 bundles."""

from __future__ import annotations

from datetime import datetime

import pytest
from pyspark.sql import functions as F

from toolkit.detectors import run_detectors
from toolkit.detectors.common import streams_task_losses

STORM = "bundles/kip1071-rebalance-storm-4.1.1-log4j2"
CRASH = "bundles/kip1071-alos-crash-lost-tasks-4.1.1-log4j2"
SCALE = "bundles/healthy-kip1071-scale-out-in-4.1.1-log4j2"
RESTART = "bundles/healthy-kip1071-alos-pod-restart-4.1.1-log4j2"
ROLLING = "bundles/healthy-rolling-restart-4.1.1-streams-protocol-log4j2"
RAISED = ("critical", "warning")


@pytest.fixture(scope="module")
def found(analysis_of):
    """``found(name) -> (timeline, findings)``, detectors run once per bundle."""
    done: dict[str, tuple] = {}

    def get(name: str):
        if name not in done:
            tl = analysis_of(name).timeline
            done[name] = (tl, run_detectors(tl))
        return done[name]

    return get


def test_member_epochs_are_the_generations_of_a_streams_group(found):
    tl, _ = found(STORM)
    gens = tl.generations.where("group_id = 'invoice-router'").collect()
    assert {g.protocol for g in gens} == {"streams"}
    # two epochs per stale-and-rejoin cycle, four cycles; revocation steps keep their epoch and add none
    assert sorted({g.generation for g in gens}) == list(range(23, 31))
    first = min((g for g in gens if g.generation == 23), key=lambda g: g.joined)
    assert first.host == "invoice-router-0" and first.joined == datetime(2026, 3, 3, 10, 1, 11, 430000)
    # epoch 0 (joining) and -1 (leaving) are no generations
    assert not [g for g in gens if g.generation <= 0]


def test_streams_generations_do_not_estimate_clock_skew(found):
    tl, _ = found(STORM)
    assert tl.clock_skew.count() == 0


def test_a_stale_member_loses_its_tasks_once_per_cycle(found):
    tl, _ = found(STORM)
    losses = streams_task_losses(tl).collect()
    # each loss has a STALE transition and a tasks-lost callback line: counted once
    assert [(r.host, r.ts) for r in losses] == [
        ("invoice-router-1", datetime(2026, 3, 3, 10, 1, 10, 4000)),
        ("invoice-router-1", datetime(2026, 3, 3, 10, 3, 40, 41000)),
        ("invoice-router-1", datetime(2026, 3, 3, 10, 6, 10, 78000)),
        ("invoice-router-1", datetime(2026, 3, 3, 10, 8, 40, 115000)),
    ]
    lines = tl.events.where((F.col("event") == "TASKS_LOST") | (F.col("to_state") == "STALE")).count()
    assert lines == 8


def test_the_storm_costs_lost_tasks_and_names_the_reprocessing(found):
    _, findings = found(STORM)
    storm = [f for f in findings if f.detector == "rebalance-storm"]
    assert [f.severity for f in storm] == ["warning"]
    assert storm[0].impact.figures["generations"] == 8
    alos = [f for f in findings if f.detector == "alos-crash-reprocessing" and f.severity in RAISED]
    assert [(f.hosts, f.tasks) for f in alos] == [(["invoice-router-1"], ["0_1", "0_4"])]
    assert alos[0].impact.figures["interruptions"] == 4
    assert not [f for f in findings if f.severity in RAISED and f.detector not in ("rebalance-storm",
                                                                                    "alos-crash-reprocessing")]


def test_unknown_member_line_is_a_fence(found):
    tl, _ = found(CRASH)
    fenced = tl.events.where("event = 'MEMBER_FENCED'").collect()
    assert [(r.host, r.template_id, r.member_id, r.duration_ms) for r in fenced] == [
        ("ledger-agg-1", "kc.streams_heartbeat.unknown_member", "Wd7gHs2yNc4Vb9kQx0eLtA", 97)]
    losses = streams_task_losses(tl).collect()
    assert [(r.host, r.ts) for r in losses] == [("ledger-agg-1", datetime(2026, 2, 11, 9, 14, 56, 311000))]


def test_crash_with_lost_tasks_names_host_and_tasks_with_one_other_warning(found):
    _, findings = found(CRASH)
    raised = [f for f in findings if f.severity in RAISED]
    alos = [f for f in raised if f.detector == "alos-crash-reprocessing"]
    assert {(tuple(f.hosts), tuple(f.tasks)) for f in alos} == {(("ledger-agg-1",), ("0_1", "0_4"))}
    assert sorted(f.title.split(": ", 1)[1].split(",")[0] for f in alos) == [
        "at-least-once crash", "at-least-once thread(s) lost its tasks; uncommitted input is reprocessed by the new owner"]
    others = [f for f in raised if f.detector != "alos-crash-reprocessing"]
    assert [(f.detector, f.hosts) for f in others] == [("unclean-shutdown", ["ledger-agg-1"])]


@pytest.mark.parametrize("name", [SCALE, RESTART, ROLLING])
def test_healthy_streams_protocol_bundles_raise_nothing(found, name):
    _, findings = found(name)
    assert [(f.detector, f.title) for f in findings if f.severity in RAISED] == []


def test_a_planned_scale_out_and_in_is_a_storm_without_cost(found):
    tl, findings = found(SCALE)
    assert sorted({g.generation for g in tl.generations.collect()}) == list(range(23, 29))
    assert streams_task_losses(tl).count() == 0
    assert [f.severity for f in findings if f.detector == "rebalance-storm"] == ["info"]
