"""Bundles: discovery, host attribution, safe extraction, exact parsing of a mixed bundle and the examples kept of
its unparsed lines."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import zipfile
from datetime import datetime
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from support.long_logs import MANY
from toolkit.bundle import BundleError, open_bundle
from toolkit.ingest import parse_bundle

KAFKA_CFG = (
    "[2026-03-07 14:02:10,001] INFO StreamsConfig values: \n"
    "\tapplication.id = orders-agg\n"
    "\tprocessing.guarantee = exactly_once_v2\n"
    " (org.apache.kafka.streams.StreamsConfig)\n"
)
KAFKA_LINES = (
    "[2026-03-07 14:02:11,408] INFO stream-thread [orders-agg-0-StreamThread-1] State transition from "
    "PARTITIONS_ASSIGNED to RUNNING (org.apache.kafka.streams.processor.internals.StreamThread)\n"
    "[2026-03-07 14:02:12,000] WARN stream-thread [orders-agg-0-StreamThread-1] Detected the states of tasks [0_1] "
    "are corrupted. Will close the task as dirty and re-create and bootstrap from scratch. "
    "(org.apache.kafka.streams.processor.internals.StreamThread)\n"
    "org.apache.kafka.streams.errors.TaskCorruptedException: Tasks [0_1] are corrupted and hence need to be re-initialized\n"
    "\tat org.apache.kafka.streams.processor.internals.ProcessorStateManager.initializeStoreOffsetsFromCheckpoint(ProcessorStateManager.java:254)\n"
    "\t... 4 more\n"
)
ROTATED = (
    "[2026-03-07 13:00:00,000] INFO stream-client [orders-agg-0] State transition from CREATED to REBALANCING "
    "(org.apache.kafka.streams.KafkaStreams)\n"
)
SPRING = (
    "2026-03-07T14:02:11.408Z  INFO 4242 --- [-StreamThread-1] o.a.k.s.p.internals.StreamThread         : "
    "stream-thread [orders-agg-1-StreamThread-1] State transition from PARTITIONS_ASSIGNED to RUNNING\n"
    "2026-03-07T14:02:11.500Z  INFO 4242 --- [-StreamThread-1] o.a.k.s.p.internals.TaskManager          : "
    "stream-thread [orders-agg-1-StreamThread-1] Handle new assignment with:\n"
    "\tNew active tasks: [0_1]\n"
    "\tNew standby tasks: []\n"
    "\tExisting active tasks: []\n"
    "\tExisting standby tasks: []\n"
)
NIFI = (
    "2026-04-08 09:12:31,402 ERROR [Timer-Driven Process Thread-3] o.a.n.p.aws.kinesis.ConsumeKinesis "
    "ConsumeKinesis[id=5f0c2a1e-0197-1000-9d3e-3b8c5e2f4a11] Failed to properly initialize Processor. If still "
    "scheduled to run, NiFi will attempt to initialize and run the Processor again after the 'Administrative Yield "
    "Duration' has elapsed. Failure is due to software.amazon.awssdk.services.dynamodb.model.DynamoDbException: "
    "One or more parameter values were invalid: Missing the key leaseKey in the item (Service: DynamoDb, Status "
    "Code: 400, Request ID: 7Q2J0)\n"
    "software.amazon.awssdk.services.dynamodb.model.DynamoDbException: One or more parameter values were invalid: "
    "Missing the key leaseKey in the item (Service: DynamoDb, Status Code: 400, Request ID: 7Q2J0)\n"
    "\tat software.amazon.awssdk.core.internal.http.CombinedResponseHandler.handleErrorResponse(CombinedResponseHandler.java:125)\n"
    "2026-04-08 09:12:32,000 INFO [Timer-Driven Process Thread-3] o.a.n.c.s.StandardProcessScheduler "
    "Starting ConsumeKinesis[id=5f0c2a1e-0197-1000-9d3e-3b8c5e2f4a11]\n"
)
JSONL = (
    json.dumps({"@timestamp": "2026-03-07T15:02:11.408+01:00", "@version": "1",
                "message": "stream-thread [orders-agg-3-StreamThread-1] State transition from RUNNING to PARTITIONS_REVOKED",
                "logger_name": "org.apache.kafka.streams.processor.internals.StreamThread",
                "thread_name": "orders-agg-3-StreamThread-1", "level": "INFO", "level_value": 20000}) + "\n"
    + "this line is not JSON\n"
)
AUDIT = (
    "2018-10-23 08:27:54,357 INFO  org.apache.kafka.streams.processor.internals.StoreChangelogReader - "
    "stream-thread [AuditTrailBatch-StreamThread-1]No checkpoint found for task 1_1 state store "
    "AuditTrailBatch-store1-changelog-1 with EOS turned on. Reinitializing the task and restore its state from the beginning.\n"
)
COMPOSE = (
    "orders-agg-2  | [2026-03-07 14:02:11,408] INFO stream-thread [orders-agg-2-StreamThread-1] Starting "
    "(org.apache.kafka.streams.processor.internals.StreamThread)\n"
    "orders-agg-2  | [2026-03-07 14:02:11,409] INFO stream-thread [orders-agg-2-StreamThread-1] State transition from "
    "CREATED to STARTING (org.apache.kafka.streams.processor.internals.StreamThread)\n"
)
QUICKSTART = (
    "14:02:11,408 INFO  org.apache.kafka.streams.processor.internals.StreamThread                  - "
    "stream-thread [wordcount-StreamThread-1] Starting\n"
)
KUBECTL = (
    "[pod/orders-agg-4/app] 2026-03-07T14:02:11.408512Z 14:02:11.408 [orders-agg-4-StreamThread-1] INFO "
    "org.apache.kafka.streams.processor.internals.StreamThread -- stream-thread [orders-agg-4-StreamThread-1] Starting\n"
)


def _tar_gz(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1_772_892_000
            tf.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="module")
def mixed_bundle(tmp_path_factory) -> Path:
    """Nine layouts/wrappers over seven hosts; plain, rotated .gz, tar.gz and loose files."""
    root = tmp_path_factory.mktemp("mixed")
    (root / "bundle.toml").write_text(
        'app_id = "orders-agg"\n[defaults]\ntimezone = "UTC"\n'
        '[hosts.wordcount-0]\ntimezone = "Europe/Berlin"\ndate = "2026-03-07"\n'
    )
    (root / "README.md").write_text("not evidence\n")
    (root / "orders-agg-0").mkdir()
    (root / "orders-agg-0" / "app.log").write_text(KAFKA_CFG + KAFKA_LINES)
    with gzip.open(root / "orders-agg-0" / "app.log.1.gz", "wt") as fh:
        fh.write(ROTATED)
    (root / "orders-agg-1").mkdir()
    _tar_gz(root / "orders-agg-1" / "logs.tar.gz", {"var/log/app/spring.log": SPRING.encode()})
    (root / "nifi-0").mkdir()
    (root / "nifi-0" / "nifi-app.log").write_text(NIFI)
    (root / "orders-agg-3").mkdir()
    (root / "orders-agg-3" / "app.json").write_text(JSONL)
    (root / "audit-0").mkdir()
    (root / "audit-0" / "streams.log").write_text(AUDIT)
    (root / "compose.log").write_text(COMPOSE)
    (root / "wordcount-0").mkdir()
    (root / "wordcount-0" / "app.log").write_text(QUICKSTART)
    (root / "kubectl.log").write_text(KUBECTL)
    (root / "notes.txt").write_text("collected by on-call\nsee ticket\n")
    return root


@pytest.fixture(scope="module")
def parsed(spark, mixed_bundle, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    bundle, report, records = parse_bundle(spark, mixed_bundle, out)
    rows = {(r.source, r.line_no): r for r in records.collect()}
    return bundle, report, rows, out


def test_files_hosts_and_layouts(parsed):
    bundle, report, _, _ = parsed
    layouts = {f.path: (f.host, f.layout, tuple(f.wrappers)) for f in report.files}
    assert layouts == {
        "orders-agg-0/app.log": ("orders-agg-0", "kafka-log4j", ()),
        "orders-agg-0/app.log.1.gz": ("orders-agg-0", "kafka-log4j", ()),
        "orders-agg-1/logs.tar.gz!/var/log/app/spring.log": ("orders-agg-1", "springboot3", ()),
        "nifi-0/nifi-app.log": ("nifi-0", "nifi", ()),
        "orders-agg-3/app.json": ("orders-agg-3", "jsonl", ()),
        "audit-0/streams.log": ("audit-0", "log4j-dated", ()),
        "compose.log": ("unknown-host", "kafka-log4j", ("compose",)),
        "wordcount-0/app.log": ("wordcount-0", "quickstart", ()),
        "kubectl.log": ("unknown-host", "logback-default", ("kubectl-prefix", "docker-ts")),
        "notes.txt": ("unknown-host", None, ()),
    }
    assert "README.md" not in layouts and "bundle.toml" not in layouts


def test_every_line_is_accounted_for(parsed):
    _, report, _, _ = parsed
    expected_lines = {
        "orders-agg-0/app.log": 9, "orders-agg-0/app.log.1.gz": 1,
        "orders-agg-1/logs.tar.gz!/var/log/app/spring.log": 6, "nifi-0/nifi-app.log": 4,
        "orders-agg-3/app.json": 2, "audit-0/streams.log": 1, "compose.log": 2,
        "wordcount-0/app.log": 1, "kubectl.log": 1, "notes.txt": 2,
    }
    for f in report.files:
        assert f.lines == expected_lines[f.path], f.path
        assert f.accounted, f.path
    by_path = {f.path: f for f in report.files}
    assert (by_path["orders-agg-0/app.log"].records, by_path["orders-agg-0/app.log"].continuation) == (3, 6)
    assert by_path["orders-agg-3/app.json"].unparsed == 1
    assert by_path["notes.txt"].unparsed == 2
    assert report.totals["unaccounted_files"] == 0


def _utc(*a):
    return datetime(*a)


def test_record_fields_are_exact(parsed):
    _, _, rows, _ = parsed
    cfg = rows[("orders-agg-0/app.log", 1)]
    assert cfg.logger == "org.apache.kafka.streams.StreamsConfig"
    assert cfg.message == "StreamsConfig values: \n\tapplication.id = orders-agg\n\tprocessing.guarantee = exactly_once_v2"
    assert cfg.line_count == 4

    corrupted = rows[("orders-agg-0/app.log", 6)]
    assert corrupted.level == "WARN"
    assert corrupted.ts == _utc(2026, 3, 7, 14, 2, 12)
    assert corrupted.logger == "org.apache.kafka.streams.processor.internals.StreamThread"
    assert corrupted.stack.startswith("org.apache.kafka.streams.errors.TaskCorruptedException: Tasks [0_1]")
    assert corrupted.stack.endswith("\t... 4 more")
    assert corrupted.line_count == 4

    spring = rows[("orders-agg-1/logs.tar.gz!/var/log/app/spring.log", 2)]
    assert spring.host == "orders-agg-1"
    assert spring.thread == "-StreamThread-1"
    assert spring.logger == "o.a.k.s.p.internals.TaskManager"
    assert spring.message.endswith("Handle new assignment with:\n\tNew active tasks: [0_1]\n\tNew standby tasks: []"
                                   "\n\tExisting active tasks: []\n\tExisting standby tasks: []")
    assert spring.stack is None

    nifi = rows[("nifi-0/nifi-app.log", 1)]
    assert (nifi.level, nifi.thread, nifi.logger) == ("ERROR", "Timer-Driven Process Thread-3", "o.a.n.p.aws.kinesis.ConsumeKinesis")
    assert nifi.message.startswith("ConsumeKinesis[id=5f0c2a1e-0197-1000-9d3e-3b8c5e2f4a11] Failed to properly initialize")
    assert nifi.stack.splitlines()[0].startswith("software.amazon.awssdk.services.dynamodb.model.DynamoDbException")
    assert rows[("nifi-0/nifi-app.log", 4)].message == "Starting ConsumeKinesis[id=5f0c2a1e-0197-1000-9d3e-3b8c5e2f4a11]"

    js = rows[("orders-agg-3/app.json", 1)]
    assert js.ts == _utc(2026, 3, 7, 14, 2, 11, 408000)
    assert (js.level, js.thread) == ("INFO", "orders-agg-3-StreamThread-1")
    assert rows[("orders-agg-3/app.json", 2)].layout == "unparsed"
    assert rows[("orders-agg-3/app.json", 2)].message == "this line is not JSON"

    audit = rows[("audit-0/streams.log", 1)]
    assert audit.logger == "org.apache.kafka.streams.processor.internals.StoreChangelogReader"
    assert audit.message.startswith("stream-thread [AuditTrailBatch-StreamThread-1]No checkpoint found for task 1_1")

    compose = rows[("compose.log", 2)]
    assert compose.host == "orders-agg-2"  # from the compose prefix, not the file
    assert compose.message.endswith("State transition from CREATED to STARTING")

    quick = rows[("wordcount-0/app.log", 1)]
    assert quick.ts == _utc(2026, 3, 7, 13, 2, 11, 408000)  # 14:02 in Berlin (CET) on the configured date
    assert quick.ts_quality == "date_inferred"

    kube = rows[("kubectl.log", 1)]
    assert kube.host == "orders-agg-4"
    assert kube.ts == _utc(2026, 3, 7, 14, 2, 11, 408512)  # the wrapper's exact stamp beats a time-only layout
    assert kube.ts_quality == "wrapper"
    assert kube.thread == "orders-agg-4-StreamThread-1"

    rotated = rows[("orders-agg-0/app.log.1.gz", 1)]
    assert rotated.message.startswith("stream-client [orders-agg-0] State transition from CREATED to REBALANCING")


def test_ingest_json_written(parsed):
    _, report, _, out = parsed
    data = json.loads((out / "ingest.json").read_text())
    assert data["totals"]["lines"] == 29
    assert data["totals"]["lines"] == data["totals"]["records"] + data["totals"]["continuation"] + data["totals"]["unparsed"]
    notes = next(f for f in data["files"] if f["path"] == "notes.txt")
    assert notes["unparsed_examples"][0] == {"line_no": 1, "text": "collected by on-call"}
    assert any(p["source"] == "notes.txt" and "unknown layout" in p["problem"] for p in data["problems"])


def test_unparsed_examples_are_the_first_lines_of_a_file_of_many(spark):
    from toolkit.ingest import UNPARSED_EXAMPLES, record_figures
    from toolkit.schemas import UNPARSED

    n = MANY
    # Lines in reverse order, each longer than an example keeps; a second file with one parsed record.
    records = spark.range(n).selectExpr(
        "'h0/app.log' AS source", f"{n} - id AS line_no", f"'{UNPARSED}' AS layout", "1 AS line_count",
        "CAST(NULL AS STRING) AS ts_raw", "CAST(NULL AS STRING) AS thread", "CAST(NULL AS STRING) AS logger",
        "concat('line ', CAST(" + str(n) + " - id AS STRING), ' ', repeat('x', 400)) AS message",
        "CAST(NULL AS STRING) AS stack", "CAST(NULL AS TIMESTAMP) AS ts")
    parsed = records.limit(1).withColumn("source", F.lit("h1/app.log")).withColumn("layout", F.lit("log4j"))
    figures = record_figures(records.unionByName(parsed))
    examples = figures["h0/app.log"]["examples"]
    assert [e["line_no"] for e in examples] == list(range(1, UNPARSED_EXAMPLES + 1))
    assert all(len(e["text"]) == 300 and e["text"].startswith(f"line {e['line_no']} ") for e in examples)
    assert figures["h0/app.log"]["unparsed"] == n and figures["h1/app.log"]["examples"] == []


# --------------------------------------------------------------------------- hostile archives


def _listing(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


def test_hostile_archives_are_refused_and_the_rest_parses(spark, tmp_path):
    bundle_dir = tmp_path / "bundle"
    (bundle_dir / "host-a").mkdir(parents=True)
    good = b"[2026-03-07 14:02:11,408] INFO stream-thread [a-StreamThread-1] Starting (org.apache.kafka.streams.processor.internals.StreamThread)\n"

    with tarfile.open(bundle_dir / "host-a" / "evil.tar.gz", "w:gz") as tf:
        def add(info: tarfile.TarInfo, data: bytes = b"") -> None:
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data) if data else None)

        add(tarfile.TarInfo("logs/good.log"), good)
        add(tarfile.TarInfo("../../escaped.log"), good)
        add(tarfile.TarInfo("/tmp/absolute-escape.log"), good)
        add(tarfile.TarInfo("C:/windows.log"), good)
        link = tarfile.TarInfo("logs/passwd.log")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        add(link)
        hard = tarfile.TarInfo("logs/hard.log")
        hard.type, hard.linkname = tarfile.LNKTYPE, "../../etc/passwd"
        add(hard)
        dev = tarfile.TarInfo("logs/null")
        dev.type = tarfile.CHRTYPE
        add(dev)
        add(tarfile.TarInfo("logs/good.log"), good)  # duplicate name

    with zipfile.ZipFile(bundle_dir / "host-a" / "evil.zip", "w") as zf:
        zf.writestr("..\\..\\zip-escape.log", good)
        zf.writestr("ok/zipped.log", good)
        sym = zipfile.ZipInfo("ok/link.log")
        sym.external_attr = (0o120777 << 16)
        zf.writestr(sym, "/etc/passwd")

    varied = b"".join(good.replace(b"Starting", b"Starting %d" % i) for i in range(3000))
    full = gzip.compress(varied)
    (bundle_dir / "host-a" / "truncated.log.gz").write_bytes(full[: len(full) // 2])
    (bundle_dir / "host-a" / "cut.tar.gz").write_bytes((bundle_dir / "host-a" / "evil.tar.gz").read_bytes()[:60])

    before = _listing(tmp_path)
    out = tmp_path / "out"
    bundle, report, records = parse_bundle(spark, bundle_dir, out)
    created = _listing(tmp_path) - before
    assert all(p.startswith("out") for p in created), created  # nothing written outside the work area
    assert not (tmp_path / "escaped.log").exists() and not Path("/tmp/absolute-escape.log").exists()

    problems = {(p.source, p.problem) for p in report.problems}
    assert ("host-a/evil.tar.gz!/../../escaped.log", "unsafe path in archive") in problems
    assert ("host-a/evil.tar.gz!//tmp/absolute-escape.log", "unsafe path in archive") in problems
    assert ("host-a/evil.tar.gz!/C:/windows.log", "unsafe path in archive") in problems
    assert ("host-a/evil.tar.gz!/logs/passwd.log", "link in archive not extracted") in problems
    assert ("host-a/evil.tar.gz!/logs/hard.log", "link in archive not extracted") in problems
    assert ("host-a/evil.tar.gz!/logs/null", "special file in archive not extracted") in problems
    assert ("host-a/evil.tar.gz!/logs/good.log", "duplicate name in archive") in problems
    assert ("host-a/evil.zip!/..\\..\\zip-escape.log", "unsafe path in archive") in problems
    assert ("host-a/evil.zip!/ok/link.log", "link in archive not extracted") in problems
    assert ("host-a/truncated.log.gz", "truncated or corrupt gzip") in problems
    assert any(s == "host-a/cut.tar.gz" and "archive" in p for s, p in problems)

    files = {f.path: f for f in report.files}
    assert files["host-a/evil.tar.gz!/logs/good.log"].records == 1
    assert files["host-a/evil.zip!/ok/zipped.log"].records == 1
    recovered = files["host-a/truncated.log.gz"]
    assert 0 < recovered.lines < 3000 and recovered.accounted
    assert all(f.accounted for f in report.files)


def test_missing_bundle_and_bad_toml_are_clear_errors(tmp_path):
    with pytest.raises(BundleError, match="bundle not found"):
        open_bundle(tmp_path / "nope")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "bundle.toml").write_text('[hosts.x]\ntimezone = "Mars/Olympus"\n')
    with pytest.raises(BundleError, match="unknown time zone"):
        open_bundle(tmp_path / "b", tmp_path / "w")


def test_work_dir_that_is_not_ours_is_never_wiped(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("mine")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.log").write_text("hello\n")
    with pytest.raises(BundleError, match="not made by this tool"):
        open_bundle(tmp_path / "b", precious)
    assert (precious / "keep.txt").read_text() == "mine"


def test_host_from_file_name():
    from toolkit.bundle import host_from_file_name

    assert host_from_file_name("orders-agg-1.log.2") == "orders-agg-1"
    assert host_from_file_name("kafka-streams-7f9c6d-x2k4q.log.2026-01-05.gz") == "kafka-streams-7f9c6d-x2k4q"
    assert host_from_file_name("app.log") is None
    assert host_from_file_name("nifi-app.log") is None


def test_output_folders_inside_the_bundle_are_not_read_as_evidence(spark, tmp_path, repo_root, capsys):
    """``cd BUNDLE && stream-incident parse . --out out && stream-incident detect . --out out2``: the second
    run reads the bundle's logs only, never the first run's tables and logs, nor its own output folder;
    each skipped folder is a problem row that says why."""
    import shutil

    from toolkit.bundle import OUTPUT_MARKER
    from toolkit.bundle.discovery import OWN_FOLDER_SKIPPED
    from toolkit.cli import EXIT_OK, main

    bundle = tmp_path / "bundle"
    shutil.copytree(repo_root / "sample_logs" / "kafka-eos-stale-checkpoint", bundle)
    assert main(["parse", str(bundle), "--out", str(bundle / "out"), "--quiet"]) == EXIT_OK
    assert (bundle / "out" / OUTPUT_MARKER).is_file() and (bundle / "out" / "logs").is_dir()
    # An output folder of a version before the marker: known by its ingest.json beside records.parquet.
    shutil.copytree(bundle / "out", bundle / "older-out", ignore=shutil.ignore_patterns(OUTPUT_MARKER))
    capsys.readouterr()

    assert main(["detect", str(bundle), "--out", str(bundle / "out2"), "--quiet", "--format", "json"]) == EXIT_OK
    ingest = json.loads((bundle / "out2" / "ingest.json").read_text())
    assert [(f["path"], f["host"]) for f in ingest["files"]] == [
        ("orders-agg-0/app.log", "orders-agg-0"), ("orders-agg-1/app.log", "orders-agg-1")]
    assert {e["host"] for e in ingest["evidence"]} == {"orders-agg-0"}
    skipped = {p["source"]: p["detail"] for p in ingest["problems"] if p["problem"] == OWN_FOLDER_SKIPPED}
    assert skipped == {
        "out": f"the output folder of an earlier run (marked {OUTPUT_MARKER})",
        "older-out": "the output folder of an earlier run (holds ingest.json and records.parquet)",
        "out2": "this run's output or work folder",
    }
    assert ingest["totals"]["unparsed"] == 0
    # The findings are the sample's own, as if no output folder were there.
    assert main(["detect", str(repo_root / "sample_logs" / "kafka-eos-stale-checkpoint"), "--out",
                 str(tmp_path / "plain"), "--quiet", "--format", "json"]) == EXIT_OK
    found, plain = (json.loads((out / "findings.json").read_text()) for out in (bundle / "out2", tmp_path / "plain"))
    assert found["findings"] and found["findings"] == plain["findings"]


def _laid_out(root: Path, files: dict[str, Path]) -> Path:
    import shutil

    for rel, src in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, root / rel)
    return root


def _portable(document: dict, prefix: dict[str, str]) -> list:
    """Findings with their evidence sources written as in the sample's own layout."""
    text = json.dumps(document["findings"])
    for nested, plain in prefix.items():
        text = text.replace(nested, plain)
    return json.loads(text)


