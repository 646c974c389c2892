"""The nifi-flowfile-repo-not-restored detector: a restart restores fewer FlowFiles than the last checkpoint held;
a copy of a running node's repository is no damage. Whether a copy was taken from a running node, and the
hand-built bundles with their healthy twins.
"""

from __future__ import annotations

import shutil
from collections import namedtuple
from datetime import datetime, timedelta

from pyspark.sql import functions as F

from support import BUNDLES
from support.bundles import bundle_tests, nifi_evidence_test
from toolkit.detectors import run_detectors
from toolkit.detectors.nifi_flowfile_repo_not_restored import ID as FFR, _node_when_copied

ID = "nifi-flowfile-repo-not-restored"
LIVE = BUNDLES / "nifi-flowfile-repo-live-capture-2.9.0-healthy"


# --- a copy of a running node --------------------------------------------------------------------------------------

Run = namedtuple("Run", "host start end end_kind")


def test_whether_a_copy_was_taken_from_a_running_node():
    t0 = datetime(2026, 4, 8, 9, 0)
    copied = datetime(2026, 4, 8, 11, 30, 12)
    live = [Run("n", t0, datetime(2026, 4, 8, 11, 44, 52), "unknown")]
    assert _node_when_copied("n", copied, live) == "running"
    # stopped later, cleanly: it was still running when copied
    assert _node_when_copied("n", copied, [Run("n", t0, datetime(2026, 4, 8, 11, 50), "clean")]) == "running"
    # the power went at the last write; the copy was made before the next start
    crashed = [Run("n", t0, copied + timedelta(milliseconds=200), "crash"),
               Run("n", datetime(2026, 4, 8, 11, 40), datetime(2026, 4, 8, 11, 41), "unknown")]
    assert _node_when_copied("n", copied, crashed) == "stopped"
    # the log stops with the copy and says nothing about how: cannot tell
    assert _node_when_copied("n", copied, [Run("n", t0, copied, "unknown")]) == "unknown"
    assert _node_when_copied("n", copied, []) == "unknown"
    assert _node_when_copied("other", copied, live) == "unknown"


def test_a_live_copy_without_logs_is_only_an_info(spark, tmp_path):
    from toolkit.cache import ParseCache
    from toolkit.pipeline import analyse

    bundle = tmp_path / "bundle"
    (bundle / "nifi-2").mkdir(parents=True)
    shutil.copy(LIVE / "nifi-2" / "flowfile-repository.tar.gz", bundle / "nifi-2")
    analysis = analyse(spark, bundle, tmp_path / "out", cache=ParseCache())
    mine = [f for f in run_detectors(analysis.timeline) if f.detector == FFR]
    assert [(f.severity, f.confidence) for f in mine] == [("info", "possible")]
    assert "journals/7731520.journal" in mine[0].explanation and mine[0].hosts == ["nifi-2"]


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)


test_findings_match_expected = nifi_evidence_test(ID)


def test_flowfile_restore_compares_with_the_last_checkpoint(detected):
    analysis, findings = detected("bundles/nifi-flowfile-repo-not-restored")
    (finding,) = [f for f in findings if f.detector == "nifi-flowfile-repo-not-restored" and f.severity == "critical"]
    assert finding.impact.figures["restored"] == 1204 and finding.impact.figures["last_checkpoint_records"] == 18412
    assert {"journal_truncated", "snapshot_empty"} <= set(finding.impact.figures["damage"])
    capture = analysis.timeline.nifi_checkpoints.where(F.col("origin") == "capture").collect()
    assert {(r.path, r.problem is not None) for r in capture} == {
        ("checkpoint", True), ("journals/6613023.journal", True)}


def test_a_live_copy_holds_what_a_stopped_node_would_call_damage(detected):
    analysis, findings = detected("bundles/nifi-flowfile-repo-live-capture-2.9.0-healthy")
    capture = {r.path: r for r in analysis.timeline.nifi_checkpoints.where("origin = 'capture'").collect()}
    assert capture["journals/7731520.journal"].problem.startswith("truncated: transaction 7731525")
    assert capture["checkpoint.partial"].kind == "snapshot_partial"
    assert not [f for f in findings if f.detector == "nifi-flowfile-repo-not-restored"]
    # FlowFiles whose queue is gone are kept (retain.orphaned.flowfiles, default true): in the timeline, no loss
    orphaned = analysis.timeline.nifi_checkpoints.where("kind = 'orphaned'").collect()
    assert [r.records for r in orphaned] == [3]
