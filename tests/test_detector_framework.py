"""The detector framework as a whole: one registered detector and one playbook per module, the runner's contract
(declared tables, errors as findings, evidence read in one join, truncation), ranking, the findings JSON and
the ``detect`` command; and, on every shipped sample, that the detectors fire as its EXPECTED.json says, cite
real lines and serialise. Each detector's own rules are tested in ``tests/detectors/``.
"""

from __future__ import annotations

import argparse
import json
import tarfile
from pathlib import Path

import pytest

from support import REPO, SAMPLES
from support.findings import raised
from support.samples import NAMES as SAMPLE_NAMES, expected_of
from support.timelines import at, ev, make_timeline
from toolkit.detectors import (
    Evidence,
    Finding,
    Impact,
    findings_from_json,
    findings_to_json,
    registered_detectors,
    run_detectors,
)
from toolkit.detectors.base import REGISTRY, DetectorSpec
from toolkit.detectors.preconditions import atoms, evaluate


# --- registry and playbooks ----------------------------------------------------------------------------------------

def test_every_detector_module_registers_one_detector_and_every_detector_has_a_playbook():
    """The registry holds exactly one detector per module of toolkit/detectors, under the module's name, and
    the playbooks with a detector's front matter are exactly those of the registry."""
    support_modules = {"__init__", "base", "common", "evidence", "harness", "preconditions", "registry", "runner",
                       "serialise", "verdict"}
    modules = {p.stem for p in (REPO / "toolkit" / "detectors").glob("*.py")} - support_modules
    specs = registered_detectors()
    assert sorted(spec.fn.__module__.rsplit(".", 1)[1] for spec in specs.values()) == sorted(modules)
    assert sorted(specs) == sorted(module.replace("_", "-") for module in modules)
    with_front_matter = {p.stem for p in (REPO / "playbooks").glob("*.md")
                         if p.read_text(encoding="utf-8").startswith("---\nid: ")}
    assert with_front_matter == set(specs)


def test_every_registered_detector_has_a_playbook_with_front_matter():
    specs = registered_detectors()
    index = (REPO / "playbooks" / "README.md").read_text(encoding="utf-8")
    for detector_id, spec in specs.items():
        path = REPO / spec.playbook
        assert path.is_file(), path
        text = path.read_text(encoding="utf-8")
        head = text.split("---")[1]
        assert f"id: {detector_id}" in head and f"severity: {spec.severity}" in head and "title:" in head
        for section in ("## Symptoms", "## Affected and fix versions", "## How the detector decides",
                        "## How to confirm by hand", "## Evidence to collect", "## Impact assessment",
                        "## Remediation", "## Prevention", "## References"):
            assert section in text, (detector_id, section)
        assert "collecting-evidence.md" in text and "capturing-state.md" in text
        assert f"({detector_id}.md)" in index


def test_playbooks_name_the_known_bugs_of_their_detector():
    from toolkit.knowledge import bugs_for_detector

    for detector_id, spec in registered_detectors().items():
        text = (REPO / spec.playbook).read_text(encoding="utf-8")
        for bug in bugs_for_detector(detector_id):
            assert bug.id in text, (detector_id, bug.id)


def test_registered_ids_match_the_knowledge_files():
    from toolkit.knowledge import load_known_bugs
    from toolkit.knowledge.collect import known_detector_ids

    ids = set(registered_detectors())
    assert ids == set(known_detector_ids())
    assert {d for bug in load_known_bugs() for d in bug.detectors} <= ids


# --- the runner's contract -----------------------------------------------------------------------------------------

def test_a_failing_detector_becomes_an_error_finding(spark):
    def broken(_tl):
        raise RuntimeError("boom")

    REGISTRY["test-broken"] = DetectorSpec("test-broken", "broken", "warning", (), broken)
    try:
        (finding,) = run_detectors(object(), only=["test-broken"])
    finally:
        del REGISTRY["test-broken"]
    assert finding.severity == "error" and finding.title.startswith("detector test-broken failed: RuntimeError: boom")


