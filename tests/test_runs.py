"""Process runs from hand-written lines: where each run starts and ends, how it ended, which version it ran."""

from __future__ import annotations

import pytest

from support.runs import CLIENT, THREAD, app_line, at, line, start, stopped, summary
from support.timelines import event_schema, frame


def runs_of(spark, lines):
    """process_runs of these lines, tagged and bounded the way the pipeline does it."""
    from toolkit.events import run_bounds, tag_runs
    from toolkit.events.runs import tag_runs_by_key
    from toolkit.timeline.build import process_runs

    records = spark.createDataFrame(
        [(r["host"], r["source"], r["line_no"], r["ts"], r.get("thread"), r["message"]) for r in lines],
        "host string, source string, line_no bigint, ts timestamp, thread string, message string")
    events = frame(spark, event_schema(), [{**r, "run_no": None, "run_id": None} for r in lines if r["event"]])
    untagged = events.drop("run_no", "run_id")
    events = tag_runs(untagged)
    # The pipeline numbers its events by key (the windows sort keys only): the same columns and runs.
    by_key = tag_runs_by_key(untagged)
    assert by_key.columns == events.columns
    assert sorted(by_key.collect(), key=lambda r: (r.source, r.line_no)) == \
        sorted(events.collect(), key=lambda r: (r.source, r.line_no))
    rows = process_runs(events, None, run_bounds(records)).orderBy("host", "run_no").collect()
    return [(r.run_no, r.start, r.end, r.end_kind, r.version, r.version_range) for r in rows]


def test_a_quick_restart_is_a_new_run_and_the_crash_ends_at_the_last_line_written(spark):
    src = "fraud-scoring-1/app.log"
    # Killed 25 s after start-up and restarted 15 s later: the markers are less than a minute apart.
    lines = [*start(src, 1, 0), line(src, 8, 9, f"stream-thread [{THREAD}] State transition from PARTITIONS_ASSIGNED "
                                                  "to RUNNING", "THREAD_STATE", "ks.thread.state", to_state="RUNNING"),
             app_line(src, 11, 25), *start(src, 20, 40), summary(src, 30, 160)]
    runs = runs_of(spark, lines)
    assert [(n, kind) for n, _, _, kind, _, _ in runs] == [(1, "crash"), (2, "unknown")]
    assert runs[0][2] == at(25)  # the application's own last line, not the last Kafka line
    assert runs[1][1] == at(40)


def test_a_clean_stop_is_clean_and_an_error_stays_an_error_after_a_close(spark):
    src = "fraud-scoring-0/app.log"
    lines = [*start(src, 1, 0), stopped(src, 5, 60),
             *start(src, 10, 100),
             line(src, 15, 130, f"stream-client [{CLIENT}] State transition from RUNNING to PENDING_ERROR",
                  "CLIENT_STATE", "ks.client.state", to_state="PENDING_ERROR"),
             stopped(src, 16, 131, terminal="ERROR"),
             *start(src, 20, 200)]
    assert [kind for _, _, _, kind, _, _ in runs_of(spark, lines)] == ["clean", "error", "unknown"]


def test_a_log_cut_off_by_a_missing_rotated_file_is_unknown_not_a_crash(spark):
    """app.log.3 ends mid-run, app.log.2 was not collected, app.log.1 starts with a new run."""
    old, new = "fraud-scoring-2/app.log.3.gz", "fraud-scoring-2/app.log.1"
    lines = [*start(old, 1, 0), summary(old, 10, 120), *start(new, 1, 4000), summary(new, 10, 4120)]
    assert [kind for _, _, _, kind, _, _ in runs_of(spark, lines)] == ["unknown", "unknown"]


def test_lines_before_the_first_start_marker_are_a_run_of_their_own(spark):
    src = "fraud-scoring-0/app.log"
    lines = [summary(src, 1, 0), summary(src, 2, 120), *start(src, 10, 300), summary(src, 20, 420)]
    runs = runs_of(spark, lines)
    assert [(n, kind) for n, _, _, kind, _, _ in runs] == [(0, "crash"), (1, "unknown")]


def test_the_version_range_is_what_most_templates_agree_on(spark):
    """Without a banner: one template recorded for other versions cannot make the range empty or open."""
    src = "fraud-scoring-0/app.log"
    lines = [summary(src, 1, 0), stopped(src, 2, 10),
             line(src, 3, 5, f"stream-thread [{THREAD}] stream-task [0_1] State store counts initialized from "
                             "checkpoint with offset 10452 at changelog orders-app-counts-changelog-1",
                  "CHECKPOINT_READ", "ks.checkpoint.read"),
             line(src, 4, 6, f"stream-thread [{AUDIT_THREAD}]No checkpoint found for task 1_1 state store store1 "
                             "changelog AuditTrailBatch-store1-changelog-1 with EOS turned on. Reinitializing the task "
                             "and restore its state from the beginning.", "CHECKPOINT_MISSING",
                  "ks.restore.no_checkpoint_eos")]
    ((_, _, _, _, version, version_range),) = runs_of(spark, lines)
    assert version is None and version_range == "4.1-4.3"


AUDIT_THREAD = "AuditTrailBatch-StreamThread-1"


