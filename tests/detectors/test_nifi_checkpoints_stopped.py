"""The nifi-checkpoints-stopped detector: the FlowFile repository stops checkpointing (a full disk, a poisoned
journal) and the gap grows. The hand-built bundle with its healthy twin.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from support.bundles import bundle_tests, nifi_evidence_test

ID = "nifi-checkpoints-stopped"


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)


test_findings_match_expected = nifi_evidence_test(ID)


def test_checkpoints_stopped_measures_the_gap(detected):
    analysis, findings = detected("bundles/nifi-checkpoints-stopped")
    (finding,) = [f for f in findings if f.detector == "nifi-checkpoints-stopped"]
    # four "Unable to checkpoint FlowFile Repository" and one journal marked as poisoned
    assert finding.confidence == "confirmed" and finding.impact.figures["failures"] == 5
    assert 400 < finding.impact.figures["gap_s"] < 500 and 19 < finding.impact.figures["interval_s"] < 22
    kinds = {r.kind for r in analysis.timeline.nifi_checkpoints.where(F.col("repository") == "flowfile").collect()}
    assert {"checkpointed", "wal_checkpointed", "checkpoint_failed", "journal_poisoned", "restored"} <= kinds
