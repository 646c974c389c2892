"""Detector mechanics on small timelines written from real template wording (catalogue samples).

Each decision rule has a case that must fire and legitimate look-alikes that must stay quiet, for
every version family the detector covers.
"""

from __future__ import annotations

import pytest

from support.timelines import (A1, A2, AUDIT, RUNNING_ACTIVE, at, eos_versioned_timeline, ev, failed_lock,
                               make_timeline, migration_step, skipped_restore_timeline, standby_timeline, task_phase)
from toolkit.detectors import run_detectors

RAISED = ("critical", "warning")
def raised(findings, detector_id):
    return [f for f in findings if f.detector == detector_id and f.severity in RAISED]


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


# --- standby-lock-stale-checkpoint (KAFKA-8187) ----------------------------------------------------

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


# --- restore-skipped-after-reassignment (KAFKA-7672) ----------------------------------------------

@pytest.mark.parametrize("version,kind", [("2.1.1", "from-beginning"), ("2.0.1", "tail"), ("2.1.0", "tail"),
                                          ("2.0.1", "no-checkpoint")])
def test_restore_skipped_fires_under_both_guarantees_and_for_the_tail(spark, version, kind):
    (finding,) = raised(run_detectors(skipped_restore_timeline(spark, version=version, kind=kind),
                                      only=["restore-skipped-after-reassignment"]), "restore-skipped-after-reassignment")
    assert finding.confidence == "confirmed" and finding.hosts == ["h0"]
    if kind == "tail":
        assert finding.impact.figures["offsets_missing_at_least"] == 802377 - 790001
    else:
        assert finding.tasks == ["1_1"] and finding.impact.figures["offsets_missing_at_least"] == 734112


@pytest.mark.parametrize("version", ["2.2.0", "2.3.1", "1.1.1"])
def test_restore_skipped_gated_to_2_0_1_through_2_1(spark, version):
    found = run_detectors(skipped_restore_timeline(spark, version=version, kind="no-checkpoint"),
                          only=["restore-skipped-after-reassignment"])
    assert raised(found, "restore-skipped-after-reassignment") == [], [f.title for f in found]


def test_restore_skipped_quiet_when_another_thread_restores_the_partition(spark):
    found = run_detectors(skipped_restore_timeline(spark, second_thread=A2), only=["restore-skipped-after-reassignment"])
    assert raised(found, "restore-skipped-after-reassignment") == []



def _held_then_back(spark, *, back_to=A1, revoked_first=False):
    """INFO-only 2.1: A1 was assigned 1_1 (its restore, from a checkpoint, printed nothing) and went RUNNING; 1_1
    later comes back with no checkpoint to ``back_to``. ``revoked_first``: a new assignment came before RUNNING."""
    common = {"run_id": "h0#1"}
    summary = (f"stream-thread [{A1}] partition assignment took 15 ms.\n\tcurrent active tasks: [0_1, 1_1]\n"
               "\tcurrent standby tasks: []\n\tprevious active tasks: []\n")
    events = [ev(1, at(0), summary, "ASSIGNMENT_APPLIED", stream_thread=A1, **common)]
    if revoked_first:
        events.append(ev(2, at(20), summary.replace("[0_1, 1_1]", "[0_1]"), "ASSIGNMENT_APPLIED", stream_thread=A1,
                         **common))
    events += [
        ev(3, at(40), f"stream-thread [{A1}] State transition from PARTITIONS_ASSIGNED to RUNNING", "THREAD_STATE",
           to_state="RUNNING", stream_thread=A1, **common),
        ev(4, at(4000), f"stream-thread [{back_to}] No checkpoint found for task 1_1 state store store1 changelog "
                        f"{AUDIT}-1 with EOS turned on. Reinitializing the task and restore its state from the "
                        "beginning.", "CHECKPOINT_MISSING", task_id="1_1", store="store1", topic=AUDIT, partition=1,
           stream_thread=back_to, **common),
        ev(5, at(4000.3), f"stream-thread [{back_to}] State transition from PARTITIONS_ASSIGNED to RUNNING",
           "THREAD_STATE", to_state="RUNNING", stream_thread=back_to, **common),
    ]
    held = [{"host": "h0", "run_id": "h0#1", "stream_thread": A1, "task_id": "1_1", "role": "active",
             "phase": "assigned", "start": at(0), "end": None, "event": "ASSIGNMENT_APPLIED", "source": "h0/app.log",
             "line_no": 1}]
    return make_timeline(spark, events=events, task_lifecycles=held,
                         process_runs=[{"host": "h0", "run_id": "h0#1", "run_no": 1, "version": "2.1.1"}])


