"""The NiFi state detectors on the hand-built bundles in ``tests/bundles/nifi-*``: each fires on its incident and
stays quiet on its healthy twin, as the bundle's EXPECTED.json says, with evidence lines or state facts."""

from __future__ import annotations

import json
from datetime import timezone

import pytest
from pyspark.sql import functions as F

from support import BUNDLES

NAMES = sorted(p.name for p in BUNDLES.glob("nifi-*") if (p / "EXPECTED.json").is_file())
RAISED = ("critical", "warning")


def _expected(name: str) -> dict:
    return json.loads((BUNDLES / name / "EXPECTED.json").read_text(encoding="utf-8"))


def test_there_is_an_incident_and_a_twin_per_detector():
    kinds = {name: _expected(name)["kind"] for name in NAMES}
    for detector in ("nifi-component-state-reset", "nifi-flowfile-repo-not-restored", "nifi-checkpoints-stopped"):
        assert kinds[detector] == "incident" and kinds[f"{detector}-healthy"] == "healthy"


@pytest.mark.parametrize("name", NAMES)
def test_findings_match_expected(detected, name):
    expected = _expected(name)
    _analysis, findings = detected(f"bundles/{name}")
    raised = [f for f in findings if f.severity in RAISED]
    if expected["kind"] == "healthy":
        assert raised == [], [(f.detector, f.title) for f in raised]
    for want in expected["findings"]:
        hits = [f for f in raised if f.detector == want["detector"] and set(want["hosts"]) <= set(f.hosts)]
        assert hits, (want, [(f.detector, f.title) for f in findings])
        assert all(f.evidence for f in hits)
        assert any(e.kind == "log" and e.line_no for f in hits for e in f.evidence) or any(
            e.kind == "state" for f in hits for e in f.evidence)
    for detector in expected["must_not"]:
        assert not [f for f in raised if f.detector == detector], detector


@pytest.mark.parametrize("name", NAMES)
def test_runs_match_expected(detected, name):
    analysis, _ = detected(f"bundles/{name}")
    runs = analysis.timeline.process_runs.orderBy("host", "run_no").collect()
    got = [(r.host, _iso(r.start), _iso(r.end), r.end_kind) for r in runs]
    want = [(r["host"], r["start"], r["end"], r["end_kind"]) for r in _expected(name)["runs"]]
    assert got == want
    # 1.x prints no version in nifi-app.log ('Launching NiFi...'): the run's version is unknown, never a wrong one
    for run, expected in zip(runs, _expected(name)["runs"]):
        assert run.version in (None, expected["version"])


def _iso(value) -> str | None:
    if value is None:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value.isoformat(timespec="milliseconds") + "Z"


def test_state_reset_names_the_window_and_the_relisting(detected):
    _analysis, findings = detected("bundles/nifi-component-state-reset")
    (finding,) = [f for f in findings if f.detector == "nifi-component-state-reset"]
    assert finding.confidence == "confirmed" and "ListFile" in finding.title
    assert finding.impact.figures["reprocessing_window_end"].startswith("2026-04-08T08:03:40")
    assert finding.impact.figures["relisted_records"] == 4812
    assert any("Detected that state was cleared" in e.text for e in finding.evidence)
    assert any(e.kind == "state" and e.text.startswith("cleared") for e in finding.evidence)


def test_flowfile_restore_compares_with_the_last_checkpoint(detected):
    analysis, findings = detected("bundles/nifi-flowfile-repo-not-restored")
    (finding,) = [f for f in findings if f.detector == "nifi-flowfile-repo-not-restored" and f.severity == "critical"]
    assert finding.impact.figures["restored"] == 1204 and finding.impact.figures["last_checkpoint_records"] == 18412
    assert {"journal_truncated", "snapshot_empty"} <= set(finding.impact.figures["damage"])
    capture = analysis.timeline.nifi_checkpoints.where(F.col("origin") == "capture").collect()
    assert {(r.path, r.problem is not None) for r in capture} == {
        ("checkpoint", True), ("journals/6613023.journal", True)}


def test_checkpoints_stopped_measures_the_gap(detected):
    analysis, findings = detected("bundles/nifi-checkpoints-stopped")
    (finding,) = [f for f in findings if f.detector == "nifi-checkpoints-stopped"]
    # four "Unable to checkpoint FlowFile Repository" and one journal marked as poisoned
    assert finding.confidence == "confirmed" and finding.impact.figures["failures"] == 5
    assert 400 < finding.impact.figures["gap_s"] < 500 and 19 < finding.impact.figures["interval_s"] < 22
    kinds = {r.kind for r in analysis.timeline.nifi_checkpoints.where(F.col("repository") == "flowfile").collect()}
    assert {"checkpointed", "wal_checkpointed", "checkpoint_failed", "journal_poisoned", "restored"} <= kinds


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


def test_a_live_copy_holds_what_a_stopped_node_would_call_damage(detected):
    analysis, findings = detected("bundles/nifi-flowfile-repo-live-capture-2.9.0-healthy")
    capture = {r.path: r for r in analysis.timeline.nifi_checkpoints.where("origin = 'capture'").collect()}
    assert capture["journals/7731520.journal"].problem.startswith("truncated: transaction 7731525")
    assert capture["checkpoint.partial"].kind == "snapshot_partial"
    assert not [f for f in findings if f.detector == "nifi-flowfile-repo-not-restored"]
    # FlowFiles whose queue is gone are kept (retain.orphaned.flowfiles, default true): in the timeline, no loss
    orphaned = analysis.timeline.nifi_checkpoints.where("kind = 'orphaned'").collect()
    assert [r.records for r in orphaned] == [3]
