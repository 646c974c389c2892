"""The alos-crash-reprocessing detector: an at-least-once run that crashed, lost its partitions or was fenced
reprocesses what it had not committed. Small timelines (rates per thread, late commits, lost partitions), long
logs, the shipped sample, the hand-built bundles (the streams rebalance protocol's among them) with their
healthy twins.
"""

from __future__ import annotations

import pytest

from support.bundles import bundle_tests
from support.findings import RAISED, raised
from support.long_logs import routine_rows, run_one, same_finding, sql_seconds, with_rows
from support.samples import expected_of
from support.timelines import at, ev, make_timeline
from toolkit.detectors import run_detectors

ID = "alos-crash-reprocessing"
CRASH = "bundles/kip1071-alos-crash-lost-tasks-4.1.1-log4j2"
RESTART = "bundles/healthy-kip1071-alos-pod-restart-4.1.1-log4j2"


# --- decision rules on small timelines -----------------------------------------------------------------------------

def _alos_timeline(spark, summaries: bool, guarantee="at_least_once"):
    events = [ev(80 + i, at(120 * i), f"Processed {76000 + i} total records, ran 0 punctuators, and committed 8 "
                                      "total tasks since the last update", "PROCESSING_SUMMARY",
                 run_id="h0#1", records=76000 + i) for i in range(3)] if summaries else []
    runs = [{"host": "h0", "run_id": "h0#1", "run_no": 1, "product": "kafka-streams", "start": at(0), "end": at(240),
             "end_kind": "crash", "guarantee": guarantee, "commit_interval_ms": 30000, "version": "3.8.1"},
            {"host": "h0", "run_id": "h0#2", "run_no": 2, "product": "kafka-streams", "start": at(300), "end": at(400),
             "end_kind": "unknown", "guarantee": guarantee}]
    return make_timeline(spark, events=events, process_runs=runs)


def test_alos_crash_estimates_the_window(spark):
    (finding,) = run_detectors(_alos_timeline(spark, summaries=True), only=["alos-crash-reprocessing"])
    assert (finding.severity, finding.confidence) == ("warning", "confirmed")
    assert finding.impact.figures["reprocessing_window_ms_max"] == 30000
    assert finding.impact.figures["records_estimate"] == int(76002 / 120 * 30)
    assert [e.line_no for e in finding.evidence] == [82]


def test_alos_crash_without_counts_is_only_info(spark):
    (finding,) = run_detectors(_alos_timeline(spark, summaries=False), only=["alos-crash-reprocessing"])
    assert finding.severity == "info" and finding.missing_evidence


def test_alos_quiet_under_eos(spark):
    assert run_detectors(_alos_timeline(spark, True, "exactly_once_v2"), only=["alos-crash-reprocessing"]) == []


R1, R2 = "reservations-StreamThread-1", "reservations-StreamThread-2"


def _summary(line_no, seconds, records, thread):
    return ev(line_no, at(seconds), f"stream-thread [{thread}] Processed {records} total records, ran 0 punctuators, "
                                    "and committed 8 total tasks since the last update", "PROCESSING_SUMMARY",
              run_id="h0#1", records=records, stream_thread=thread)


def _alos(spark, *, events, end_kind="crash"):
    runs = [{"host": "h0", "run_id": "h0#1", "run_no": 1, "product": "kafka-streams", "start": at(0), "end": at(240),
             "end_kind": end_kind, "guarantee": "at_least_once", "commit_interval_ms": 30000, "version": "3.6.1"}]
    if end_kind == "crash":
        runs.append({"host": "h0", "run_id": "h0#2", "run_no": 2, "product": "kafka-streams", "start": at(300),
                     "end": at(400), "end_kind": "unknown", "guarantee": "at_least_once"})
    return make_timeline(spark, events=events, process_runs=runs)


def test_alos_rate_is_per_thread(spark):
    """Two threads print their summaries milliseconds apart: each thread's rate counts, not the gap between them."""
    events = [_summary(10, 0.0, 60000, R1), _summary(11, 0.005, 60000, R2),
              _summary(20, 120.0, 60000, R1), _summary(21, 120.005, 60000, R2)]
    (finding,) = raised(run_detectors(_alos(spark, events=events), only=["alos-crash-reprocessing"]),
                        "alos-crash-reprocessing")
    assert finding.impact.figures["records_estimate"] == 30000  # 2 x 500 records/s x 30 s


