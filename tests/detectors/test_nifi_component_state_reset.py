"""The nifi-component-state-reset detector: a List processor's state cleared or not carried over an upgrade, and
the re-listing that follows. The hand-built bundles with their healthy twins.
"""

from __future__ import annotations

from support.bundles import bundle_tests, nifi_evidence_test
from support.findings import RAISED

ID = "nifi-component-state-reset"


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)


test_findings_match_expected = nifi_evidence_test(ID)


def test_state_reset_names_the_window_and_the_relisting(detected):
    _analysis, findings = detected("bundles/nifi-component-state-reset")
    (finding,) = [f for f in findings if f.detector == "nifi-component-state-reset"]
    assert finding.confidence == "confirmed" and "ListFile" in finding.title
    assert finding.impact.figures["reprocessing_window_end"].startswith("2026-04-08T08:03:40")
    assert finding.impact.figures["relisted_records"] == 4812
    assert any("Detected that state was cleared" in e.text for e in finding.evidence)
    assert any(e.kind == "state" and e.text.startswith("cleared") for e in finding.evidence)


def test_the_upgrade_loss_names_the_live_processor_and_not_the_removed_ones(detected):
    _analysis, findings = detected("bundles/nifi-upgrade-state-not-carried-over-1.28.1-2.9.0")
    resets = [f for f in findings if f.detector == "nifi-component-state-reset" and f.severity in RAISED]
    assert len(resets) == 1 and "ListSFTP[id=018f3a1c-5b2e-1000-9a7d-2c4e6f8a0b13]" in resets[0].title
    assert resets[0].confidence == "confirmed" and "NIFI-14392" in resets[0].explanation
    assert resets[0].impact.figures["relisted_records"] == 21804 + 17
    # the twin's capture really holds the empty 1.x records of three removed processors (and the key store's)
    analysis, _ = detected("bundles/nifi-upgrade-removed-components-1.28.1-2.9.0-healthy")
    v1 = analysis.timeline.nifi_state_changes.where("origin = 'capture' AND detail LIKE '% in snapshot%'")
    assert sorted(r.entries_after for r in v1.collect()) == [0, 0, 0, 1]
