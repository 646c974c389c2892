"""Detectors on small hand-built timelines (no bundle parsing): decision rules, framework, JSON, CLI."""

from __future__ import annotations

import argparse
import json

import pytest

from support import REPO
from support.timelines import at, eos_timeline, ev, make_timeline, migration_step
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


def _only(findings, detector_id, severities=("critical", "warning")):
    return [f for f in findings if f.detector == detector_id and f.severity in severities]


def test_eos_stale_checkpoint_confirmed_by_a_write_at_restore_end(spark):
    tl = eos_timeline(spark)
    (finding,) = run_detectors(tl, only=["eos-stale-restore-checkpoint"])
    assert (finding.severity, finding.confidence) == ("critical", "confirmed")
    assert finding.tasks == ["0_0"] and finding.hosts == ["h0"]
    assert finding.impact.figures["replayed_records"] == 500
    assert {(e.source, e.line_no) for e in finding.evidence} >= {("h0/app.log", 11), ("h0/app.log", 40)}
    assert all(e.text for e in finding.evidence)
    assert any("KAFKA-20685" in s and "4.1.2" in s for s in finding.known_bugs)
    assert finding.missing_evidence == []
    assert finding.playbook == "playbooks/eos-stale-restore-checkpoint.md"


def test_eos_stale_checkpoint_info_only_is_likely_with_missing_evidence(spark):
    (finding,) = run_detectors(eos_timeline(spark, with_write=False), only=["eos-stale-restore-checkpoint"])
    assert finding.confidence == "likely"
    text = " ".join(finding.missing_evidence)
    assert ".checkpoint" in text and "capture" in text and "ProcessorStateManager" in text and "DEBUG" in text


def test_eos_stale_checkpoint_confirmed_by_a_capture(spark):
    (finding,) = run_detectors(eos_timeline(spark, with_write=False, capture=True),
                               only=["eos-stale-restore-checkpoint"])
    assert finding.confidence == "confirmed"
    assert any(e.kind == "state" and e.source == "h0/state.tar.gz" for e in finding.evidence)


def test_missing_evidence_leaves_out_the_logging_a_host_already_has(spark):
    """A finding does not ask to raise loggers to DEBUG on a host whose log already holds their DEBUG lines."""
    from toolkit.detectors import _drop_logging_already_kept
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
    _drop_logging_already_kept(tl, [at_debug, at_info])
    assert at_debug.missing_evidence == ["Capture state.dir"]
    assert at_info.missing_evidence == [step.text, "Capture state.dir"]


@pytest.mark.parametrize("change", [{"end_kind": "clean"}, {"wiped": True}])
def test_eos_stale_checkpoint_quiet_after_clean_close_or_wipe(spark, change):
    assert run_detectors(eos_timeline(spark, **change), only=["eos-stale-restore-checkpoint"]) == []


# --- standby-lock-stale-checkpoint ---------------------------------------------------------------

def test_standby_lock_cleaner_writeback_and_partial_restore(spark):
    t1, t2 = "app-StreamThread-1", "app-StreamThread-2"
    events = [
        ev(2, at(2), "standby-task [1_0] Writing checkpoint: {ledger-changelog-0=48211}", "CHECKPOINT_WRITTEN",
           run_id="h0#1", task_id="1_0", topic="ledger-changelog", partition=0, offset=48211, stream_thread=t1),
        ev(5, at(3), "Could not create standby task 1_0 due to standby-task [1_0] Failed to lock the state directory "
                     "for task 1_0; will retry", "LOCK_FAILED", run_id="h0#1", task_id="1_0", stream_thread=t2),
        ev(9, at(1200), "Deleting obsolete state directory 1_0 for task 1_0 as 1196311ms has elapsed", "DIR_CLEANED",
           run_id="h0#1", task_id="1_0"),
        ev(12, at(1920), "Writing checkpoint: {ledger-changelog-0=48211}", "CHECKPOINT_WRITTEN", run_id="h0#1",
           task_id="1_0", topic="ledger-changelog", partition=0, offset=48211),
        ev(20, at(3660), "Restoring partition ledger-changelog-0 from offset 48211 to endOffset 61877", "RESTORE_START",
           run_id="h0#1", topic="ledger-changelog", partition=0, offset=48211, end_offset=61877),
    ]
    tl = make_timeline(
        spark, events=events,
        process_runs=[{"host": "h0", "run_id": "h0#1", "run_no": 1, "version": "2.0.1", "start": at(0), "end": at(4000),
                       "end_kind": "unknown", "guarantee": "at_least_once"}],
        locks=[{"host": "h0", "run_id": "h0#1", "task_id": "1_0", "kind": "failed", "ts": at(3), "thread": t2,
                "role": "standby", "holder_thread": t1, "source": "h0/app.log", "line_no": 5}],
        dir_cleanups=[{"host": "h0", "run_id": "h0#1", "task_id": "1_0", "ts": at(1200), "source": "h0/app.log",
                       "line_no": 9}],
        checkpoints=[{"host": "h0", "task_id": "1_0", "topic": "ledger-changelog", "partition": 0, "ts": at(2),
                      "kind": "written", "offset": 48211, "origin": "log", "run_id": "h0#1", "source": "h0/app.log",
                      "line_no": 2},
                     {"host": "h0", "task_id": "1_0", "topic": "ledger-changelog", "partition": 0, "ts": at(1920),
                      "kind": "written", "offset": 48211, "origin": "log", "run_id": "h0#1", "source": "h0/app.log",
                      "line_no": 12}],
        restorations=[{"host": "h0", "run_id": "h0#1", "topic": "ledger-changelog", "partition": 0,
                       "start": at(3660), "end": at(3666), "start_offset": 48211, "end_offset": 61877,
                       "completed": True, "start_source": "h0/app.log", "start_line_no": 20,
                       "source": "h0/app.log", "line_no": 20}],
    )
    (finding,) = run_detectors(tl, only=["standby-lock-stale-checkpoint"])
    assert (finding.severity, finding.confidence, finding.tasks) == ("critical", "confirmed", ["1_0"])
    assert finding.impact.figures["stale_offset"] == 48211
    assert finding.impact.figures["records_restored"] == 61877 - 48211
    assert {e.line_no for e in finding.evidence} == {5, 9, 12, 20}
    assert any("2.0.1 is affected by KAFKA-8187" in s for s in finding.known_bugs)