@pytest.mark.parametrize("back_to,revoked_first,fires", [(A1, False, True), (A2, False, False), (A1, True, False)])
def test_restore_skipped_when_the_earlier_holding_was_only_an_assignment(spark, back_to, revoked_first, fires):
    """Every partition of an active task a 2.0.1-2.1 thread initialises ends in its completedRestorers once it is
    RUNNING, restore line or not; an assignment revoked before RUNNING, or another thread, does not count."""
    found = raised(run_detectors(_held_then_back(spark, back_to=back_to, revoked_first=revoked_first),
                                 only=["restore-skipped-after-reassignment"]), "restore-skipped-after-reassignment")
    assert [(f.hosts, f.tasks) for f in found] == ([(["h0"], ["1_1"])] if fires else [])
    if fires:
        assert "held task 1_1 before" in found[0].explanation

# --- alos-crash-reprocessing -------------------------------------------------------------------------

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


# --- kinesis-checkpoint-migration-loss (NIFI-16003) ------------------------------------------------

KINESIS_ID = "5f0c2a1e-0197-1000-9d3e-3b8c5e2f4a11"
NOT_FOUND = (f"ConsumeKinesis[id={KINESIS_ID}] Failed to properly initialize Processor. If still scheduled to run, "
             "NiFi will attempt to initialize and run the Processor again after the 'Administrative Yield Duration' "
             "has elapsed. Failure is due to software.amazon.awssdk.services.dynamodb.model.ResourceNotFoundException: "
             "Requested resource not found (Service: DynamoDb, Status Code: 400, Request ID: "
             "J4CN5S1VQ0M2QH8BR1OGFNTL8NVV4KQNSO5AEMVJF66Q9ASUAAJG)")


def _log_step(table, seconds, step, line_no, detail):
    return {"table": table, "base_table": table.removesuffix("_migration"), "ts": at(seconds), "step": step,
            "origin": "log", "host": "nifi-0", "error_code": None, "detail": detail,
            "source": "nifi-0/nifi-app.log", "line_no": line_no}


def _kinesis_info_logs(spark, *, deleted=True):
    prefix = f"ConsumeKinesis[id={KINESIS_ID}] "
    steps = [
        _log_step("orders", 0, "CHECKPOINT_TABLE_DELETED", 10, prefix + "Initiated deletion of DynamoDB table [orders]"),
        _log_step("orders", 6, "CHECKPOINT_TABLE_ACTIVE", 12, prefix + "DynamoDB checkpoint table [orders] is now ACTIVE"),
        _log_step("orders", 6.01, "MIGRATION_COPY_STARTED", 13,
                  prefix + "Copying checkpoint items from [orders_migration] to [orders]"),
        {**_log_step("orders", 6.04, "PROCESSOR_START_FAILED", 14, NOT_FOUND.split(" (Service")[0]),
         "table": None, "base_table": None, "error_code": "ResourceNotFoundException"},
    ]
    if deleted:
        steps += [_log_step("orders_migration", 36.5, "LINGERING_MIGRATION_DELETED", 30,
                            prefix + "Deleting orphaned migration table [orders_migration]; legacy checkpoint table "
                                     "[orders] retains original data"),
                  _log_step("orders_migration", 36.6, "MIGRATION_TABLE_DELETED", 31,
                            prefix + "Initiated deletion of DynamoDB table [orders_migration]")]
    error = ev(14, at(6.04), NOT_FOUND, "PROCESSOR_START_FAILED", host="nifi-0", source="nifi-0/nifi-app.log",
               product="nifi", component_id=KINESIS_ID, component_type="ConsumeKinesis",
               error_class="software.amazon.awssdk.services.dynamodb.model.ResourceNotFoundException")
    return make_timeline(spark, events=[error], migration_steps=steps,
                         process_runs=[{"host": "nifi-0", "run_id": "nifi-0#1", "run_no": 1, "product": "nifi",
                                        "version": "2.9.0"}])


