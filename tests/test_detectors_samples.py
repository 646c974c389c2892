"""Detectors on the shipped sample bundles: each fires exactly as its EXPECTED.json says.

Every bundle is parsed once per test session (``detected`` caches ``toolkit.pipeline.analyse``
and the detectors' findings): Spark is slow on small shared machines.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from support import SAMPLES
from toolkit.detectors import findings_to_json, registered_detectors, run_detectors  # noqa: E402
from toolkit.detectors.preconditions import atoms, evaluate  # noqa: E402

BUNDLES = sorted(p.name for p in SAMPLES.iterdir() if (p / "EXPECTED.json").is_file())
SEED_DETECTORS = {"eos-stale-restore-checkpoint", "standby-lock-stale-checkpoint", "restore-skipped-after-reassignment",
                  "alos-crash-reprocessing", "kinesis-checkpoint-migration-loss"}
HEALTHY = {"kafka-eos-clean-rolling-restart", "nifi-kinesis-migration-ok"}
RAISED = ("critical", "warning")


def expected_of(name: str) -> dict:
    return json.loads((SAMPLES / name / "EXPECTED.json").read_text(encoding="utf-8"))


def _raised(findings, detector_id=None):
    return [f for f in findings if f.severity in RAISED and (detector_id is None or f.detector == detector_id)]


@pytest.mark.parametrize("name", BUNDLES)
def test_seed_detectors_fire_exactly_as_expected(detected, name):
    _, findings = detected(name)
    assert not [f for f in findings if "failed:" in f.title], [f.title for f in findings]
    fired = sorted({f.detector for f in _raised(findings) if f.detector in SEED_DETECTORS})
    assert fired == sorted(expected_of(name)["detectors"]), [(f.detector, f.severity, f.title) for f in findings]


def _false_preconditions(timeline, specs) -> set[str]:
    """The detectors whose precondition is false on ``timeline``, each row check counted on its own table."""
    facts = {}
    for check in {check for spec in specs.values() for check in atoms(spec.requires)}:
        table = timeline
        for part in check.table.split("."):
            table = getattr(table, part)
        matching = table.where(check.where) if check.where else table
        facts[check] = len(matching.limit(check.min_rows).collect()) >= check.min_rows
    return {i for i, spec in specs.items() if evaluate(spec.requires, facts) is False}


@pytest.mark.parametrize("name", BUNDLES)
def test_gated_detectors_would_have_found_nothing(detected, name):
    """The gate skips exactly the detectors whose precondition is false (checked here one row check at a time,
    not in the gate's single query), and each of them, run without the gate, finds nothing."""
    analysis, findings = detected(name)
    specs = registered_detectors()
    assert set(findings.skipped) == _false_preconditions(analysis.timeline, specs)
    assert run_detectors(analysis.timeline, only=sorted(findings.skipped), gate=False) == []
    assert set(findings.ran) | set(findings.skipped) == set(specs)


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_bundles_raise_nothing(detected, name):
    _, findings = detected(name)
    assert _raised(findings) == [], [(f.detector, f.severity, f.title) for f in _raised(findings)]


@pytest.mark.parametrize("name", ["kafka-eos-stale-checkpoint", "kafka-eos-stale-checkpoint-info-only"])
def test_eos_stale_checkpoint_tasks_offsets_and_confidence(detected, name):
    expected = expected_of(name)
    _, findings = detected(name)
    (finding,) = _raised(findings, "eos-stale-restore-checkpoint")
    assert finding.hosts == [expected["crashed_host"]]
    assert finding.tasks == expected["tasks"]
    by_task = {p["task"]: p for p in finding.impact.figures["partitions"]}
    for stale in expected["stale_checkpoints"]:
        assert by_task[stale["task"]]["checkpoint_offset"] == stale["checkpoint_offset"]
        assert by_task[stale["task"]]["replayed_records"] == stale["replayed_records"]
    assert any("4.1.2 is affected by KAFKA-20685" in s for s in finding.known_bugs)
    if expected["state_capture"] is None:
        assert finding.confidence == "likely"
        gaps = " ".join(finding.missing_evidence)
        assert "capture" in gaps and ".checkpoint" in gaps and "ProcessorStateManager" in gaps and "DEBUG" in gaps
    else:
        assert finding.confidence == "confirmed" and finding.missing_evidence == []


def test_frozen_eos_checkpoint_is_confirmed_by_the_capture_and_likely_from_logs_elsewhere(detected):
    _, findings = detected("kafka-eos-stale-checkpoint")
    frozen = {f.hosts[0]: f for f in findings if f.detector == "eos-checkpoint-stale-during-running"}
    assert sorted(frozen) == ["orders-agg-0", "orders-agg-1"], [f.title for f in findings]
    captured, logged = frozen["orders-agg-0"], frozen["orders-agg-1"]
    # orders-agg-0's state copy (newest file 10:02:12, during run 1) still holds the 09:00:06 checkpoint.
    assert (captured.confidence, captured.tasks) == ("confirmed", ["0_0", "0_2"])
    assert any(e.kind == "state" and "mtime 2026-03-07 09:00:06" in e.text for e in captured.evidence)
    # orders-agg-1 has no capture: its DEBUG write with no later write or delete decides.
    assert (logged.confidence, logged.tasks) == ("likely", ["0_1", "0_3"])
    assert any(e.kind == "log" and "Writing checkpoint" in e.text for e in logged.evidence)


def test_standby_lock_stale_checkpoint_facts(detected):
    expected = expected_of("kafka-standby-lock-cleaner")
    _, findings = detected("kafka-standby-lock-cleaner")
    (finding,) = _raised(findings, "standby-lock-stale-checkpoint")
    assert (finding.hosts, finding.tasks, finding.confidence) == ([expected["host"]], expected["tasks"], "confirmed")
    stale = expected["stale_checkpoint"]
    assert finding.impact.figures["stale_offset"] == stale["offset"]
    assert finding.impact.figures["restore_end_offset"] == stale["end_offset_at_restore"]


def test_restore_skipped_facts(detected):
    expected = expected_of("kafka-restore-skipped")
    _, findings = detected("kafka-restore-skipped")
    (finding,) = _raised(findings, "restore-skipped-after-reassignment")
    assert (finding.hosts, finding.tasks) == ([expected["host"]], expected["tasks"])
    assert finding.impact.figures["changelog"] == f"{expected['changelog']}-{expected['partition']}"


def test_alos_crash_reprocessing_facts(detected):
    expected = expected_of("kafka-alos-crash-reprocessing")
    _, findings = detected("kafka-alos-crash-reprocessing")
    (finding,) = _raised(findings, "alos-crash-reprocessing")
    assert finding.severity == "warning" and finding.hosts == [expected["crashed_host"]]
    assert finding.impact.figures["reprocessing_window_ms_max"] == expected["reprocessing_window_ms_max"]
    last = expected["last_summary_before_crash"]
    assert (last["source"], last["line_no"]) in {(e.source, e.line_no) for e in finding.evidence}
    restored = {r["task"]: r["records"] for r in finding.impact.figures["restored"]}
    assert restored == {r["task"]: r["restored_records"] for r in expected["restored_from_checkpoint"]}


def test_kinesis_migration_loss_per_table(detected):
    expected = expected_of("nifi-kinesis-migration-loss")
    _, findings = detected("nifi-kinesis-migration-loss")
    raised = _raised(findings, "kinesis-checkpoint-migration-loss")
    assert sorted(t for f in raised for t in f.tasks) == sorted(expected["failed_tables"])
    assert all(f.confidence == "confirmed" and f.impact.figures["shards"] for f in raised)


# --- evidence really is in the bundle --------------------------------------------------------------

def _bundle_line(bundle: Path, work_dir: Path, source: str, line_no: int) -> str:
    """The raw text of ``line_no`` in ``source`` (``archive!/member`` read from the archive)."""
    if "!/" in source:
        outer, member = source.split("!/", 1)
        archive = bundle / outer
        if archive.is_file() and tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tar:
                data = tar.extractfile(member).read()
        else:  # nested or zip archives: the extracted copy in the work folder
            data = next(p for p in work_dir.rglob(Path(member).name) if p.is_file()).read_bytes()
    else:
        data = (bundle / source).read_bytes()
    if source.endswith(".gz") and "!/" not in source:
        import gzip

        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace").splitlines()[line_no - 1]


def _strings_of(raw: str) -> list[str]:
    try:
        value = json.loads(raw)
    except ValueError:
        return [raw]
    return [raw, *[v for v in value.values() if isinstance(v, str)]] if isinstance(value, dict) else [raw]


@pytest.mark.parametrize("name", BUNDLES)
def test_log_evidence_is_at_the_cited_file_and_line(detected, name):
    analysis, findings = detected(name)
    bundle = SAMPLES / name
    checked = 0
    for finding in findings:
        for item in finding.evidence:
            if item.kind != "log":
                assert item.source and (item.line_no is None or item.line_no > 0)
                continue
            raw = _bundle_line(bundle, analysis.bundle.work_dir, item.source, item.line_no)
            assert any(item.text in s for s in _strings_of(raw)), (finding.detector, item.source, item.line_no)
            checked += 1
    assert checked or not findings


@pytest.mark.parametrize("name", BUNDLES)
def test_findings_serialise(detected, name):
    _, findings = detected(name)
    data = json.loads(json.dumps(findings_to_json(findings, bundle=name)))
    assert data["summary"]["findings"] == len(findings)
    assert all(f["playbook"] == f"playbooks/{f['detector']}.md" for f in data["findings"])


@pytest.mark.parametrize("name,detector_id,bug", [
    ("kafka-eos-stale-checkpoint", "eos-stale-restore-checkpoint", "KAFKA-20685"),
    ("kafka-standby-lock-cleaner", "standby-lock-stale-checkpoint", "KAFKA-8187"),
    ("kafka-restore-skipped", "restore-skipped-after-reassignment", "KAFKA-7672"),
    ("nifi-kinesis-migration-loss", "kinesis-checkpoint-migration-loss", "NIFI-16003"),
])
def test_seed_findings_name_the_upstream_bug_for_the_run_version(detected, name, detector_id, bug):
    version = expected_of(name)["version"]
    _, findings = detected(name)
    raised = _raised(findings, detector_id)
    assert raised
    sentences = [s for f in raised for s in f.known_bugs if bug in s]
    assert sentences, [f.known_bugs for f in raised]
    # With the run's version known the sentence must say it is affected; never a silent guess.
    assert any((version in s and "affected" in s) or "cannot tell" in s for s in sentences), sentences
