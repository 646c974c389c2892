"""The streams rebalance protocol (KIP-1071, 4.1+) in the rebalance history: member epochs as generations, each
loss of tasks counted once, the heartbeat's fence lines, on the hand-built 4.1.1 bundles. What the detectors find
on those bundles is tested with each detector (``tests/detectors/``)."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import functions as F

from toolkit.detectors.common import streams_task_losses

STORM = "bundles/kip1071-rebalance-storm-4.1.1-log4j2"
CRASH = "bundles/kip1071-alos-crash-lost-tasks-4.1.1-log4j2"


def test_member_epochs_are_the_generations_of_a_streams_group(analysis_of):
    tl = analysis_of(STORM).timeline
    gens = tl.generations.where("group_id = 'invoice-router'").collect()
    assert {g.protocol for g in gens} == {"streams"}
    # two epochs per stale-and-rejoin cycle, four cycles; revocation steps keep their epoch and add none
    assert sorted({g.generation for g in gens}) == list(range(23, 31))
    first = min((g for g in gens if g.generation == 23), key=lambda g: g.joined)
    assert first.host == "invoice-router-0" and first.joined == datetime(2026, 3, 3, 10, 1, 11, 430000)
    # epoch 0 (joining) and -1 (leaving) are no generations
    assert not [g for g in gens if g.generation <= 0]


def test_streams_generations_do_not_estimate_clock_skew(analysis_of):
    tl = analysis_of(STORM).timeline
    assert tl.clock_skew.count() == 0


def test_a_stale_member_loses_its_tasks_once_per_cycle(analysis_of):
    tl = analysis_of(STORM).timeline
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


def test_unknown_member_line_is_a_fence(analysis_of):
    tl = analysis_of(CRASH).timeline
    fenced = tl.events.where("event = 'MEMBER_FENCED'").collect()
    assert [(r.host, r.template_id, r.member_id, r.duration_ms) for r in fenced] == [
        ("ledger-agg-1", "kc.streams_heartbeat.unknown_member", "Wd7gHs2yNc4Vb9kQx0eLtA", 97)]
    losses = streams_task_losses(tl).collect()
    assert [(r.host, r.ts) for r in losses] == [("ledger-agg-1", datetime(2026, 2, 11, 9, 14, 56, 311000))]


