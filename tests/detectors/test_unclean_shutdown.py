"""The unclean-shutdown detector: runs that ended without a clean stop, one finding per host. A small timeline
and the hand-built healthy twin.
"""

from __future__ import annotations

import pytest

from support.bundles import cases_for, check_expected_findings, check_few_extra, check_must_not
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

@pytest.mark.parametrize("name", cases_for(ID, "expected"))
def test_expected_findings_fire_on_their_hosts_and_tasks(bundle, name):
    _, findings = bundle(name)
    check_expected_findings(findings, name)


@pytest.mark.parametrize("name", cases_for(ID, "must_not"))
def test_nothing_on_the_must_not_list_fires(bundle, name):
    _, findings = bundle(name)
    check_must_not(findings, name)


@pytest.mark.parametrize("name", cases_for(ID, "extra"))
def test_no_more_than_a_few_unexpected_warnings(bundle, name):
    _, findings = bundle(name)
    check_few_extra(findings, name)
