"""Command-line errors: one sentence on stderr, the documented exit code, no traceback, no hang.

Exit codes (README): 0 finished, 1 failed, 2 bad arguments or unusable input, 3 no Spark session.
Everything here fails before a Spark session is needed, except the unreachable master, which runs
in a subprocess (one Python process holds one SparkContext) under a timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolkit.cli import EXIT_SPARK, EXIT_USAGE, main

LINE = ("[2026-03-07 14:02:11,408] INFO stream-thread [a-StreamThread-1] Starting "
        "(org.apache.kafka.streams.processor.internals.StreamThread)\n")


@pytest.fixture
def one_line_bundle(tmp_path) -> Path:
    """A bundle of one host with one log line."""
    b = tmp_path / "bundle"
    (b / "host-a").mkdir(parents=True)
    (b / "host-a" / "app.log").write_text(LINE)
    return b


def _one_sentence(err: str, starts: str) -> None:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"stream-incident: {starts}"), lines[0]
    assert "Traceback" not in err


def _run(argv, capsys):
    code = main(argv)
    return code, capsys.readouterr().err


def test_missing_bundle(tmp_path, one_line_bundle, capsys):
    code, err = _run(["parse", str(one_line_bundle), str(tmp_path / "nope.tar.gz"), "--out", str(tmp_path / "out"),
                      "--quiet"], capsys)
    assert code == EXIT_USAGE
    _one_sentence(err, "bundle not found:")
    assert "nope.tar.gz" in err and not (tmp_path / "out").exists()


def test_unknown_time_zone(tmp_path, one_line_bundle, capsys):
    code, err = _run(["parse", str(one_line_bundle), "--out", str(tmp_path / "out"), "--timezone", "Mars/Olympus",
                      "--quiet"], capsys)
    assert code == EXIT_USAGE
    _one_sentence(err, "--timezone: unknown time zone 'Mars/Olympus'")


def test_invalid_bundle_toml(tmp_path, one_line_bundle, capsys):
    (one_line_bundle / "bundle.toml").write_text('[hosts.host-a]\nclock_offset_ms = "soon"\n')
    code, err = _run(["parse", str(one_line_bundle), "--out", str(tmp_path / "out"), "--quiet"], capsys)
    assert code == EXIT_USAGE
    _one_sentence(err, "bundle.toml [hosts.host-a]: clock_offset_ms must be an integer")


def test_out_dir_that_is_a_file(tmp_path, one_line_bundle, capsys):
    out = tmp_path / "out.txt"
    out.write_text("not a directory\n")
    code, err = _run(["parse", str(one_line_bundle), "--out", str(out), "--quiet"], capsys)
    assert code == EXIT_USAGE
    _one_sentence(err, "")
    assert f"{out} is a file" in err  # from the work-dir check today; an --out check in the CLI may say it first
    assert out.read_text() == "not a directory\n"


@pytest.mark.e2e
def test_out_dir_that_is_a_file_with_a_separate_work_dir(tmp_path, one_line_bundle):
    out = tmp_path / "out.txt"
    out.write_text("not a directory\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_MASTER")}
    # A master nobody listens on: if --out is not checked first, this fails with 3 instead of 2.
    proc = subprocess.run(
        [sys.executable, "-m", "toolkit.cli", "parse", str(one_line_bundle), "--out", str(out), "--work-dir",
         str(tmp_path / "w"), "--quiet", "--master", "spark://127.0.0.1:1"],
        capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    _one_sentence(proc.stderr, "")
    assert str(out) in proc.stderr


def test_work_dir_that_is_not_ours(tmp_path, one_line_bundle, capsys):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("mine")
    code, err = _run(["parse", str(one_line_bundle), "--out", str(tmp_path / "out"), "--work-dir", str(precious),
                      "--quiet"], capsys)
    assert code == EXIT_USAGE
    _one_sentence(err, f"work directory {precious} is not empty and was not made by this tool")
    assert [p.name for p in precious.iterdir()] == ["thesis.tex"]


def test_work_dir_that_is_a_file(tmp_path, one_line_bundle, capsys):
    work = tmp_path / "work.bin"
    work.write_bytes(b"\0")
    code, err = _run(["parse", str(one_line_bundle), "--out", str(tmp_path / "out"), "--work-dir", str(work), "--quiet"],
                     capsys)
    assert code == EXIT_USAGE
    _one_sentence(err, f"cannot use {work} as the work directory: {work} is a file")


def test_missing_out_argument_is_a_usage_error(one_line_bundle, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["parse", str(one_line_bundle)])
    assert exc.value.code == EXIT_USAGE
    assert "the following arguments are required: --out" in capsys.readouterr().err


def test_master_and_remote_together_are_refused(tmp_path, one_line_bundle, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["parse", str(one_line_bundle), "--out", str(tmp_path / "o"), "--master", "local[1]", "--remote", "sc://x"])
    assert exc.value.code == EXIT_USAGE
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.e2e
@pytest.mark.parametrize("flag,url,what", [
    ("--master", "spark://127.0.0.1:1", "master"),
    ("--remote", "sc://127.0.0.1:1", "Connect endpoint"),
])
def test_unreachable_spark_fails_fast_with_exit_3(tmp_path, one_line_bundle, flag, url, what):
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_MASTER")}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "toolkit.cli", "parse", str(one_line_bundle), "--out", str(tmp_path / "out"), "--quiet",
         flag, url],
        capture_output=True, text=True, timeout=120, env=env)
    elapsed = time.monotonic() - start
    assert proc.returncode == EXIT_SPARK, proc.stderr
    _one_sentence(proc.stderr, f"cannot reach the Spark {what} {url}: 127.0.0.1:1 (")
    assert elapsed < 30, elapsed  # without the reachability check the driver retries for over a minute


SAMPLE_TOML = (Path(__file__).resolve().parent.parent / "sample_logs" / "kafka-eos-stale-checkpoint" / "bundle.toml")
BAD_INPUTS = {
    # A typo in a zone name, a bundle.toml cut off inside a string, a zone no database knows.
    "zone typo": (SAMPLE_TOML.read_text().replace('"Europe/Berlin"', '"Europe/Berln"'), [],
                  "bundle.toml [hosts.orders-agg-0]: unknown time zone 'Europe/Berln'"),
    "broken toml": (SAMPLE_TOML.read_text()[:SAMPLE_TOML.read_text().index("SIGKILLed")], [],
                    "bundle.toml is not valid TOML: "),
    "unknown --timezone": (SAMPLE_TOML.read_text(), ["--timezone", "Mars/Base"],
                           "--timezone: unknown time zone 'Mars/Base'"),
}
COMMANDS = {
    "parse": lambda b, o: ["parse", str(b), "--out", str(o)],
    "timeline": lambda b, o: ["timeline", str(b), "--out", str(o)],
    "catalogue": lambda b, o: ["catalogue", "--bundle", str(b), "--out", str(o)],
    "catalogue without --out": lambda b, o: ["catalogue", "--bundle", str(b)],
    "detect": lambda b, o: ["detect", str(b)],
    "detect --out": lambda b, o: ["detect", str(b), "--out", str(o), "--fail-on", "warning"],
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", BAD_INPUTS)
def test_unusable_bundle_toml_or_zone_is_one_sentence_and_exit_2_for_every_command(tmp_path, one_line_bundle, capsys,
                                                                                    command, case):
    toml, flags, message = BAD_INPUTS[case]
    (one_line_bundle / "bundle.toml").write_text(toml)
    code, err = _run([*COMMANDS[command](one_line_bundle, tmp_path / "out"), *flags, "--quiet"], capsys)
    assert code == EXIT_USAGE
    _one_sentence(err, message)


def test_stand_alone_detect_says_one_sentence_too(tmp_path, one_line_bundle, capsys):
    from toolkit import detect

    (one_line_bundle / "bundle.toml").write_text(BAD_INPUTS["zone typo"][0])
    code = detect.main([str(one_line_bundle), "--quiet"])
    assert code == EXIT_USAGE
    _one_sentence(capsys.readouterr().err, BAD_INPUTS["zone typo"][2])


def test_unknown_detector_is_refused_before_spark_starts(tmp_path, one_line_bundle, capsys):
    code, err = _run(["detect", str(one_line_bundle), "--only", "no-such-detector", "--master", "spark://127.0.0.1:1",
                      "--quiet"], capsys)
    assert code == EXIT_USAGE
    _one_sentence(err, "unknown detector(s) for --only: no-such-detector; known: ")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_bundle_with_nothing_to_read_is_unusable_input(tmp_path, command, capsys):
    """No log file and no state evidence: exit 2 with one sentence before Spark starts, never "No findings"."""
    empty = tmp_path / "incident"
    empty.mkdir()
    code, err = _run([*COMMANDS[command](empty, tmp_path / "out"), "--quiet"], capsys)
    assert code == EXIT_USAGE
    _one_sentence(err, f"no log file and no state evidence found in {empty}")


def test_a_bundle_of_empty_log_files_says_what_it_holds(tmp_path, capsys):
    (tmp_path / "incident" / "orders-agg-0").mkdir(parents=True)
    (tmp_path / "incident" / "orders-agg-0" / "app.log").write_bytes(b"")
    code, err = _run(["detect", str(tmp_path / "incident"), "--fail-on", "warning", "--quiet"], capsys)
    assert code == EXIT_USAGE
    _one_sentence(err, f"no log line found in {tmp_path / 'incident'}: its 1 log file is empty and it holds no "
                       "state evidence (1 not read, e.g. orders-agg-0/app.log: empty file)")


@pytest.mark.e2e
@pytest.mark.parametrize("case", ["zone typo", "unreachable master"])
def test_report_learns_a_failure_inside_its_kernel_from_the_kernel_outcome(tmp_path, one_line_bundle, case):
    """``report`` runs the analysis in a notebook kernel: an unusable bundle.toml found there is exit 2 and an
    unreachable master exit 3, each with the kernel's one sentence (``OUT/logs/outcome.json``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_MASTER")}
    argv = [sys.executable, "-m", "toolkit.cli", "report", str(one_line_bundle), "--out", str(tmp_path / "out"), "--quiet"]
    if case == "zone typo":
        (one_line_bundle / "bundle.toml").write_text(BAD_INPUTS[case][0])
        code, message = EXIT_USAGE, BAD_INPUTS[case][2]
    else:
        argv += ["--master", "spark://127.0.0.1:1"]
        code, message = EXIT_SPARK, "cannot reach the Spark master spark://127.0.0.1:1: 127.0.0.1:1 ("
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == code, proc.stderr
    _one_sentence(proc.stderr, message)
    outcome = (tmp_path / "out" / "logs" / "outcome.json").read_text()
    assert '"status": "failed"' in outcome and f'"exit_code": {code}' in outcome
