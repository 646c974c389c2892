"""The same commands run unchanged on a Spark standalone cluster and through Spark Connect.

Both services are started from pyspark's own distribution on 127.0.0.1. The CLI runs in a
subprocess (one SparkContext per process); its tables (records, events, timeline) must equal the
embedded run's.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO
from support.server_conf import ServerConf
from support.spark_services import connect_server, loopback_env, standalone_cluster

SMALL_BUNDLE = """\
[2026-03-07 14:02:11,408] INFO stream-thread [orders-agg-0-StreamThread-1] State transition from PARTITIONS_ASSIGNED to RUNNING (org.apache.kafka.streams.processor.internals.StreamThread)
[2026-03-07 14:02:12,000] WARN stream-thread [orders-agg-0-StreamThread-1] Detected the states of tasks [0_1] are corrupted. Will close the task as dirty and re-create and bootstrap from scratch. (org.apache.kafka.streams.processor.internals.StreamThread)
org.apache.kafka.streams.errors.TaskCorruptedException: Tasks [0_1] are corrupted and hence need to be re-initialized
\tat org.apache.kafka.streams.processor.internals.ProcessorStateManager.initializeStoreOffsetsFromCheckpoint(ProcessorStateManager.java:254)
"""


@pytest.fixture(scope="module")
def small_bundle(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cluster-bundle")
    for host in ("orders-agg-0", "orders-agg-1"):
        (root / host).mkdir()
        (root / host / "app.log").write_text(SMALL_BUNDLE.replace("orders-agg-0", host))
    (root / "orders-agg-1" / "junk.txt").write_text("not a log line\n")
    return root


def _run_timeline(bundle: Path, out: Path, *spark_args: str) -> dict:
    cmd = [sys.executable, "-m", "toolkit.cli", "timeline", str(bundle), "--out", str(out), "--quiet", "--no-cache",
           *spark_args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=loopback_env(), timeout=900, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    return json.loads((out / "ingest.json").read_text())


COMPARED_TABLES = ("records", "events", "config", "process_runs", "thread_states", "checkpoints",
                   "restorations", "wipes", "task_lifecycles")


def _tables(spark, out: Path) -> dict[str, list[tuple]]:
    """Every compared table as sorted tuples (order of rows is not part of the contract)."""
    return {name: sorted((tuple(map(repr, r)) for r in spark.read.parquet(str(out / f"{name}.parquet")).collect()))
            for name in COMPARED_TABLES}


@pytest.fixture(scope="module")
def embedded(spark, small_bundle, tmp_path_factory):
    from toolkit.pipeline import analyse

    out = tmp_path_factory.mktemp("embedded")
    analyse(spark, small_bundle, out)
    return out


@pytest.mark.e2e
@pytest.mark.cluster
def test_timeline_on_standalone_cluster(spark, small_bundle, embedded, tmp_path):
    with standalone_cluster(tmp_path / "spark") as url:
        report = _run_timeline(small_bundle, tmp_path / "out", "--master", url)
    assert report["totals"]["lines"] == 9
    assert report["totals"]["unaccounted_files"] == 0
    assert _tables(spark, tmp_path / "out") == _tables(spark, embedded)


def _frame_attrs_through(url: str) -> list[str]:
    """``attrs`` of a frame the toolkit collects through a Connect server, in a process of its own (a Connect
    session must not share this test session's process)."""
    code = ("import json, sys\nfrom pyspark.sql import SparkSession\nfrom toolkit import utc\n"
            "session = SparkSession.builder.remote(sys.argv[1]).getOrCreate()\n"
            "print(json.dumps(sorted(utc.to_pandas(session.range(3)).attrs)))\n")
    proc = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, env=loopback_env(),
                          timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.e2e
@pytest.mark.connect
def test_timeline_through_spark_connect(spark, small_bundle, embedded, tmp_path):
    with connect_server(tmp_path / "spark") as url:
        report = _run_timeline(small_bundle, tmp_path / "out", "--remote", url)
        # Connect attaches the query's metrics to a collected frame; pandas and Altair deep-copy them with it
        attrs = _frame_attrs_through(url)
    assert report["totals"]["records"] == 4 and report["totals"]["unparsed"] == 1
    assert _tables(spark, tmp_path / "out") == _tables(spark, embedded)
    assert attrs == []


FORBIDDEN = {
    r"\bsparkContext\b": "SparkContext access",
    r"\bSparkContext\b": "SparkContext access",
    r"\.rdd\b": "RDD API",
    r"\budf\s*\(|@udf\b|pandas_udf": "Python UDF",
    r"mapInPandas|applyInPandas|mapInArrow": "Python code per row",
}


def test_toolkit_uses_the_dataframe_api_only():
    """What makes Connect work: no RDD, no SparkContext and no Python UDFs anywhere in toolkit/."""
    offenders = []
    for path in sorted((REPO / "toolkit").rglob("*.py")):
        for no, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            for pattern, what in FORBIDDEN.items():
                if re.search(pattern, code):
                    offenders.append(f"{path.relative_to(REPO)}:{no}: {what}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


SHUFFLE_WIDTH = "spark.sql.shuffle.partitions"


def test_shuffle_width_is_pinned_only_for_local_masters():
    """A standalone master or a Connect server keeps its own shuffle width; adaptive execution coalesces it."""
    from toolkit.spark import connect_settings, session_settings

    assert session_settings("local[2]")[SHUFFLE_WIDTH] == "4"
    for master in ("spark://127.0.0.1:7077", "spark://h1:7077,h2:7077", "yarn", "k8s://https://10.0.0.1:6443"):
        settings = session_settings(master)
        assert SHUFFLE_WIDTH not in settings, master
        assert settings["spark.sql.adaptive.enabled"] == "true"
        assert settings["spark.sql.adaptive.coalescePartitions.enabled"] == "true"
    remote = connect_settings()
    assert SHUFFLE_WIDTH not in remote
    assert remote["spark.sql.adaptive.enabled"] == "true" and remote["spark.sql.session.timeZone"] == "UTC"
    assert connect_settings({SHUFFLE_WIDTH: "64"})[SHUFFLE_WIDTH] == "64"  # only when the user asks


def test_a_local_session_starts_with_small_memory_pages(spark):
    """A broadcast hash join keeps one memory page per table; in one local JVM Spark's heap-sized page (32 MB on
    a 2 GB heap) made a timeline query's few dozen broadcasts fill the heap. A cluster keeps its own size."""
    from toolkit.spark import BUFFER_PAGE_SIZE, session_settings

    assert spark.conf.get(BUFFER_PAGE_SIZE) == "4m"
    assert session_settings("local[*]")[BUFFER_PAGE_SIZE] == "4m"
    assert BUFFER_PAGE_SIZE not in session_settings("spark://127.0.0.1:7077")


def test_connect_session_takes_adaptive_settings_only_where_allowed():
    from toolkit.spark import ICU_CASE_MAPPINGS, apply_runtime_settings, connect_settings

    open_conf = ServerConf()
    apply_runtime_settings(open_conf, connect_settings())
    assert open_conf.values["spark.sql.adaptive.coalescePartitions.enabled"] == "true"
    assert open_conf.values[ICU_CASE_MAPPINGS] == "false"  # the client asks for the JVM's case mapping too
    assert SHUFFLE_WIDTH not in open_conf.values

    locked = ServerConf({"spark.sql.adaptive.enabled", "spark.sql.adaptive.coalescePartitions.enabled",
                         "spark.sql.optimizer.mapLookupHashThreshold", ICU_CASE_MAPPINGS})
    apply_runtime_settings(locked, connect_settings())
    assert locked.values == {"spark.sql.session.timeZone": "UTC"}

    with pytest.raises(RuntimeError, match="CANNOT_MODIFY_CONFIG"):
        apply_runtime_settings(ServerConf({"spark.sql.session.timeZone"}), connect_settings())


def test_the_toolkits_constant_maps_are_looked_up_through_a_hash_index(spark):
    """The classifier's dispatch map and the version facts are above the session's hash-lookup size.

    Below it Spark compares a key with every entry of the map for every row; the default (1000 entries)
    is above both maps, so without the toolkit's setting each lookup scans hundreds of keys."""
    from toolkit.catalogue import load_templates
    from toolkit.catalogue.dispatch import dispatch_plan
    from toolkit.events.versions import template_version_rows
    from toolkit.spark import MAP_LOOKUP_HASH_THRESHOLD

    threshold = int(spark.conf.get(MAP_LOOKUP_HASH_THRESHOLD))
    dispatch_words = set(dispatch_plan(load_templates()).by_key)
    assert len(dispatch_words) >= threshold and len(template_version_rows()) >= threshold
