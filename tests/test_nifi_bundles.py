"""The NiFi state detectors on the hand-built bundles in ``tests/bundles/nifi-*``: each fires on its incident and
stays quiet on its healthy twin, as the bundle's EXPECTED.json says, with evidence lines or state facts."""

from __future__ import annotations

import json
from datetime import timezone
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from toolkit.detectors import run_detectors

BUNDLES = Path(__file__).parent / "bundles"
NAMES = sorted(p.name for p in BUNDLES.glob("nifi-*") if (p / "EXPECTED.json").is_file())
RAISED = ("critical", "warning")


@pytest.fixture(scope="module")
def analysed(analysis_of):
    """``analysed(name) -> (analysis, findings)``: the session's analysis of the bundle, detected once here."""
    done: dict[str, tuple] = {}

    def get(name: str):
        if name not in done:
            analysis = analysis_of(f"bundles/{name}")
            done[name] = (analysis, run_detectors(analysis.timeline))
        return done[name]

    return get


def _expected(name: str) -> dict:
    return json.loads((BUNDLES / name / "EXPECTED.json").read_text(encoding="utf-8"))


def test_there_is_an_incident_and_a_twin_per_detector():
    kinds = {name: _expected(name)["kind"] for name in NAMES}
    for detector in ("nifi-component-state-reset", "nifi-flowfile-repo-not-restored", "nifi-checkpoints-stopped"):
        assert kinds[detector] == "incident" and kinds[f"{detector}-healthy"] == "healthy"


@pytest.mark.parametrize("name", NAMES)
def test_findings_match_expected(analysed, name):
    expected = _expected(name)
    _analysis, findings = analysed(name)
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
def test_runs_match_expected(analysed, name):
    analysis, _ = analysed(name)
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


def test_state_reset_names_the_window_and_the_relisting(analysed):
    _analysis, findings = analysed("nifi-component-state-reset")
    (finding,) = [f for f in findings if f.detector == "nifi-component-state-reset"]
    assert finding.confidence == "confirmed" and "ListFile" in finding.title
    assert finding.impact.figures["reprocessing_window_end"].startswith("2026-04-08T08:03:40")
    assert finding.impact.figures["relisted_records"] == 4812
    assert any("Detected that state was cleared" in e.text for e in finding.evidence)
    assert any(e.kind == "state" and e.text.startswith("cleared") for e in finding.evidence)


def test_flowfile_restore_compares_with_the_last_checkpoint(analysed):
    analysis, findings = analysed("nifi-flowfile-repo-not-restored")
    (finding,) = [f for f in findings if f.detector == "nifi-flowfile-repo-not-restored" and f.severity == "critical"]
    assert finding.impact.figures["restored"] == 1204 and finding.impact.figures["last_checkpoint_records"] == 18412
    assert {"journal_truncated", "snapshot_empty"} <= set(finding.impact.figures["damage"])
    capture = analysis.timeline.nifi_checkpoints.where(F.col("origin") == "capture").collect()
    assert {(r.path, r.problem is not None) for r in capture} == {
        ("checkpoint", True), ("journals/6613023.journal", True)}


def test_checkpoints_stopped_measures_the_gap(analysed):
    analysis, findings = analysed("nifi-checkpoints-stopped")
    (finding,) = [f for f in findings if f.detector == "nifi-checkpoints-stopped"]
    # four "Unable to checkpoint FlowFile Repository" and one journal marked as poisoned
    assert finding.confidence == "confirmed" and finding.impact.figures["failures"] == 5
    assert 400 < finding.impact.figures["gap_s"] < 500 and 19 < finding.impact.figures["interval_s"] < 22
    kinds = {r.kind for r in analysis.timeline.nifi_checkpoints.where(F.col("repository") == "flowfile").collect()}
    assert {"checkpointed", "wal_checkpointed", "checkpoint_failed", "journal_poisoned", "restored"} <= kinds
