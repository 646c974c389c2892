"""Command line: exit codes, messages and outputs."""

from __future__ import annotations

import json

from toolkit.cli import EXIT_OK, EXIT_USAGE, main


def test_missing_bundle_is_one_sentence_and_exit_2(tmp_path, capsys):
    code = main(["parse", str(tmp_path / "nope"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert err.strip().splitlines()[-1].startswith("stream-incident: bundle not found")
    assert "Traceback" not in err


def test_unknown_command_exits_2(capsys):
    try:
        main(["frobnicate"])
    except SystemExit as exc:
        assert exc.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_parse_writes_tables_and_summary(spark, tmp_path, capsys):
    bundle = tmp_path / "bundle"
    (bundle / "host-a").mkdir(parents=True)
    (bundle / "host-a" / "app.log").write_text(
        "[2026-03-07 14:02:11,408] INFO stream-thread [a-StreamThread-1] Starting "
        "(org.apache.kafka.streams.processor.internals.StreamThread)\n"
        "garbage that is no log line\n"
    )
    (bundle / "host-a" / "mystery.txt").write_text("???\n")
    out = tmp_path / "out"
    assert main(["parse", str(bundle), "--out", str(out), "--quiet"]) == EXIT_OK
    text = capsys.readouterr().out
    assert "host-a/app.log" in text and "kafka-log4j" in text
    assert "unparsed host-a/mystery.txt:1: ???" in text  # unknown lines are shown, not hidden
    data = json.loads((out / "ingest.json").read_text())
    assert data["totals"] == {"lines": 3, "records": 1, "continuation": 1, "unparsed": 1, "files": 2,
                              "problems": 1, "unaccounted_files": 0}
    assert spark.read.parquet(str(out / "records.parquet")).count() == 2


def test_catalogue_lists_templates_without_spark(capsys):
    assert main(["catalogue"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "ks.checkpoint.read" in out or "CHECKPOINT_READ" in out
    assert len(out.splitlines()) > 400  # one line per template


def test_detect_says_when_no_log_line_could_be_read_and_fail_on_does_not_pass_it(spark, tmp_path, capsys, repo_root):
    """Every line unparsed (a JSON document collected as a pod's log): the text, findings.json and the report's
    verdict say that nothing could be checked, and a --fail-on gate does not pass the bundle as clean."""
    from toolkit import report
    from toolkit.detect import EXIT_UNREADABLE

    document = repo_root / "sample_logs" / "kafka-eos-stale-checkpoint" / "EXPECTED.json"
    lines = len(document.read_text().splitlines())
    bundle = tmp_path / "incident"
    (bundle / "orders-agg-0").mkdir(parents=True)
    (bundle / "orders-agg-0" / "app.log").write_bytes(document.read_bytes())

    assert main(["detect", str(bundle), "--out", str(tmp_path / "out"), "--quiet"]) == EXIT_OK
    text = capsys.readouterr().out
    assert text.startswith(f"WARNING: {lines} of {lines} log lines could not be read (unknown layout), so no log "
                           "event could be checked.")
    assert "this is no all-clear" in text
    ingest = json.loads((tmp_path / "out" / "findings.json").read_text())["ingest"]
    assert ingest == {"status": "unreadable", "files": 1, "lines": lines, "unparsed": lines, "state_items": 0,
                      "message": f"{lines} of {lines} log lines could not be read (unknown layout), so no log event "
                                 "could be checked"}

    assert main(["detect", str(bundle), "--fail-on", "warning", "--format", "json", "--quiet"]) == EXIT_UNREADABLE
    assert json.loads(capsys.readouterr().out)["ingest"] == ingest

    verdict = report.verdict_html([], bundle.name, ingest)
    assert "Verdict: nothing could be checked" in verdict and "no known incident pattern" not in verdict
    assert f"{lines} of {lines} log lines could not be read" in verdict