def test_a_folder_of_pod_folders_is_no_host_and_the_findings_are_the_samples(spark, tmp_path, repo_root):
    """``incident/logs/<pod>/app.log`` and ``incident/state/<pod>/state.tar.gz`` without a bundle.toml: the pods are
    the hosts (not ``logs`` and ``state``), so no run is cut short by another pod's file, and the findings are
    those of the same files in the sample's own layout."""
    from toolkit import pipeline, utc
    from toolkit.options import AnalysisOptions

    sample = repo_root / "sample_logs" / "kafka-eos-stale-checkpoint"
    files = {f"{pod}/{name}": sample / pod / name
             for pod, name in (("orders-agg-0", "app.log"), ("orders-agg-0", "state.tar.gz"), ("orders-agg-1", "app.log"))}
    plain = _laid_out(tmp_path / "plain", files)
    nested = _laid_out(tmp_path / "incident", {
        ("state/" if rel.endswith(".tar.gz") else "logs/") + rel: src for rel, src in files.items()})

    runs = {}
    documents = {}
    for name, bundle in (("plain", plain), ("nested", nested)):
        inv = pipeline.run(spark, bundle, tmp_path / f"out-{name}", AnalysisOptions())
        assert sorted({f.host for f in inv.analysis.ingest.files}) == ["orders-agg-0", "orders-agg-1"]
        assert {e["host"] for e in inv.analysis.ingest.evidence} == {"orders-agg-0"}
        runs[name] = sorted((r.host, r.run_no, r.end_kind)
                            for r in utc.collect(inv.timeline.process_runs.select("host", "run_no", "end_kind")))
        documents[name] = inv.findings_document()
    assert runs["nested"] == runs["plain"]
    assert documents["plain"]["findings"], "the sample's incident is found"
    assert _portable(documents["nested"], {"logs/orders-agg-": "orders-agg-", "state/orders-agg-": "orders-agg-"}) \
        == documents["plain"]["findings"]