def test_kinesis_copy_failure_with_another_error_text_is_caught(spark):
    (finding,) = raised(run_detectors(_kinesis_info_logs(spark), only=["kinesis-checkpoint-migration-loss"]),
                        "kinesis-checkpoint-migration-loss")
    assert (finding.confidence, finding.tasks) == ("confirmed", ["orders"])
    assert "administrative yield" in finding.explanation


def test_kinesis_failed_put_item_of_any_error_code_is_a_copy_failure(spark):
    steps = [migration_step("orders", at(0), "CHECKPOINT_TABLE_DELETED", 10), migration_step("orders", at(6), "CHECKPOINT_TABLE_CREATED", 20),
             migration_step("orders", at(6.02), "CLOUDTRAIL_PUT_ITEM", 30, "ResourceNotFoundException"),
             migration_step("orders_migration", at(36), "MIGRATION_TABLE_DELETED", 40)]
    tl = make_timeline(spark, migration_steps=steps)
    (finding,) = raised(run_detectors(tl, only=["kinesis-checkpoint-migration-loss"]), "kinesis-checkpoint-migration-loss")
    assert (finding.confidence, finding.tasks) == ("confirmed", ["orders"])


def test_kinesis_without_the_deletion_expects_it_on_the_retry_after_the_yield(spark):
    (finding,) = raised(run_detectors(_kinesis_info_logs(spark, deleted=False), only=["kinesis-checkpoint-migration-loss"]),
                        "kinesis-checkpoint-migration-loss")
    assert finding.confidence == "likely"
    assert "administrative yield" in finding.explanation and "09:00:36" in finding.explanation
    assert "next start" not in finding.explanation


# --- the detector contract -----------------------------------------------------------------------

def _register(detector_id, fn, needs=(), severity="warning", role="consequence"):
    from toolkit.detectors.base import REGISTRY, DetectorSpec

    REGISTRY[detector_id] = DetectorSpec(detector_id, detector_id, severity, tuple(needs), fn, role)


def _unregister(*ids):
    from toolkit.detectors.base import REGISTRY

    for detector_id in ids:
        REGISTRY.pop(detector_id, None)


def test_a_detector_sees_only_the_tables_it_declares(spark):
    def sneaky(tl):
        tl.process_runs.count()
        return tl.events.count() and []

    _register("test-sneaky", sneaky, needs=("process_runs",))
    try:
        (finding,) = run_detectors(make_timeline(spark), only=["test-sneaky"])
    finally:
        _unregister("test-sneaky")
    assert finding.severity == "error" and "does not declare" in finding.title and "events" in finding.title


def test_every_detector_runs_on_an_empty_timeline_within_its_needs(spark):
    """Without the gate (which skips every detector on an empty timeline), each detector runs on a view of
    only the tables it declares and finds nothing: no error finding, no finding at all."""
    from toolkit.detectors import registered_detectors

    every = sorted(registered_detectors())
    result = run_detectors(make_timeline(spark), gate=False)
    assert sorted(result.ran) == every and result.skipped == {}
    assert [(f.detector, f.severity, f.title) for f in result] == []
    # the gate alone would have skipped them all: this test is the only run they get on nothing
    gated = run_detectors(make_timeline(spark))
    assert gated.ran == () and sorted(gated.skipped) == every


def test_fail_on_critical_exits_non_zero_when_a_detector_errors(monkeypatch, tmp_path):
    import argparse

    from toolkit import detect as cli
    from toolkit.detectors.base import Finding

    failed = Finding(detector="eos-stale-restore-checkpoint", severity="error", confidence="possible",
                     title="detector eos-stale-restore-checkpoint failed: RuntimeError: boom", explanation="raised")
    monkeypatch.setattr(cli, "_investigate", lambda args: ([failed], {"bundle": str(args.bundle)}))
    parser = cli.build_parser(argparse.ArgumentParser())
    assert cli.run(parser.parse_args([str(tmp_path), "--fail-on", "critical"])) == cli.EXIT_DETECTOR_ERROR != 0
    assert cli.run(parser.parse_args([str(tmp_path)])) == cli.EXIT_OK


