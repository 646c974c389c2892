"""The unclean-shutdown detector: runs that ended without a clean stop, one finding per host. A small timeline
and the hand-built healthy twin.
"""

from __future__ import annotations

from support.bundles import bundle_tests
from support.findings import raised
from datetime import datetime

from support.timelines import make_timeline, runs_ending
from toolkit.detectors import run_detectors
from toolkit.detectors.harness import run_detector

ID = "unclean-shutdown"


# --- decision rules on small timelines -----------------------------------------------------------------------------

def test_unclean_shutdown_one_finding_per_host_and_quiet_after_clean_stops(spark):
    (finding,) = raised(run_detectors(make_timeline(spark, process_runs=runs_ending(["crash", "crash", "unknown"])),
                                      only=["unclean-shutdown"]), "unclean-shutdown")
    assert finding.hosts == ["h0"] and finding.impact.figures["runs"] == 2
    assert run_detectors(make_timeline(spark, process_runs=runs_ending(["clean", "unknown"])),
                         only=["unclean-shutdown"]) == []


# --- through the harness: the OOM kill of tests/bundles/eos-standby-host-oom-3.8.0-kafka-log4j -----------------------

SOURCE = "payments-dedup-2/payments-dedup.log"
CLIENT = "payments-dedup-0c5b8e47-9a21-4d63-8f0e-b1a2c3d4e5f6"
#: The killed run's last line (the JVM died after it, printing nothing) and the next run's first, as logged.
LAST = (f"stream-thread [{CLIENT}-StreamThread-1] Processed 0 total records, ran 0 punctuators, and committed 0 total "
        "tasks since the last update")
NEXT = ("Starting payments-dedup 2.4.1 (kafka-streams 3.8.0, processing.guarantee=exactly_once_v2) on payments-dedup-2")
#: What a clean stop ends with instead: KafkaStreams' own last transition.
STOPPED = f"stream-client [{CLIENT}] State transition from PENDING_SHUTDOWN to NOT_RUNNING"


def _runs(end_kind: str, last: str) -> dict:
    """Two runs of payments-dedup-2, the first ending as ``end_kind`` says at ``last``, with their lines."""
    start, end, again = (datetime(2025, 2, 18, 1, 58, 2, 647000), datetime(2025, 2, 18, 3, 16, 6, 151000),
                         datetime(2025, 2, 18, 3, 16, 56, 448000))
    run = {"host": "payments-dedup-2", "product": "kafka-streams", "version": "3.8.0", "guarantee": "exactly_once_v2",
           "source": SOURCE}
    events = [{"source": SOURCE, "line_no": 528, "host": "payments-dedup-2", "ts": end, "level": "INFO",
               "message": last, "product": "kafka-streams"},
              {"source": SOURCE, "line_no": 529, "host": "payments-dedup-2", "ts": again, "level": "INFO",
               "message": NEXT, "product": "kafka-streams"}]
    return {"events": events, "process_runs": [
        {**run, "run_id": "payments-dedup-2#1", "run_no": 1, "start": start, "end": end, "end_kind": end_kind,
         "end_source": SOURCE, "end_line_no": 528, "line_no": 2},
        {**run, "run_id": "payments-dedup-2#2", "run_no": 2, "start": again, "end_kind": "unknown", "line_no": 529}]}


def test_the_oom_killed_run_is_an_unclean_shutdown_citing_its_last_line_and_the_restart(spark):
    (finding,) = raised(run_detector(spark, ID, **_runs("crash", LAST)), ID)
    assert finding.title == "payments-dedup-2: 1 kafka-streams run(s) ended without a clean shutdown"
    assert finding.confidence == "confirmed" and finding.impact.summary == "kafka-streams down for 50 s in total"
    assert "under exactly-once the restart must find no checkpoint and wipe the stores" in finding.explanation
    assert [(e.location(), e.text) for e in finding.evidence] == [(f"{SOURCE}:528", LAST), (f"{SOURCE}:529", NEXT)]


def test_the_healthy_twin_stopped_cleanly_and_raises_nothing(spark):
    twin = _runs("clean", STOPPED)
    # the precondition (a run that ended in a crash or an error) is false: the detector is skipped...
    gated = run_detector(spark, ID, **twin)
    assert gated.ran == () and list(gated.skipped) == [ID]
    # ...and run all the same, it finds nothing
    ungated = run_detector(spark, ID, gate=False, **twin)
    assert ungated.ran == (ID,) and list(ungated) == []


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)