def test_host_folders_inside_containers_and_a_hosts_own_folders(tmp_path, repo_root):
    """Which folder names the host, without a bundle.toml: a generic container (``logs``, ``state``, ``pods``...)
    or a folder of pod-named folders is passed over; a host folder keeps its own sub-folders (``logs``, ``conf``,
    ``current``/``previous``, days, versions) and stays the host."""
    eos = repo_root / "sample_logs" / "kafka-eos-stale-checkpoint"
    nifi = repo_root / "tests" / "bundles" / "nifi-component-state-reset" / "nifi-0"
    eos_log, nifi_log = eos / "orders-agg-1" / "app.log", nifi / "nifi-app.log"
    # (where the file lies in the bundle, what it is a copy of, the host it must belong to)
    layout = [
        ("cluster-a/orders-agg-0/app.log", eos_log, "orders-agg-0"),
        ("cluster-a/orders-agg-1/app.log", eos_log, "orders-agg-1"),
        ("k8s/pods/orders-agg-2/app.log", eos_log, "orders-agg-2"),
        ("captures/orders-agg-0/state.tar.gz", eos / "orders-agg-0" / "state.tar.gz", "orders-agg-0"),
        ("nifi-0/logs/nifi-app.log", nifi_log, "nifi-0"),
        ("nifi-0/conf/nifi-state-local.tar.gz", nifi / "nifi-state-local.tar.gz", "nifi-0"),
        ("orders-agg-3/current/app.log", eos_log, "orders-agg-3"),
        ("orders-agg-3/previous/app.log", eos_log, "orders-agg-3"),
        # days and versions are a host's own folders: a pod is not split by them, nor two pods merged
        ("orders-agg-4/2026-03-06/app.log", eos_log, "orders-agg-4"),
        ("orders-agg-4/2026-03-07/app.log", eos_log, "orders-agg-4"),
        ("orders-agg-5/2026-03-07/app.log", eos_log, "orders-agg-5"),
        ("nifi-1/nifi-1.28.1/logs/nifi-app.log", nifi_log, "nifi-1"),
        ("nifi-1/nifi-2.9.0/logs/nifi-app.log", nifi_log, "nifi-1"),
        ("logs/app.log", eos_log, "unknown-host"),  # a generic folder names no host; the file name names none either
    ]
    bundle = _laid_out(tmp_path / "incident", {path: copy for path, copy, _ in layout})
    opened = open_bundle(bundle, tmp_path / "work")
    # an archive's state evidence is named by the archive and the folder inside it (``state.tar.gz!/state/local``)
    hosts = {item.source.split("!/")[0]: item.host for item in (*opened.logs, *opened.evidence)}
    assert hosts == {path: host for path, _, host in layout}