def test_alos_window_follows_a_late_commit(spark):
    """commit.interval.ms is not a bound: the last commit came 90 s before the crash."""
    events = [_summary(10, 0.0, 60000, R1), _summary(20, 120.0, 60000, R1),
              ev(30, at(150), f"stream-thread [{R1}] Committed all active tasks [0_1] and standby tasks [] in 3ms",
                 "COMMIT", run_id="h0#1", stream_thread=R1)]
    (finding,) = raised(run_detectors(_alos(spark, events=events), only=["alos-crash-reprocessing"]),
                        "alos-crash-reprocessing")
    assert finding.impact.figures["reprocessing_window_ms_max"] == 90000
    assert finding.impact.figures["records_estimate"] == 45000


@pytest.mark.parametrize("line", [
    (f"stream-thread [{R1}] at state RUNNING: partitions [reservations-1] lost due to missed rebalance.\n"
     "\tlost active tasks: [0_1]\n\tlost assigned standby tasks: []\n", "PARTITIONS_LOST"),
    (f"stream-thread [{R1}] Detected that the thread is being fenced. This implies that this thread missed a "
     "rebalance and dropped out of the consumer group. Will close out all assigned tasks and rejoin the consumer "
     "group.", "TASK_MIGRATED"),
])
def test_alos_reprocessing_after_lost_partitions_or_fencing_without_a_crash(spark, line):
    message, event = line
    events = [_summary(10, 0.0, 60000, R1), _summary(20, 120.0, 60000, R1),
              ev(30, at(200), message, event, run_id="h0#1", stream_thread=R1, task_id="0_1")]
    (finding,) = raised(run_detectors(_alos(spark, events=events, end_kind="unknown"),
                                      only=["alos-crash-reprocessing"]), "alos-crash-reprocessing")
    assert finding.tasks == ["0_1"] and finding.hosts == ["h0"]


def test_alos_lost_partitions_of_an_idle_thread_are_info_and_name_the_dirty_closed_tasks(spark):
    """The thread's summary before it lost its partitions counted no records: nothing to reprocess (a busy
    one before that does not count); the interruption line names no task, the dirty close after it does."""
    lost = (f"stream-thread [{R1}] at state RUNNING: partitions [reservations-1] lost due to missed rebalance.\n"
            "\tlost active tasks: []\n\tlost assigned standby tasks: []\n")
    events = [_summary(10, 0.0, 60000, R1), _summary(20, 120.0, 0, R1),
              ev(30, at(200), lost, "PARTITIONS_LOST", run_id="h0#1", stream_thread=R1),
              ev(31, at(200.5), f"stream-thread [{R1}] task [0_1] Closed dirty", "TASK_CLOSED_DIRTY",
                 run_id="h0#1", stream_thread=R1, task_id="0_1")]
    (finding,) = [f for f in run_detectors(_alos(spark, events=events, end_kind="unknown"),
                                           only=["alos-crash-reprocessing"]) if f.detector == "alos-crash-reprocessing"]
    assert finding.severity == "info" and finding.tasks == ["0_1"]
    assert finding.impact.figures["records_estimate"] == 0


def test_alos_quiet_when_the_log_is_only_cut_off(spark):
    events = [_summary(10, 0.0, 60000, R1), _summary(20, 120.0, 60000, R1)]
    assert run_detectors(_alos(spark, events=events, end_kind="unknown"), only=["alos-crash-reprocessing"]) == []


# --- long logs: lost partitions of every run -----------------------------------------------------------------------