# --- restore-skipped-after-reassignment ----------------------------------------------------------

def _restore_skipped_events(restore_again: bool):
    t1 = "audit-StreamThread-1"
    common = {"run_id": "h0#1", "stream_thread": t1}
    events = [
        ev(1, at(0), "Restoring partition audit-changelog-1 from offset 0 to endOffset 734112", "RESTORE_START",
           topic="audit-changelog", partition=1, offset=0, end_offset=734112, **common),
        ev(2, at(40), "State transition from PARTITIONS_ASSIGNED to RUNNING", "THREAD_STATE", to_state="RUNNING",
           **common),
        ev(3, at(4000), "No checkpoint found for task 1_1 state store store1 changelog audit-changelog-1 with EOS "
                        "turned on. Reinitializing the task and restore its state from the beginning.",
           "CHECKPOINT_MISSING", task_id="1_1", topic="audit-changelog", partition=1, **common),
        ev(5, at(4001), "State transition from PARTITIONS_ASSIGNED to RUNNING", "THREAD_STATE", to_state="RUNNING",
           **common),
    ]
    if restore_again:
        events.append(ev(4, at(4000.5), "Restoring partition audit-changelog-1 from offset 0 to endOffset 802377",
                         "RESTORE_START", topic="audit-changelog", partition=1, offset=0, end_offset=802377, **common))
    return events


def test_restore_skipped_fires_when_the_thread_goes_running_unrestored(spark):
    tl = make_timeline(spark, events=_restore_skipped_events(False),
                       process_runs=[{"host": "h0", "run_id": "h0#1", "run_no": 1, "version": "2.1.0"}])
    (finding,) = run_detectors(tl, only=["restore-skipped-after-reassignment"])
    assert (finding.severity, finding.confidence, finding.tasks) == ("critical", "confirmed", ["1_1"])
    assert {e.line_no for e in finding.evidence} == {1, 3, 5}
    assert finding.impact.figures["offsets_missing_at_least"] == 734112


def test_restore_skipped_quiet_when_another_thread_restores(spark):
    events = [dict(e, stream_thread="audit-StreamThread-2") if e["line_no"] in (3, 5) else e
              for e in _restore_skipped_events(False)]
    tl = make_timeline(spark, events=events,
                       process_runs=[{"host": "h0", "run_id": "h0#1", "run_no": 1, "version": "2.1.0"}])
    assert run_detectors(tl, only=["restore-skipped-after-reassignment"]) == []


# --- alos-crash-reprocessing ---------------------------------------------------------------------

def _alos_timeline(spark, summaries: bool, guarantee="at_least_once"):
    events = [ev(80 + i, at(120 * i), f"Processed {76000 + i} total records, ran 0 punctuators, and committed 8 "
                                      "total tasks since the last update", "PROCESSING_SUMMARY",
                 run_id="h0#1", records=76000 + i) for i in range(3)] if summaries else []
    runs = [{"host": "h0", "run_id": "h0#1", "run_no": 1, "product": "kafka-streams", "start": at(0), "end": at(240),
             "end_kind": "crash", "guarantee": guarantee, "commit_interval_ms": 30000, "version": "3.8.1"},
            {"host": "h0", "run_id": "h0#2", "run_no": 2, "product": "kafka-streams", "start": at(300), "end": at(400),
             "end_kind": "unknown", "guarantee": guarantee}]
    return make_timeline(spark, events=events, process_runs=runs)


