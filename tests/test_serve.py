"""``stream-incident serve``: a local Spark Connect server that later commands use while it runs.

The server and the commands run as separate processes, exactly as a user runs them; the server's
state file lives in a temporary cache folder, so a server the developer keeps running is not touched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support import EOS_SAMPLE as SAMPLE, REPO

CLI = [sys.executable, "-m", "toolkit.cli"]


def _run(args: list[str], env: dict, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout)


@pytest.fixture
def serve_env(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAM_INCIDENT_CACHE", str(tmp_path / "cache"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_REMOTE", "SPARK_MASTER", "SPARK_CONNECT_MODE_ENABLED")}
    env.update(SPARK_LOCAL_IP="127.0.0.1")
    yield env
    from toolkit import serve

    serve.stop()  # never leave a JVM behind, even when a check failed (in-process: no interpreter start)


@pytest.mark.e2e
@pytest.mark.connect
def test_detect_runs_through_the_started_server_until_it_is_stopped(serve_env, tmp_path, monkeypatch, eos_report):
    assert _run(["serve", "status"], serve_env).returncode == 3

    started = _run(["serve", "start", "--master", "local[2]", "--driver-memory", "1g"], serve_env)
    assert started.returncode == 0, started.stderr
    state = json.loads((tmp_path / "cache" / "serve" / "server.json").read_text())
    assert f"sc://127.0.0.1:{state['port']}" in started.stdout
    status = _run(["serve", "status"], serve_env)
    assert status.returncode == 0 and f"pid {state['pid']}" in status.stdout
    again = _run(["serve", "start"], serve_env)
    assert again.returncode == 0 and "already running" in again.stdout

    detect = _run(["detect", str(SAMPLE), "--format", "json", "--no-cache"], serve_env)
    assert detect.returncode == 0, detect.stderr[-3000:]
    assert f"using the running Spark Connect server at sc://127.0.0.1:{state['port']}" in detect.stderr
    assert "eos-stale-restore-checkpoint" in json.loads(detect.stdout)["summary"]["detectors"]
    # Through Spark Connect the findings are those of the embedded session, byte for byte.
    assert detect.stdout == eos_report.findings.read_text(encoding="utf-8")
    # A setting Spark reads only as a session starts (how many generated classes it keeps) is the server's own.
    code = ("import sys\nfrom pyspark.sql import SparkSession\n"
            "print(SparkSession.builder.remote(sys.argv[1]).getOrCreate().conf.get(sys.argv[2]))\n")
    from toolkit.spark import CODEGEN_CACHE_ENTRIES

    kept = subprocess.run([sys.executable, "-c", code, f"sc://127.0.0.1:{state['port']}", CODEGEN_CACHE_ENTRIES],
                          capture_output=True, text=True, env=serve_env, cwd=REPO, timeout=300)
    assert kept.returncode == 0 and kept.stdout.split()[-1] == "2000", kept.stderr[-3000:]

    # An explicit --master (or $SPARK_MASTER) wins over the running server.
    from toolkit.cli import build_parser, use_running_server

    monkeypatch.delenv("SPARK_MASTER", raising=False)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    for argv, remote in ((["detect", str(SAMPLE), "--quiet"], f"sc://127.0.0.1:{state['port']}"),
                         (["report", str(SAMPLE), "--out", str(tmp_path), "--quiet"], f"sc://127.0.0.1:{state['port']}"),
                         (["detect", str(SAMPLE), "--master", "local[1]"], None)):
        args = build_parser().parse_args(argv)
        use_running_server(args)
        assert args.remote == remote, argv
    monkeypatch.setenv("SPARK_MASTER", "local[1]")
    args = build_parser().parse_args(["timeline", str(SAMPLE), "--out", str(tmp_path)])
    use_running_server(args)
    assert args.remote is None

    stopped = _run(["serve", "stop"], serve_env)
    assert stopped.returncode == 0 and f"pid {state['pid']}" in stopped.stdout
    from toolkit import serve

    assert not serve._is_our_server(state["pid"])  # gone, or a zombie its new parent has yet to reap
    assert _run(["serve", "status"], serve_env).returncode == 3
    assert not (tmp_path / "cache" / "serve" / "server.json").exists()


def test_a_state_file_of_a_dead_server_is_not_used(tmp_path, monkeypatch):
    from toolkit import serve

    monkeypatch.setenv("STREAM_INCIDENT_CACHE", str(tmp_path / "cache"))
    serve.state_dir().mkdir(parents=True)
    proc = subprocess.Popen(["sleep", "0"])
    proc.wait()
    serve.state_file().write_text(json.dumps({"pid": proc.pid, "port": 1, "master": "local[2]",
                                              "driver_memory": "1g", "started": 0.0, "log": "x"}))
    assert serve.running_url() is None
    assert not serve.state_file().exists()


def test_local_settings_size_the_heap_and_leave_clusters_their_shuffle_defaults():
    from toolkit.spark import local_cores, session_settings

    assert [local_cores(m) for m in ("local", "local[3]", "local[4,2]", "spark://h:7077", "yarn")] == [1, 3, 4, None, None]
    assert local_cores("local[*]") == os.cpu_count()
    local = session_settings("local[3]")
    assert local["spark.sql.shuffle.partitions"] == "6" and local["spark.driver.memory"].endswith("g")
    assert local["spark.driver.bindAddress"] == "127.0.0.1"
    cluster = session_settings("spark://h:7077", {"spark.executor.memory": "2g"})
    assert "spark.sql.shuffle.partitions" not in cluster and "spark.driver.memory" not in cluster
    assert cluster["spark.executor.memory"] == "2g"