def test_unknown_detector_id_is_refused():
    with pytest.raises(KeyError):
        run_detectors(object(), only=["no-such-detector"])


def _register(detector_id, fn, needs=(), severity="warning", role="consequence"):
    from toolkit.detectors.base import REGISTRY, DetectorSpec

    REGISTRY[detector_id] = DetectorSpec(detector_id, detector_id, severity, tuple(needs), fn, role)


def _unregister(*ids):
    from toolkit.detectors.base import REGISTRY

    for detector_id in ids:
        REGISTRY.pop(detector_id, None)


def test_a_detector_sees_only_the_tables_it_declares(spark):
    def sneaky(tl):
        tl.process_runs.count()
        return tl.events.count() and []

    _register("test-sneaky", sneaky, needs=("process_runs",))
    try:
        (finding,) = run_detectors(make_timeline(spark), only=["test-sneaky"])
    finally:
        _unregister("test-sneaky")
    assert finding.severity == "error" and "does not declare" in finding.title and "events" in finding.title


def test_every_detector_runs_on_an_empty_timeline_within_its_needs(spark):
    """Without the gate (which skips every detector on an empty timeline), each detector runs on a view of
    only the tables it declares and finds nothing: no error finding, no finding at all."""
    from toolkit.detectors import registered_detectors

    every = sorted(registered_detectors())
    result = run_detectors(make_timeline(spark), gate=False)
    assert sorted(result.ran) == every and result.skipped == {}
    assert [(f.detector, f.severity, f.title) for f in result] == []
    # the gate alone would have skipped them all: this test is the only run they get on nothing
    gated = run_detectors(make_timeline(spark))
    assert gated.ran == () and sorted(gated.skipped) == every


def test_evidence_of_all_findings_is_read_in_one_join(spark, monkeypatch):
    import toolkit.detectors.runner as runner
    from toolkit.detectors.base import Finding
    from toolkit.detectors.common import evidence_lines

    calls = []
    real = runner.resolve_evidence
    monkeypatch.setattr(runner, "resolve_evidence", lambda tl, fs, **kw: calls.append(len(fs)) or real(tl, fs, **kw))

    def cites(line_no):
        def fn(tl):
            rows = tl.process_runs.collect()  # no access to the events: the runner reads the lines
            return [Finding(detector=f"test-cites-{line_no}", severity="warning", confidence="likely",
                            title="t", explanation="e", hosts=[rows[0].host],
                            evidence=evidence_lines(tl, [("h0/app.log", line_no)]))]
        return fn

    events = [ev(1, at(1), "stream-thread [t] State transition from PARTITIONS_ASSIGNED to RUNNING", "THREAD_STATE"),
              ev(2, at(2), "stream-client [c] Streams client stopped completely", "CLIENT_STOPPED")]
    tl = make_timeline(spark, events=events, process_runs=[{"host": "h0", "run_id": "h0#1", "run_no": 1}])
    _register("test-cites-1", cites(1), needs=("process_runs",))
    _register("test-cites-2", cites(2), needs=("process_runs",))
    try:
        found = run_detectors(tl, only=["test-cites-1", "test-cites-2"])
    finally:
        _unregister("test-cites-1", "test-cites-2")
    assert calls == [2]
    texts = {f.detector: [e.text for e in f.evidence] for f in found}
    assert texts == {"test-cites-1": [events[0]["message"]], "test-cites-2": [events[1]["message"]]}


def test_truncation_is_recorded(spark):
    from toolkit.detectors.common import bounded

    df = spark.range(7).withColumnRenamed("id", "n")
    got = bounded(df, 3, order=["n"])
    assert [r.n for r in got.rows] == [0, 1, 2] and got.total == 7
    assert got.record("rows") == {"rows": {"total": 7, "shown": 3}}
    assert bounded(df, 10).record("rows") == {}