# --------------------------------------------------------------------------- bundle.toml mistakes

MISTAKEN_TOML = """app_id = "orders-agg"
[defaults]
timezon = "Europe/Berlin"
[hosts.orders-agg-0]
timezone = "UTC"
clock_ofset_ms = 1250
[hosts.orders-agg-4]
clock_offset_ms = 500
[hosts.podz]
timezone = "Europe/Berlin"
"""


def test_bundle_toml_mistakes_are_named_and_the_run_goes_on(spark, tmp_path):
    root = tmp_path / "bundle"
    for host in ("orders-agg-0", "podZ"):
        (root / host).mkdir(parents=True)
        (root / host / "app.log").write_text(KAFKA_CFG + KAFKA_LINES)
    (root / "kubectl.log").write_text(KUBECTL)  # orders-agg-4 is a host only through its line prefix
    (root / "bundle.toml").write_text(MISTAKEN_TOML)
    said: list[str] = []
    _, report, records = parse_bundle(spark, root, tmp_path / "out", progress=said.append)

    rows = [(p.problem, p.detail) for p in report.problems if p.source == "bundle.toml"]
    assert rows == [
        ("unknown key 'timezon' in [defaults], ignored",
         "did you mean 'timezone'? Keys of [defaults]: timezone, clock_offset_ms, date"),
        ("unknown key 'clock_ofset_ms' in [hosts.orders-agg-0], ignored",
         "did you mean 'clock_offset_ms'? Keys of [hosts.orders-agg-0]: timezone, clock_offset_ms, date"),
        ("[hosts.podz] matches no host of the bundle, its settings are not applied",
         "host names match exactly, case included: did you mean [hosts.podZ]? "
         "Hosts: orders-agg-0, orders-agg-4, podZ, unknown-host"),  # kubectl.log lies in no host folder
    ]
    for problem, detail in rows:  # said on the console too
        assert f"bundle.toml: {problem} ({detail})" in said
    written = json.loads((tmp_path / "out" / "ingest.json").read_text())
    assert [(p["problem"], p["detail"]) for p in written["problems"] if p["source"] == "bundle.toml"] == rows

    # The run went on, with what the file said right: podZ is not read in Berlin time, orders-agg-0 not offset.
    first = {r.source: r.ts for r in records.where("line_no = 1").collect()}
    assert first == {"orders-agg-0/app.log": _utc(2026, 3, 7, 14, 2, 10, 1000),
                     "podZ/app.log": _utc(2026, 3, 7, 14, 2, 10, 1000),
                     "kubectl.log": _utc(2026, 3, 7, 14, 2, 10, 908512)}  # orders-agg-4's clock: 0.5 s fast


def test_bundle_toml_keys_in_the_wrong_place_or_dotted_host_names_are_explained(tmp_path):
    from toolkit.bundle import read_bundle_toml

    (tmp_path / "bundle.toml").write_text(
        'timezone = "Europe/Berlin"\n[defaults]\napp_id = "orders-agg"\n'
        '[hosts.orders-agg-0.pods.svc]\ntimezone = "UTC"\n')
    meta = read_bundle_toml(tmp_path / "bundle.toml")
    assert [(p.problem, p.detail) for p in meta["problems"]] == [
        ("unknown key 'timezone' at the top of bundle.toml, ignored",
         "host settings go in [defaults] or [hosts.NAME]"),
        ("unknown key 'app_id' in [defaults], ignored", "app_id goes at the top of bundle.toml"),
        ("unknown key 'pods' in [hosts.orders-agg-0], ignored",
         'a host name with dots needs quotes: [hosts."orders-agg-0.pods.svc"]'),
    ]
    (tmp_path / "bundle.toml").write_text('[hosts]\norders-agg-0 = "Europe/Berlin"\n')
    with pytest.raises(BundleError, match=r"\[hosts.orders-agg-0\] must be a table"):
        read_bundle_toml(tmp_path / "bundle.toml")