def test_alos_crash_estimates_the_window(spark):
    (finding,) = run_detectors(_alos_timeline(spark, summaries=True), only=["alos-crash-reprocessing"])
    assert (finding.severity, finding.confidence) == ("warning", "confirmed")
    assert finding.impact.figures["reprocessing_window_ms_max"] == 30000
    assert finding.impact.figures["records_estimate"] == int(76002 / 120 * 30)
    assert [e.line_no for e in finding.evidence] == [82]


def test_alos_crash_without_counts_is_only_info(spark):
    (finding,) = run_detectors(_alos_timeline(spark, summaries=False), only=["alos-crash-reprocessing"])
    assert finding.severity == "info" and finding.missing_evidence


def test_alos_quiet_under_eos(spark):
    assert run_detectors(_alos_timeline(spark, True, "exactly_once_v2"), only=["alos-crash-reprocessing"]) == []


# --- kinesis-checkpoint-migration-loss -----------------------------------------------------------

def _nifi_timeline(spark, copy_ok=False, cloudtrail=True):
    steps = [migration_step("orders", at(0), "CHECKPOINT_TABLE_DELETED", 10), migration_step("orders", at(6), "CHECKPOINT_TABLE_CREATED", 20)]
    if copy_ok:
        steps += [migration_step("orders", at(6.1), "CLOUDTRAIL_PUT_ITEM", 30), migration_step("orders_migration", at(6.2),
                                                                              "MIGRATION_TABLE_DELETED", 40)]
    else:
        steps += [migration_step("orders", at(6.02), "MIGRATION_COPY_FAILED", 30, "ValidationException"),
                  migration_step("orders_migration", at(36), "MIGRATION_TABLE_DELETED", 40)]
    error = ev(21, at(6.05), "ConsumeKinesis[id=5f0c2a1e-0197-1000-9d3e-3b8c5e2f4a11] Failed to properly initialize "
                             "Processor. Failure is due to DynamoDbException: One or more parameter values were "
                             "invalid: Missing the key leaseKey in the item (Service: DynamoDb, Status Code: 400)",
               "PROCESSOR_START_FAILED", host="nifi-0", source="nifi-0/nifi-app.log", product="nifi",
               component_id="5f0c2a1e-0197-1000-9d3e-3b8c5e2f4a11")
    items = [{"host": "h", "source": "scan-orders.json", "table": "orders", "kind": "shard", "stream": "orders",
              "shard_id": f"shardId-00{i}"} for i in range(4)]
    return make_timeline(spark, events=[] if copy_ok else [error], state={"dynamo_items": items},
                         migration_steps=steps if cloudtrail else [])


def test_kinesis_failed_migration_confirmed(spark):
    (finding,) = run_detectors(_nifi_timeline(spark), only=["kinesis-checkpoint-migration-loss"])
    assert (finding.severity, finding.confidence, finding.tasks) == ("critical", "confirmed", ["orders"])
    assert finding.impact.figures["shards"] == 4
    assert "TRIM_HORIZON" in finding.impact.summary and "LATEST" in finding.impact.summary
    assert ("nifi-0/nifi-app.log", 21) in {(e.source, e.line_no) for e in finding.evidence}
    assert {e.kind for e in finding.evidence} == {"log", "aws"}


def test_kinesis_successful_migration_is_quiet(spark):
    assert run_detectors(_nifi_timeline(spark, copy_ok=True), only=["kinesis-checkpoint-migration-loss"]) == []


def test_kinesis_log_only_is_possible_with_missing_evidence(spark):
    (finding,) = run_detectors(_nifi_timeline(spark, cloudtrail=False), only=["kinesis-checkpoint-migration-loss"])
    assert finding.confidence == "possible"
    assert any("CloudTrail" in s or "cloudtrail" in s for s in finding.missing_evidence)


# --- framework -------------------------------------------------------------------------------------

def test_every_detector_module_registers_one_detector_and_every_detector_has_a_playbook():
    """The registry holds exactly one detector per module of toolkit/detectors, under the module's name, and
    the playbooks with a detector's front matter are exactly those of the registry."""
    support_modules = {"__init__", "base", "common", "preconditions"}
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


# --- CLI -------------------------------------------------------------------------------------------

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


def test_registered_ids_match_the_knowledge_files():
    from toolkit.knowledge import load_known_bugs
    from toolkit.knowledge.collect import known_detector_ids

    ids = set(registered_detectors())
    assert ids == set(known_detector_ids())
    assert {d for bug in load_known_bugs() for d in bug.detectors} <= ids
