"""How the embedded driver JVM is started: input size estimate, small-input settings, the class archive."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit import jvm


def test_input_bytes_walks_folders_and_weighs_compressed_files(tmp_path: Path) -> None:
    (tmp_path / "host-0").mkdir()
    (tmp_path / "host-0" / "app.log").write_bytes(b"x" * 1000)
    with gzip.open(tmp_path / "host-0" / "app.log.1.gz", "wb") as out:
        out.write(b"y" * 5000)
    packed = (tmp_path / "host-0" / "app.log.1.gz").stat().st_size
    loose = tmp_path / "loose.log"
    loose.write_bytes(b"z" * 7)
    assert jvm.input_bytes([tmp_path / "host-0", loose]) == 1000 + packed * jvm.COMPRESSED_FACTOR + 7
    assert jvm.input_bytes([tmp_path / "absent"]) == 0


def test_small_inputs_get_the_quick_jit_and_large_or_unknown_ones_do_not(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(jvm.ARCHIVE_ENV, "0")
    small = jvm.driver_java_options(1024)
    assert "-XX:TieredStopAtLevel=1" in small
    for size in (jvm.SMALL_INPUT_BYTES + 1, None):
        options = jvm.driver_java_options(size)
        assert "-XX:TieredStopAtLevel=1" not in options
        # JVM warnings never go to stdout, where `detect --format json` prints its document
        assert options[:2] == ["-Xlog:disable", "-Xlog:all=warning:stderr"]


def test_plan_for_input_switches_generated_code_off_for_small_inputs_and_back(spark) -> None:
    conf = spark.conf
    jvm.plan_for_input(spark, 10 * jvm.SMALL_INPUT_BYTES)  # whatever an earlier analysis in this session chose
    assert conf.get("spark.sql.codegen.wholeStage") == "true"
    try:
        jvm.plan_for_input(spark, 10_000)
        assert conf.get("spark.sql.codegen.wholeStage") == "false"
        assert conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
        assert spark.range(5).selectExpr("sum(id * 2) AS s").first()["s"] == 20
        jvm.plan_for_input(spark, 10 * jvm.SMALL_INPUT_BYTES)
        assert conf.get("spark.sql.codegen.wholeStage") == "true"
        assert conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
        # a setting the user made is not undone by a large input
        conf.set("spark.sql.codegen.wholeStage", "false")
        jvm.plan_for_input(spark, 10 * jvm.SMALL_INPUT_BYTES)
        assert conf.get("spark.sql.codegen.wholeStage") == "false"
    finally:
        for key in jvm.SMALL_INPUT_SQL_CONF:
            conf.unset(key)


def test_class_archive_is_written_once_then_used(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv(jvm.ARCHIVE_ENV, raising=False)
    monkeypatch.setattr(jvm, "_pending", {})
    if jvm.archive_key() is None:
        pytest.skip("no java or no Spark jars to name an archive by")
    (write,) = jvm.class_archive_options(tmp_path)
    assert write.startswith("-XX:ArchiveClassesAtExit=")
    partial = Path(write.split("=", 1)[1])
    assert partial.parent == tmp_path and partial.name.endswith(f".{os.getpid()}.partial")
    final = jvm._pending["final"]
    partial.write_bytes(b"archive")
    # a JVM that did not exit cleanly may have left half an archive: it is deleted, never used
    assert not jvm.keep_class_archive(partial, final, 1) and not partial.exists() and not final.exists()
    partial.write_bytes(b"archive")
    assert jvm.keep_class_archive(partial, final, 0) and final.read_bytes() == b"archive"
    assert jvm.class_archive_options(tmp_path) == [f"-XX:SharedArchiveFile={final}"]
    monkeypatch.setenv(jvm.ARCHIVE_ENV, "off")
    assert jvm.class_archive_options(tmp_path) == []


def test_archives_left_by_processes_that_died_are_removed(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv(jvm.ARCHIVE_ENV, raising=False)
    monkeypatch.setattr(jvm, "_pending", {})
    if jvm.archive_key() is None:
        pytest.skip("no java or no Spark jars to name an archive by")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    abandoned = tmp_path / f"classes-{jvm.archive_key()}.{dead.pid}.partial"
    abandoned.write_bytes(b"half")
    alive = tmp_path / f"classes-{jvm.archive_key()}.{os.getppid()}.partial"
    alive.write_bytes(b"being written")
    jvm.class_archive_options(tmp_path)
    assert not abandoned.exists() and alive.exists()


def test_a_command_writes_the_class_archive_at_exit_and_the_next_one_runs_with_it(repo_root, tmp_path: Path) -> None:
    """Two `detect` runs in fresh processes: the first leaves a complete archive (no partial file), the
    second starts with it; both print the same findings as clean JSON."""
    if jvm.archive_key() is None:
        pytest.skip("no java or no Spark jars to name an archive by")
    env = {**os.environ, "STREAM_INCIDENT_CACHE": str(tmp_path / "cache"), jvm.ARCHIVE_ENV: "1"}
    env.pop("SPARK_REMOTE", None)
    bundle = repo_root / "sample_logs" / "kafka-restore-skipped"
    documents = []
    for run in range(2):
        done = subprocess.run([sys.executable, "-m", "toolkit.cli", "detect", str(bundle), "--format", "json",
                               "--quiet", "--no-cache", "--master", "local[2]"],
                              env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        documents.append(json.loads(done.stdout))
        kept = list((tmp_path / "cache" / "jvm").iterdir())
        assert [p.suffix for p in kept] == [".jsa"], kept
    assert documents[0]["findings"] == documents[1]["findings"]
    assert any(f["detector"] == "restore-skipped-after-reassignment" for f in documents[0]["findings"])


def test_in_a_jupyter_kernel_the_archive_is_finished_before_the_kernel_ends_its_children(monkeypatch,
                                                                                      tmp_path: Path) -> None:
    """ipykernel terminates child processes (the JVM) on a shutdown request, before exit handlers run:
    the archive must be finished from the kernel's shutdown step."""
    import IPython

    calls = []

    class Kernel:
        def do_shutdown(self, restart):
            calls.append(("shutdown", restart, final.exists()))
            return {"status": "ok", "restart": restart}

    class Shell:
        kernel = Kernel()

    partial, final = tmp_path / "classes-k.1.partial", tmp_path / "classes-k.jsa"
    partial.write_bytes(b"archive")
    monkeypatch.setattr(jvm, "_pending", {"partial": partial, "final": final})
    monkeypatch.setattr(jvm, "_end_jvm", lambda timeout_s: 0)  # the JVM ended cleanly
    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell())
    monkeypatch.setattr(jvm.atexit, "register", lambda fn: calls.append(("atexit", fn.__name__)))
    jvm.after_start()
    assert calls == [("atexit", "finish_class_archive")]
    assert Shell.kernel.do_shutdown(False) == {"status": "ok", "restart": False}
    assert calls[-1] == ("shutdown", False, True) and final.read_bytes() == b"archive" and not partial.exists()
    assert jvm.finish_class_archive() is False  # the exit handler then has nothing left to do


def test_a_line_longer_than_a_megabyte_turns_generated_code_back_on(spark) -> None:
    conf = spark.conf
    try:
        jvm.plan_for_input(spark, 10_000)
        jvm.plan_for_lines(spark, jvm.LONG_LINE_CHARS)
        assert conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
        jvm.plan_for_lines(spark, jvm.LONG_LINE_CHARS + 1)
        assert conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
        assert conf.get("spark.sql.codegen.wholeStage") == "true"
    finally:
        for key in jvm.SMALL_INPUT_SQL_CONF:
            conf.unset(key)