def _alos_runs(end_kind: str) -> list[dict]:
    runs = [{"host": "h0", "run_id": "h0#1", "run_no": 1, "product": "kafka-streams", "start": at(0), "end": at(240),
             "end_kind": end_kind, "guarantee": "at_least_once", "commit_interval_ms": 30000, "version": "3.6.1",
             "end_source": "h0/app.log", "end_line_no": 30},
            {"host": "h0", "run_id": "h0#2", "run_no": 2, "product": "kafka-streams", "start": at(300),
             "end": at(400), "end_kind": "unknown", "guarantee": "at_least_once"},
            {"host": "h1", "run_id": "h1#1", "run_no": 1, "product": "kafka-streams", "start": at(0),
             "end": at(90000), "end_kind": "unknown", "guarantee": "exactly_once_v2", "version": "3.6.1"}]
    return runs


def _alos_long_timeline(spark, end_kind: str):
    """An at-least-once crash on h0; an exactly-once run on h1 that loses its partitions again and again."""
    summaries = [ev(n, at(s), f"stream-thread [{R1}] Processed 60000 total records, ran 0 punctuators, and "
                              "committed 8 total tasks since the last update", "PROCESSING_SUMMARY", run_id="h0#1",
                    records=60000, stream_thread=R1) for n, s in ((10, 0.0), (20, 120.0))]
    tl = make_timeline(spark, events=summaries, process_runs=_alos_runs(end_kind))
    lost = routine_rows(tl.events, source="'h1/app.log'", line_no="1000 + id", host="'h1'", ts=sql_seconds(10, 3),
                 message="'stream-thread [orders-StreamThread-1] partitions [orders-1] lost due to missed rebalance.'",
                 product="'kafka-streams'", event="'PARTITIONS_LOST'", stream_thread="'orders-StreamThread-1'",
                 run_id="'h1#1'")
    return tl, with_rows(tl, events=lost)


def test_alos_crash_found_among_lost_partitions_of_an_exactly_once_run(spark):
    plain, long = _alos_long_timeline(spark, "crash")
    (before,) = run_one(plain, "alos-crash-reprocessing")
    (finding,) = run_one(long, "alos-crash-reprocessing")
    assert finding.hosts == ["h0"] and finding.impact.figures["records_estimate"] == 15000
    same_finding(finding, before)


def test_exactly_once_lost_partitions_without_an_alos_crash_are_quiet(spark):
    _, long = _alos_long_timeline(spark, "unknown")
    assert run_one(long, "alos-crash-reprocessing", gate=False) == []


# --- shipped samples -----------------------------------------------------------------------------------------------

def test_alos_crash_reprocessing_facts(detected):
    expected = expected_of("kafka-alos-crash-reprocessing")
    _, findings = detected("kafka-alos-crash-reprocessing")
    (finding,) = raised(findings, "alos-crash-reprocessing")
    assert finding.severity == "warning" and finding.hosts == [expected["crashed_host"]]
    assert finding.impact.figures["reprocessing_window_ms_max"] == expected["reprocessing_window_ms_max"]
    last = expected["last_summary_before_crash"]
    assert (last["source"], last["line_no"]) in {(e.source, e.line_no) for e in finding.evidence}
    restored = {r["task"]: r["records"] for r in finding.impact.figures["restored"]}
    assert restored == {r["task"]: r["restored_records"] for r in expected["restored_from_checkpoint"]}


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)


def test_crash_with_lost_tasks_names_host_and_tasks_with_one_other_warning(detected):
    _, findings = detected(CRASH)
    raised = [f for f in findings if f.severity in RAISED]
    alos = [f for f in raised if f.detector == "alos-crash-reprocessing"]
    assert {(tuple(f.hosts), tuple(f.tasks)) for f in alos} == {(("ledger-agg-1",), ("0_1", "0_4"))}
    assert sorted(f.title.split(": ", 1)[1].split(",")[0] for f in alos) == [
        "at-least-once crash", "at-least-once thread(s) lost its tasks; uncommitted input is reprocessed by the new owner"]
    others = [f for f in raised if f.detector != "alos-crash-reprocessing"]
    assert [(f.detector, f.hosts) for f in others] == [("unclean-shutdown", ["ledger-agg-1"])]


@pytest.mark.parametrize("name", [RESTART])
def test_healthy_streams_protocol_bundles_raise_nothing(detected, name):
    _, findings = detected(name)
    assert [(f.detector, f.title) for f in findings if f.severity in RAISED] == []