def test_evidence_of_all_findings_is_read_in_one_join(spark, monkeypatch):
    import toolkit.detectors as detectors
    from toolkit.detectors.base import Finding
    from toolkit.detectors.common import evidence_lines

    calls = []
    real = detectors.resolve_evidence
    monkeypatch.setattr(detectors, "resolve_evidence", lambda tl, fs, **kw: calls.append(len(fs)) or real(tl, fs, **kw))

    def cites(line_no):
        def fn(tl):
            rows = tl.process_runs.collect()  # no access to the events: the runner reads the lines
            return [Finding(detector=f"test-cites-{line_no}", severity="warning", confidence="likely",
                            title="t", explanation="e", hosts=[rows[0].host],
                            evidence=evidence_lines(tl, [("h0/app.log", line_no)]))]
        return fn

    events = [ev(1, at(1), "stream-thread [t] State transition from PARTITIONS_ASSIGNED to RUNNING", "THREAD_STATE"),
              ev(2, at(2), "stream-client [c] Streams client stopped completely", "CLIENT_STOPPED")]
    tl = make_timeline(spark, events=events, process_runs=[{"host": "h0", "run_id": "h0#1", "run_no": 1}])
    _register("test-cites-1", cites(1), needs=("process_runs",))
    _register("test-cites-2", cites(2), needs=("process_runs",))
    try:
        found = run_detectors(tl, only=["test-cites-1", "test-cites-2"])
    finally:
        _unregister("test-cites-1", "test-cites-2")
    assert calls == [2]
    texts = {f.detector: [e.text for e in f.evidence] for f in found}
    assert texts == {"test-cites-1": [events[0]["message"]], "test-cites-2": [events[1]["message"]]}


def test_truncation_is_recorded(spark):
    from toolkit.detectors.common import bounded

    df = spark.range(7).withColumnRenamed("id", "n")
    got = bounded(df, 3, order=["n"])
    assert [r.n for r in got.rows] == [0, 1, 2] and got.total == 7
    assert got.record("rows") == {"rows": {"total": 7, "shown": 3}}
    assert bounded(df, 10).record("rows") == {}


def test_a_root_cause_ranks_above_its_trigger_and_consequences():
    from toolkit.detectors.base import Finding

    def f(detector, role, confidence="confirmed", seconds=0):
        return Finding(detector=detector, severity="warning", confidence=confidence, title=detector,
                       explanation="e", ts=at(seconds), role=role)

    ranked = sorted([f("restore-from-scratch", "consequence", seconds=0), f("lock-contention", "trigger", seconds=5),
                     f("alos-crash-reprocessing", "root-cause", "likely", seconds=9)], key=Finding.rank_key)
    assert [x.detector for x in ranked] == ["alos-crash-reprocessing", "lock-contention", "restore-from-scratch"]


# --- general detectors: one case that fires, one that stays quiet ---------------------------------

def test_lock_contention_is_one_finding_per_host_listing_its_tasks(spark):
    locks = [failed_lock(t, s, n) for t, s, n in (("0_1", 0, 1), ("0_1", 90, 2), ("0_2", 0, 3), ("0_2", 95, 4),
                                            ("0_3", 1, 5), ("0_3", 100, 6))]
    # A failure whose record has no readable time joins no episode and breaks none.
    locks.append(dict(failed_lock("0_1", 0, 7), ts=None))
    found = run_detectors(make_timeline(spark, locks=locks), only=["lock-contention"])
    (finding,) = raised(found, "lock-contention")
    assert finding.tasks == ["0_1", "0_2", "0_3"] and finding.hosts == ["h0"]
    assert [f.severity for f in found] == ["warning"]


def test_lock_contention_short_waits_are_routine(spark):
    found = run_detectors(make_timeline(spark, locks=[failed_lock("0_1", 0, 1), failed_lock("0_1", 2, 2)]),
                          only=["lock-contention"])
    assert raised(found, "lock-contention") == [] and [f.severity for f in found] == ["info"]


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


def _runs(end_kinds, guarantee="at_least_once"):
    return [{"host": "h0", "run_id": f"h0#{n}", "run_no": n, "product": "kafka-streams", "start": at(100 * n),
             "end": at(100 * n + 50), "end_kind": kind, "guarantee": guarantee, "end_source": "h0/app.log",
             "end_line_no": 10 * n, "source": "h0/app.log", "line_no": 10 * n - 5}
            for n, kind in enumerate(end_kinds, 1)]


