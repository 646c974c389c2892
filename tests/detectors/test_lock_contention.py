"""The lock-contention detector: long episodes of failed state-directory locks, one finding per host; short
retries are routine. Small timelines and the hand-built healthy twin.
"""

from __future__ import annotations

from support.bundles import bundle_tests
from support.findings import raised
from support.timelines import at, failed_lock, make_timeline
from toolkit.detectors import run_detectors
from toolkit.detectors.harness import run_detector

ID = "lock-contention"


# --- decision rules on small timelines -----------------------------------------------------------------------------

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


# --- through the harness: the real retry lines of a rolling restart ------------------------------------------------

#: A waiting thread's retry line, as Kafka Streams 8.1 (Confluent Platform) prints it in
#: tests/bundles/healthy-rolling-restart-lock-retries-8.1.0-ccs-docker (shipment-eta-1, docker-logs.txt).
THREAD = "shipment-eta-2d9c5a81-e6f4-4b37-a0d2-7c83e1b95f6a-StreamThread-2"
RETRY = (f"stream-thread [{THREAD}] Encountered lock exception. Reattempting locking the state in the next iteration. "
         f"Error message was: stream-thread [{THREAD}] standby-task [0_3] Failed to lock the state directory for task 0_3")


def _retries(seconds: list[float]) -> dict:
    """The retry lines at ``seconds`` and the failed locks the timeline derives from them."""
    events = [{"source": "shipment-eta-1/docker-logs.txt", "line_no": 965 + n, "host": "shipment-eta-1", "ts": at(s),
               "level": "INFO", "thread": THREAD, "logger": "org.apache.kafka.streams.processor.internals.TaskManager",
               "message": RETRY, "event": "LOCK_FAILED", "task_id": "0_3", "product": "kafka-streams",
               "run_id": "shipment-eta-1#1"} for n, s in enumerate(seconds)]
    locks = [{"host": e["host"], "run_id": e["run_id"], "task_id": "0_3", "kind": "failed", "ts": e["ts"],
              "thread": THREAD, "role": "standby", "source": e["source"], "line_no": e["line_no"]} for e in events]
    return {"events": events, "locks": locks,
            "process_runs": [{"host": "shipment-eta-1", "run_id": "shipment-eta-1#1", "run_no": 1}]}


def test_a_lock_retried_for_minutes_is_slow_contention_citing_its_retry_lines(spark):
    found = run_detector(spark, ID, **_retries([0, 2, 60, 130]))
    (finding,) = raised(found, ID)
    assert finding.title == "shipment-eta-1: slow lock contention on task(s) 0_3 (4 failed attempt(s), up to 130 s)"
    # the runner read the cited lines from the events: the real wording, the first three of the episode
    assert [(e.location(), e.text) for e in finding.evidence] == [
        (f"shipment-eta-1/docker-logs.txt:{965 + n}", RETRY) for n in range(3)]


def test_the_healthy_twin_retries_for_two_seconds_and_raises_nothing(spark):
    """The bundle's own pattern: a standby's lock retried while the old owner lets go, two seconds apart."""
    found = run_detector(spark, ID, **_retries([0, 1.7]))
    assert found.ran == (ID,) and raised(found, ID) == []
    assert [f.title for f in found] == ["shipment-eta-1: short lock contention on task(s) 0_3 (2 failed attempt(s))"]
    # no failed lock at all: the precondition is false and the detector is not even run
    assert run_detector(spark, ID, events=_retries([0])["events"]).skipped == {ID: "locks has rows where kind = 'failed'"}


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)