def test_missing_evidence_leaves_out_the_logging_a_host_already_has(spark):
    """A finding does not ask to raise loggers to DEBUG on a host whose log already holds their DEBUG lines."""
    from toolkit.detectors import drop_logging_already_kept
    from toolkit.detectors.base import Finding
    from toolkit.knowledge import logging_steps

    step = next(s for s in logging_steps("eos-checkpoint-stale-during-running") if s.level == "DEBUG")
    debug_lines = [ev(i, at(i), "Writing checkpoint", "CHECKPOINT_WRITTEN", level="DEBUG",
                      logger=f"org.apache.kafka.streams.processor.internals.{name}") for i, name in enumerate(step.names, 1)]
    # h1 logged the same loggers at INFO only: the pointer stays for it.
    info_lines = [ev(10 + i, at(i), "Initialized", "TASK_INITIALIZED", host="h1", level="INFO",
                     logger=f"org.apache.kafka.streams.processor.internals.{name}") for i, name in enumerate(step.names, 1)]
    tl = make_timeline(spark, events=[*debug_lines, *info_lines])
    at_debug, at_info = (Finding(detector="eos-checkpoint-stale-during-running", severity="warning", confidence="likely",
                                 title="t", explanation="e", hosts=[host], missing_evidence=[step.text, "Capture state.dir"])
                         for host in ("h0", "h1"))
    drop_logging_already_kept(tl, [at_debug, at_info])
    assert at_debug.missing_evidence == ["Capture state.dir"]
    assert at_info.missing_evidence == [step.text, "Capture state.dir"]


# --- ranking and the findings JSON ---------------------------------------------------------------------------------

def _finding(detector="x", severity="warning", confidence="likely", ts=None, **kw):
    return Finding(detector=detector, severity=severity, confidence=confidence, title=f"{detector} {severity}",
                   explanation="because", ts=ts, **kw)


def test_ranking_and_json_round_trip():
    items = [_finding("c", "info", "confirmed", at(1)), _finding("b", "critical", "likely", at(5)),
             _finding("a", "critical", "confirmed", at(9)), _finding("d", "critical", "confirmed", at(2),
                                                                     evidence=[Evidence("h/app.log", 3, "line", "log", at(2))],
                                                                     impact=Impact("1 record", {"records": 1}, "counted"))]
    ranked = sorted(items, key=Finding.rank_key)
    assert [f.detector for f in ranked] == ["d", "a", "b", "c"]
    data = findings_to_json(ranked, bundle="x")
    assert data["schema_version"] == 1 and data["bundle"] == "x"
    assert data["summary"] == {"findings": 4, "critical": 3, "warning": 0, "info": 1, "error": 0,
                               "detectors": ["a", "b", "c", "d"]}
    first = data["findings"][0]
    assert first["ts"] == "2026-03-07T09:00:02.000Z" and first["evidence"][0]["ts"] == "2026-03-07T09:00:02.000Z"
    assert set(first) == {"detector", "severity", "confidence", "title", "explanation", "hosts", "tasks", "ts",
                          "evidence", "missing_evidence", "impact", "known_bugs", "playbook", "truncation", "role"}
    json.dumps(data)
    back = findings_from_json(data)
    assert [f.detector for f in back] == ["d", "a", "b", "c"] and back[0].impact.figures == {"records": 1}


def test_schema_doc_lists_every_field():
    doc = (REPO / "docs" / "findings-schema.md").read_text(encoding="utf-8")
    for name in ("schema_version", "summary", "findings", "detector", "severity", "confidence", "title",
                 "explanation", "hosts", "tasks", "ts", "evidence", "source", "line_no", "text", "kind",
                 "missing_evidence", "impact", "figures", "method", "known_bugs", "playbook", "truncation", "total",
                 "shown", "role", "error"):
        assert f"`{name}`" in doc, name


def test_finding_refuses_unknown_severity():
    with pytest.raises(ValueError):
        _finding(severity="fatal")