def test_unclean_shutdown_one_finding_per_host_and_quiet_after_clean_stops(spark):
    (finding,) = raised(run_detectors(make_timeline(spark, process_runs=_runs(["crash", "crash", "unknown"])),
                                      only=["unclean-shutdown"]), "unclean-shutdown")
    assert finding.hosts == ["h0"] and finding.impact.figures["runs"] == 2
    assert run_detectors(make_timeline(spark, process_runs=_runs(["clean", "unknown"])), only=["unclean-shutdown"]) == []


def test_eos_wipe_is_a_warning_only_after_a_clean_stop(spark):
    wipes = [{"host": "h0", "run_id": "h0#2", "task_id": "0_1", "ts": at(210), "reason": "task-corrupted",
              "source": "h0/app.log", "line_no": 30}]

    def judged(end_kinds, guarantee="exactly_once_v2"):
        return run_detectors(make_timeline(spark, process_runs=_runs(end_kinds, guarantee), wipes=wipes),
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
    runs = [dict(r, version="2.0.1") for r in _runs(["clean", "unknown"], "exactly_once")]
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


def test_kinesis_management_trail_and_default_logging_one_finding_per_node(spark):
    """Only DeleteTable/CreateTable in CloudTrail and the ERROR lines: the retry's deletion one administrative
    yield after each start failure ties the failure to its table; a table dropped right after its copy migrated."""
    def error(line_no, seconds, component):
        message = NOT_FOUND.replace(KINESIS_ID, component).replace(
            "ResourceNotFoundException: Requested resource not found",
            "DynamoDbException: One or more parameter values were invalid: Missing the key leaseKey in the item")
        return ev(line_no, at(seconds), message, "PROCESSOR_START_FAILED", host="nifi-1", source="nifi-1/nifi-app.log",
                  product="nifi", component_id=component, component_type="ConsumeKinesis")

    steps, events = [], []
    for n, (table, created, failed_at) in enumerate((("orders", 10.0, 16.1), ("payments", 11.0, 17.3),
                                                     ("clicks", 12.0, None))):
        steps += [migration_step(table, at(created - 5), "CHECKPOINT_TABLE_DELETED", 100 + n),
                  migration_step(table, at(created), "CHECKPOINT_TABLE_CREATED", 200 + n),
                  migration_step(f"{table}_migration", at(failed_at + 30.1 if failed_at else created + 5.2),
                        "MIGRATION_TABLE_DELETED", 300 + n)]
        if failed_at:
            events.append(error(10 + n, failed_at, f"5f0c2a1e-0197-1000-9d3e-3b8c5e2f4a1{n}"))
    tl = make_timeline(spark, events=events, migration_steps=steps,
                       process_runs=[{"host": "nifi-1", "run_id": "nifi-1#1", "run_no": 1, "product": "nifi",
                                      "version": "2.9.0"}])
    (finding,) = raised(run_detectors(tl, only=["kinesis-checkpoint-migration-loss"]), "kinesis-checkpoint-migration-loss")
    assert (finding.hosts, finding.tasks) == (["nifi-1"], ["orders", "payments"])


def test_kinesis_failures_pair_with_the_host_of_the_tables_caller():
    """CloudTrail times are whole seconds: two tables of one node and one of another, all failing within a
    second. Timing alone pairs table b with the other node's failure; the caller (source IP) keeps each
    node's tables on that node."""
    from types import SimpleNamespace as N

    from toolkit.detectors.kinesis_checkpoint_migration_loss import _consistent_pairs

    def table(name, actor):
        return N(base_table=name, actor=actor)

    def failure(host, line):
        return N(host=host, source=f"{host}/nifi-app.log", line_no=line)

    a, b, c = table("a", "10.0.0.1"), table("b", "10.0.0.1"), table("c", "10.0.0.2")
    n1a, n1b, n2c = failure("n1", 10), failure("n1", 11), failure("n2", 12)
    candidates = [(0.2, a, None, n1a), (0.9, a, None, n1b), (0.8, b, None, n1a), (0.7, b, None, n1b),
                  (0.1, b, None, n2c), (0.3, c, None, n2c), (0.95, c, None, n1b)]
    pairs = {(c_.base_table, e.host, e.line_no) for _, c_, _, e in _consistent_pairs(candidates)}
    assert pairs == {("a", "n1", 10), ("b", "n1", 11), ("c", "n2", 12)}
