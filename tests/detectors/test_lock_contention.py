"""The lock-contention detector: long episodes of failed state-directory locks, one finding per host; short
retries are routine. Small timelines and the hand-built healthy twin.
"""

from __future__ import annotations

from support.bundles import bundle_tests
from support.findings import raised
from support.timelines import failed_lock, make_timeline
from toolkit.detectors import run_detectors

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


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)