def test_a_jvm_start_up_lines_before_the_markers_open_the_new_run(spark):
    """Spring Boot prints its banner on `main` before Kafka Streams logs anything: those lines start run 2."""
    src = "wallet-app-02/console.log"
    lines = [*[dict(x, thread="main") for x in start(src, 1, 0)], summary(src, 10, 120),
             dict(summary(src, 11, 240), thread=THREAD),
             dict(app_line(src, 20, 300), message="Starting WalletApplication v1.4.2 using Java 11.0.3 with PID 1",
                  thread="main"),
             dict(app_line(src, 21, 301), message="No active profile set, falling back to default profiles: default",
                  thread="main"),
             *[dict(x, thread="main") for x in start(src, 30, 303)]]
    runs = runs_of(spark, lines)
    assert [(n, kind) for n, _, _, kind, _, _ in runs] == [(1, "crash"), (2, "unknown")]
    assert runs[0][2] == at(240) and runs[1][1] == at(300)


def test_the_last_lines_of_a_close_on_main_stay_in_the_run_they_close(spark):
    """KafkaStreams#close() called on `main` logs the client's last lines there, seconds before a restart's
    banner: they end the old run (cleanly), the new run starts at its own start-up lines."""
    src = "ledger-1/app.log"
    lines = [*[dict(x, thread="main") for x in start(src, 1, 0)], dict(summary(src, 10, 120), thread=THREAD),
             dict(line(src, 20, 1199.02, f"stream-client [{CLIENT}] State transition from RUNNING to PENDING_SHUTDOWN",
                       "CLIENT_STATE", "ks.client.state", to_state="PENDING_SHUTDOWN"), thread="main"),
             dict(app_line(src, 21, 1199.1), message=f"stream-thread [{THREAD}] Shutdown complete", thread=THREAD),
             dict(line(src, 22, 1199.137, f"stream-client [{CLIENT}] Streams client stopped completely",
                       "CLIENT_STOPPED", "ks.client.stopped"), thread="main"),
             *[dict(x, thread="main") for x in start(src, 30, 1202.9)], dict(summary(src, 40, 1320), thread=THREAD)]
    runs = runs_of(spark, lines)
    assert [(n, kind) for n, _, _, kind, _, _ in runs] == [(1, "clean"), (2, "unknown")]
    assert runs[0][2] == at(1199.137) and runs[1][1] == at(1202.9)


def test_the_assignment_summaries_say_whether_a_cleaned_task_was_still_assigned(spark):
    """2.0: the close of a task that is not re-assigned is DEBUG; the next summary no longer lists it."""
    from toolkit.timeline.build import dir_cleanups, task_lifecycles

    t1 = "AuditTrailBatch-StreamThread-1"
    src = "atb-1/streams.log"

    def summary_of(line_no, seconds, tasks):
        return line(src, line_no, seconds, f"stream-thread [{t1}] partition assignment took 31 ms.\n\tcurrent active "
                                           f"tasks: [{tasks}]\n\tcurrent standby tasks: []\n\tprevious active tasks: []\n",
                    "ASSIGNMENT_APPLIED", stream_thread=t1, run_id="atb-1#1", run_no=1)

    lines = [summary_of(1, 0, "0_1, 1_1"), summary_of(2, 900, "0_1"),
             line(src, 3, 1506, "stream-thread [AuditTrailBatch-CleanupThread] Deleting obsolete state directory 1_1 "
                                "for task 1_1 as 606026ms has elapsed (cleanup delay is 600000ms).", "DIR_CLEANED",
                  task_id="1_1", run_id="atb-1#1", run_no=1)]
    events = frame(spark, event_schema(), lines)
    runs = spark.createDataFrame([("atb-1", "atb-1#1", at(2000))], "host string, run_id string, end timestamp")
    (row,) = dir_cleanups(events, task_lifecycles(events, runs)).collect()
    assert row.assigned_at_the_time is False and row.last_owner_until == at(900)


def test_without_thread_names_the_burst_before_the_markers_opens_the_new_run(spark):
    """log4j `%d %-5p %c - %m%n`: the application's "Starting ..." line after a silence starts run 2."""
    src = "atb-0/streams.log"
    lines = [*start(src, 1, 0), stopped(src, 9, 1000),
             dict(app_line(src, 10, 1017.7), message="Starting AuditTrailBatch stream processor"),
             *start(src, 11, 1018)]
    runs = runs_of(spark, lines)
    assert [(n, kind) for n, _, _, kind, _, _ in runs] == [(1, "clean"), (2, "unknown")]
    assert runs[0][2] == at(1000) and runs[1][1] == at(1017.7)


def test_the_timeline_refuses_events_that_carry_no_runs(spark):
    """Run tagging is the events stage's job: the timeline says so instead of tagging on its own."""
    from toolkit.timeline.build import build

    events = frame(spark, event_schema(), start("fraud-scoring-1/app.log", 1, 0)).drop("run_no", "run_id")
    with pytest.raises(ValueError, match="tag_runs"):
        build(events, state=None)


def test_run_tagging_knows_every_client_stop_line_of_the_catalogue():
    """The run tagging's stop phrases (matched on raw records, before any event exists) cover every catalogue
    sample of a client stop, and no other client state change."""
    import re

    from toolkit.catalogue import load_templates
    from toolkit.events.runs import _CLIENT_STOP

    def body(sample: str) -> str:
        return re.sub(r"^stream-client \[[^\]]*\] ?", "", sample)

    stops, others = [], []
    for template in load_templates():
        if template.event == "CLIENT_STOPPED":
            stops += template.samples
        elif template.event == "CLIENT_STATE" and template.product == "kafka-streams":
            for sample in template.samples:
                target = re.search(r"to (\w+)$", sample)
                (stops if target and target[1] in ("NOT_RUNNING", "PENDING_SHUTDOWN") else others).append(sample)
    assert len(stops) >= 3 and others
    assert [s for s in stops if not re.search(_CLIENT_STOP, body(s))] == []
    assert [s for s in others if re.search(_CLIENT_STOP, body(s))] == []