def test_a_root_cause_ranks_above_its_trigger_and_consequences():
    from toolkit.detectors.base import Finding

    def f(detector, role, confidence="confirmed", seconds=0):
        return Finding(detector=detector, severity="warning", confidence=confidence, title=detector,
                       explanation="e", ts=at(seconds), role=role)

    ranked = sorted([f("restore-from-scratch", "consequence", seconds=0), f("lock-contention", "trigger", seconds=5),
                     f("alos-crash-reprocessing", "root-cause", "likely", seconds=9)], key=Finding.rank_key)
    assert [x.detector for x in ranked] == ["alos-crash-reprocessing", "lock-contention", "restore-from-scratch"]


# --- the detect command --------------------------------------------------------------------------------------------

def test_cli_text_and_fail_on(monkeypatch, tmp_path, capsys):
    from toolkit import detect as cli

    findings = [_finding("eos-stale-restore-checkpoint", "critical", "confirmed", at(0),
                         evidence=[Evidence("h/app.log", 7, "State store x initialized from checkpoint", "log", at(0))],
                         missing_evidence=["a capture"], impact=Impact("81,732 records replayed"))]
    monkeypatch.setattr(cli, "_investigate", lambda args: (findings, findings_to_json(findings, bundle=str(args.bundle))))
    parser = cli.build_parser(argparse.ArgumentParser())
    args = parser.parse_args([str(tmp_path), "--out", str(tmp_path / "out"), "--fail-on", "critical"])
    assert cli.run(args) == cli.EXIT_FINDINGS
    out = capsys.readouterr().out
    assert "CRITICAL" in out and "h/app.log:7  State store x initialized from checkpoint" in out
    assert "playbooks/eos-stale-restore-checkpoint.md" in out
    args = parser.parse_args([str(tmp_path), "--format", "json", "--fail-on", "warning"])
    assert cli.run(args) == cli.EXIT_FINDINGS
    assert json.loads(capsys.readouterr().out)["summary"]["critical"] == 1
    assert cli.run(parser.parse_args([str(tmp_path)])) == 0


def test_fail_on_critical_exits_non_zero_when_a_detector_errors(monkeypatch, tmp_path):
    import argparse

    from toolkit import detect as cli
    from toolkit.detectors.base import Finding

    failed = Finding(detector="eos-stale-restore-checkpoint", severity="error", confidence="possible",
                     title="detector eos-stale-restore-checkpoint failed: RuntimeError: boom", explanation="raised")
    monkeypatch.setattr(cli, "_investigate", lambda args: ([failed], {"bundle": str(args.bundle)}))
    parser = cli.build_parser(argparse.ArgumentParser())
    assert cli.run(parser.parse_args([str(tmp_path), "--fail-on", "critical"])) == cli.EXIT_DETECTOR_ERROR != 0
    assert cli.run(parser.parse_args([str(tmp_path)])) == cli.EXIT_OK


# --- every shipped sample ------------------------------------------------------------------------------------------

SEED_DETECTORS = {"eos-stale-restore-checkpoint", "standby-lock-stale-checkpoint", "restore-skipped-after-reassignment",
                  "alos-crash-reprocessing", "kinesis-checkpoint-migration-loss"}
HEALTHY = {"kafka-eos-clean-rolling-restart", "nifi-kinesis-migration-ok"}


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_seed_detectors_fire_exactly_as_expected(detected, name):
    _, findings = detected(name)
    assert not [f for f in findings if "failed:" in f.title], [f.title for f in findings]
    fired = sorted({f.detector for f in raised(findings) if f.detector in SEED_DETECTORS})
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


@pytest.mark.parametrize("name", SAMPLE_NAMES)
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
    assert raised(findings) == [], [(f.detector, f.severity, f.title) for f in raised(findings)]


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


@pytest.mark.parametrize("name", SAMPLE_NAMES)
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


@pytest.mark.parametrize("name", SAMPLE_NAMES)
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
    found = raised(findings, detector_id)
    assert found
    sentences = [s for f in found for s in f.known_bugs if bug in s]
    assert sentences, [f.known_bugs for f in found]
    # With the run's version known the sentence must say it is affected; never a silent guess.
    assert any((version in s and "affected" in s) or "cannot tell" in s for s in sentences), sentences
