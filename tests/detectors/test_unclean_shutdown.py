"""The unclean-shutdown detector: runs that ended without a clean stop, one finding per host. A small timeline
and the hand-built healthy twin.
"""

from __future__ import annotations

from support.bundles import bundle_tests
from support.findings import raised
from support.timelines import make_timeline, runs_ending
from toolkit.detectors import run_detectors

ID = "unclean-shutdown"


# --- decision rules on small timelines -----------------------------------------------------------------------------

def test_unclean_shutdown_one_finding_per_host_and_quiet_after_clean_stops(spark):
    (finding,) = raised(run_detectors(make_timeline(spark, process_runs=runs_ending(["crash", "crash", "unknown"])),
                                      only=["unclean-shutdown"]), "unclean-shutdown")
    assert finding.hosts == ["h0"] and finding.impact.figures["runs"] == 2
    assert run_detectors(make_timeline(spark, process_runs=runs_ending(["clean", "unknown"])),
                         only=["unclean-shutdown"]) == []


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)
