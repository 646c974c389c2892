"""The scenario generator: shipped bundles are reproducible, well-formed and match their ground truth."""

from __future__ import annotations

import json
from collections import Counter
import re
import tarfile
import tomllib
from pathlib import Path

import pytest

from support import SAMPLES
from toolkit.detectors import registered_detectors
from toolkit.samples import SHIPPED, render, write_samples, write_scale
from toolkit.samples.layouts import FIRST_LINE_PATTERNS, abbreviate_logger
from toolkit.samples.render import noise_share

DETECTORS = {"eos-stale-restore-checkpoint", "standby-lock-stale-checkpoint", "restore-skipped-after-reassignment",
             "alos-crash-reprocessing", "kinesis-checkpoint-migration-loss"}
HEALTHY = {"kafka-eos-clean-rolling-restart", "nifi-kinesis-migration-ok"}
# A continuation line of a multi-line message or stack trace never starts with a timestamp.
CONTINUATION = re.compile(r"^(\t.*|Caused by: .*| \([\w.$]+\)|[\w.$]+(Exception|Error)(: .*)?|)$")
TIMESTAMP_START = re.compile(r"^\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d")


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("samples")
    write_samples(out)
    return out


def _files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def _bundle_layout(bundle: Path) -> str:
    return json.loads((bundle / "EXPECTED.json").read_text())["layout"]


def _log_files(bundle: Path) -> list[Path]:
    return sorted(p for p in bundle.glob("*/*.log"))


def test_write_samples_regenerates_shipped_bundles_byte_for_byte(regenerated):
    shipped, fresh = _files(SAMPLES), _files(regenerated)
    assert sorted(shipped) == sorted(fresh)
    for rel, path in shipped.items():
        assert path.read_bytes() == fresh[rel].read_bytes(), rel


def test_shipped_bundles_are_small_and_complete():
    assert sorted(p.name for p in SAMPLES.iterdir() if p.is_dir()) == sorted(SHIPPED)
    for name in SHIPPED:
        bundle = SAMPLES / name
        assert {"bundle.toml", "README.md", "EXPECTED.json"} <= {p.name for p in bundle.iterdir()}
        assert sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file()) < 1_000_000, name


def test_expected_json_names_real_detectors_hosts_and_utc_times():
    # (that EXPECTED.json is what the generator writes is the byte-for-byte test above; what the detectors find
    # on each bundle is compared with it in test_detector_framework.py and tests/detectors/)
    registered = set(registered_detectors())
    for name in SHIPPED:
        expected = json.loads((SAMPLES / name / "EXPECTED.json").read_text())
        assert set(expected["detectors"]) <= DETECTORS <= registered
        assert (expected["detectors"] == []) == (name in HEALTHY)
        assert sorted(expected["hosts"]) == sorted(p.name for p in (SAMPLES / name).iterdir() if p.is_dir())
        for value in _iter_times(expected):
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", value), (name, value)


def _iter_times(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, str) and re.match(r"\d{4}-\d\d-\d\dT", v):
                yield v
            else:
                yield from _iter_times(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _iter_times(v)


def test_readme_first_paragraph_does_not_name_the_detector():
    for name in SHIPPED:
        text = (SAMPLES / name / "README.md").read_text()
        first = text.split("\n\n")[1] if text.startswith("#") else text.split("\n\n")[0]
        assert len(first) > 100, name
        assert not any(d in first for d in DETECTORS), name
        assert not re.search(r"KAFKA-\d+|NIFI-\d+", first), name


def test_bundle_toml_describes_hosts():
    zones, offsets = set(), set()
    for name in SHIPPED:
        cfg = tomllib.loads((SAMPLES / name / "bundle.toml").read_text())
        assert cfg["product"] in ("kafka-streams", "nifi")
        assert cfg["defaults"]["timezone"] == "UTC"
        for host, spec in cfg["hosts"].items():
            assert (SAMPLES / name / host).is_dir()
            zones.add(spec["timezone"])
            offsets.add(spec["clock_offset_ms"])
    assert zones - {"UTC"} and offsets - {0}


def test_versions_and_layouts_are_varied():
    expected = [json.loads((SAMPLES / n / "EXPECTED.json").read_text()) for n in SHIPPED]
    kafka_versions = {e["version"] for e in expected if e["product"] == "kafka-streams"}
    assert len(kafka_versions) >= 3
    assert len({e["layout"] for e in expected}) >= 3


def test_every_line_is_in_a_known_layout():
    for name in SHIPPED:
        bundle = SAMPLES / name
        layout = _bundle_layout(bundle)
        first = re.compile(FIRST_LINE_PATTERNS[layout])
        for log in _log_files(bundle):
            raw = log.read_bytes()
            assert b"\r" not in raw
            for n, line in enumerate(raw.decode("utf-8").split("\n")[:-1], 1):
                if layout == "jsonl":
                    obj = json.loads(line)
                    assert {"@timestamp", "@version", "message", "logger_name", "thread_name", "level",
                            "level_value"} <= set(obj), (log, n)
                    assert first.match(line)
                elif not first.match(line):
                    assert n > 1 and not TIMESTAMP_START.match(line) and CONTINUATION.match(line), (log, n, line)


def test_layout_details():
    assert abbreviate_logger("org.apache.kafka.streams.processor.internals.StreamThread", 39) == \
        "o.a.k.s.p.internals.StreamThread"
    assert abbreviate_logger("org.apache.nifi.processors.aws.kinesis.ConsumeKinesis", 40) == \
        "o.a.n.p.aws.kinesis.ConsumeKinesis"
    assert abbreviate_logger("org.apache.nifi.controller.FlowController", 40) == "o.apache.nifi.controller.FlowController"
    log = (SAMPLES / "kafka-standby-lock-cleaner" / "ledger-0" / "app.log").read_text()
    assert re.search(r"^2026-02-10T11:00:\d\d\.\d{3}\+01:00  INFO 4242 --- \[-StreamThread-1\] "
                     r"o\.a\.k\.s\.p\.internals\.StreamThread {9}: stream-thread \[", log, re.M)


def test_version_quirks_are_respected():
    eos = (SAMPLES / "kafka-eos-stale-checkpoint" / "orders-agg-0" / "app.log").read_text()
    assert "state-updater [orders-agg-" in eos and "] End offset for changelog" in eos
    assert "stream-task [0_0] State store order-totals initialized from checkpoint with offset 1203321" in eos
    assert "did not find checkpoint offsets while stores are not empty" not in eos
    assert "Adding newly assigned partitions: [orders-0, orders-2]" in eos
    assert "INFO StreamsConfig values: \n\t" in eos and " (org.apache.kafka.common.config.AbstractConfig)\n" in eos
    assert "protocol='stream'}" in eos
    standby = (SAMPLES / "kafka-standby-lock-cleaner" / "ledger-0" / "app.log").read_text()
    assert ": standby-task [1_0] Writing checkpoint: {ledger-balances-changelog-0=48211}" in standby
    assert "Failed to lock the state directory for task 1_0; will retry" in standby
    assert re.search(r"CleanupThread\] Deleting obsolete state directory 1_0 for task 1_0 as \d+ms has elapsed "
                     r"\(cleanup delay is 600000ms\)\.", standby)
    assert "task [" not in standby.split("Deleting obsolete")[0].replace("standby-task [", "")
    skipped = (SAMPLES / "kafka-restore-skipped" / "audit-0" / "app.log").read_text()
    assert "Successfully joined group with generation 323 (" in skipped
    assert "Setting newly assigned partitions [" in skipped
    assert "Kafka version : 2.1.0" in skipped
    alos = [json.loads(x) for x in (SAMPLES / "kafka-alos-crash-reprocessing" / "reservations-1" / "app.log")
            .read_text().splitlines()]
    assert any(re.match(r"stream-thread \[.*\] Processed \d+ total records, ran 0 punctuators, and committed \d+ total "
                        r"tasks since the last update$", x["message"]) for x in alos)
    assert not any("did not find checkpoint offsets" in x["message"] for x in alos)
    nifi = (SAMPLES / "nifi-kinesis-migration-loss" / "nifi-0" / "nifi-app.log").read_text()
    assert nifi.count(" ERROR [Timer-Driven Process Thread-") == 2
    assert "Missing the key leaseKey in the item (Service: DynamoDb, Status Code: 400, Request ID: " in nifi
    assert "Copying checkpoint items" not in nifi  # INFO is hidden by NiFi's default logback.xml
    ok = (SAMPLES / "nifi-kinesis-migration-ok" / "nifi-0" / "nifi-app.log").read_text()
    assert "Copied 4 checkpoint item(s) from [orders-consumer_migration] to [orders-consumer]" in ok


CLIENT_NAME = re.compile(r"\b(?:stream-client|stream-thread) \[(?P<app>[\w.-]+?)-(?P<pid>[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})")


def test_a_restarted_client_never_prints_the_previous_or_next_clients_id():
    """Each Kafka process prints its own client id: once a restarted client's id appears in a host's log,
    no line names the one before it (periodic lines are written after the story, for every run)."""
    checked = 0
    for name in SHIPPED:
        for log in _log_files(SAMPLES / name):
            seen: list[str] = []
            for number, line in enumerate(log.read_text().splitlines(), 1):
                for match in CLIENT_NAME.finditer(line):
                    pid = match["pid"]
                    if pid not in seen:
                        seen.append(pid)
                    assert pid == seen[-1], f"{log.relative_to(SAMPLES)}:{number} names {pid} after {seen[-1]}"
                    checked += 1
    assert checked > 1000  # the pattern does find client names in the Kafka samples


def test_state_capture_checkpoint_mtime_is_restoration_completion():
    bundle = SAMPLES / "kafka-eos-stale-checkpoint"
    expected = json.loads((bundle / "EXPECTED.json").read_text())
    with tarfile.open(bundle / "orders-agg-0" / "state.tar.gz") as tar:
        names = tar.getnames()
        assert names == sorted(names)
        for row in expected["stale_checkpoints"]:
            member = tar.getmember(f"kafka-streams/orders-agg/{row['task']}/.checkpoint")
            content = tar.extractfile(member).read().decode()
            assert content == f"0\n1\n{row['changelog']} {row['partition']} {row['checkpoint_offset']}\n"
            from datetime import datetime, timezone
            mtime = datetime.fromtimestamp(member.mtime, timezone.utc).isoformat(timespec="milliseconds")
            assert mtime.replace("+00:00", "Z") == row["checkpoint_write_time"]
            assert member.uname == "appuser" and member.uid == 1000
    with tarfile.open(SAMPLES / "kafka-standby-lock-cleaner" / "ledger-0" / "state.tar.gz") as tar:
        names = tar.getnames()
        assert "kafka-streams/ledger/1_0/.checkpoint" in names
        assert not any(n.startswith("kafka-streams/ledger/1_0/rocksdb") for n in names)
        assert tar.extractfile("kafka-streams/ledger/1_0/.checkpoint").read() == b"0\n1\nledger-balances-changelog 0 48211\n"
    assert not (SAMPLES / "kafka-eos-stale-checkpoint-info-only" / "orders-agg-0" / "state.tar.gz").exists()


def test_aws_captures_have_the_documented_shapes():
    bundle = SAMPLES / "nifi-kinesis-migration-loss"
    trail = json.loads((bundle / "cloudtrail-dynamodb-2026-04-08.json").read_text())["Records"]
    failed = [r for r in trail if r["eventName"] == "PutItem" and r.get("errorCode") == "ValidationException"]
    assert sorted(r["requestParameters"]["tableName"] for r in failed) == ["orders-consumer", "payments-consumer"]
    deletes = {r["requestParameters"]["tableName"] for r in trail if r["eventName"] == "DeleteTable"}
    assert {"orders-consumer_migration", "payments-consumer_migration", "clicks-consumer_migration"} <= deletes
    for table in ("orders-consumer", "payments-consumer", "clicks-consumer"):
        desc = json.loads((bundle / f"dynamodb-describe-{table}.json").read_text())["Table"]
        assert [k["AttributeName"] for k in desc["KeySchema"]] == ["streamName", "shardId"]
        scan = json.loads((bundle / f"dynamodb-scan-{table}.json").read_text())
        assert scan["Count"] == len(scan["Items"])
    expected = json.loads((bundle / "EXPECTED.json").read_text())
    assert expected["failed_tables"] == ["orders-consumer", "payments-consumer"]


def test_evidence_rows_point_at_record_starts(tmp_path):
    for name in ("kafka-standby-lock-cleaner", "nifi-kinesis-migration-loss", "kafka-alos-crash-reprocessing"):
        result = render(SHIPPED[name](), tmp_path)
        pattern = re.compile(FIRST_LINE_PATTERNS[result.scenario.layout])
        lines = {}
        for row in result.evidence:
            if row.source not in lines:
                lines[row.source] = (result.root / row.source).read_text().split("\n")
            assert pattern.match(lines[row.source][row.line_no - 1]), (row.source, row.line_no)
        events = {r.event for r in result.evidence}
        assert events >= ({"LOCK_FAILED", "DIR_CLEANED", "CHECKPOINT_WRITTEN"} if "standby" in name else
                          {"PROCESSOR_START_FAILED", "PROCESSOR_START_REQUESTED"} if "nifi" in name else
                          {"PROCESSING_SUMMARY", "CHECKPOINT_READ", "THREAD_STATE"})


#: Events the generator tags on lines that are routine chatter; the classifier may leave them unclassified.
CHATTER = {"CONFIG_DUMP", "APP_START", "COMMIT", "STATE_WAL_RECOVERED", "STATE_WAL_CHECKPOINT", "FLOW_SAVED"}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_evidence_lines_classify_to_their_event(name, spark, tmp_path):
    """Every story line the generator rendered classifies to the canonical event it meant."""
    from toolkit.bundle import open_bundle
    from toolkit.events import classify
    from toolkit.layouts import parse_logs

    result = render(SHIPPED[name](), tmp_path)
    bundle = open_bundle(result.root, tmp_path / "work")
    events = classify(parse_logs(spark, bundle).records)
    got = {(r.source, r.line_no): {r.event, *(r.also_events or [])}
           for r in events.select("source", "line_no", "event", "also_events").collect()}
    wrong = [(e.source, e.line_no, e.event, sorted(got.get((e.source, e.line_no), set())))
             for e in result.evidence if e.event not in CHATTER and e.event not in got.get((e.source, e.line_no), set())]
    kinds = Counter((w[2], tuple(w[3])) for w in wrong)
    assert not wrong, f"{len(wrong)} of {len(result.evidence)} evidence lines misclassified: {dict(kinds)}; e.g. {wrong[:4]}"


def test_write_scale_streams_a_large_noisy_bundle(tmp_path):
    root = write_scale(tmp_path, 1, seed=11, fetch_responses_per_sec=1.0)
    hosts = sorted(p.name for p in root.iterdir() if p.is_dir())
    assert len(hosts) == 8
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert 2_000_000 < size < 30_000_000
    first_lines = {(root / h / "app.log").open().readline()[:2] for h in hosts}
    assert first_lines == {"[2", "20", '{"'}, "the benchmark bundle mixes kafka, logback and JSON layouts"
    fetches = sum((root / h / "app.log").read_text().count("sent an incremental fetch response") for h in hosts)
    assert fetches > 8 * 60, "each pod logs fetch-session DEBUG noise"
    again = write_scale(tmp_path / "again", 1, seed=11, fetch_responses_per_sec=1.0)
    assert (again / "orders-agg-3" / "app.log").read_bytes() == (root / "orders-agg-3" / "app.log").read_bytes()


def test_bigger_renders_are_mostly_noise(tmp_path):
    from toolkit.samples.bundles import scale_scenario

    result = render(scale_scenario(1, fetch_responses_per_sec=2.0), tmp_path, evidence=False)
    assert noise_share(result) >= 0.9


def test_cli_only(tmp_path, capsys):
    from toolkit.samples import main

    assert main(["samples", "--out", str(tmp_path), "--only", "kafka-restore-skipped"]) == 0
    assert (tmp_path / "kafka-restore-skipped" / "EXPECTED.json").exists()
    assert "kafka-restore-skipped" in capsys.readouterr().out


def test_the_eos_story_names_the_partitions_of_its_affected_tasks():
    """The trainee story's partitions are those of the tasks whose stores were restored from a stale checkpoint."""
    story = (SAMPLES / "kafka-eos-stale-checkpoint" / "README.md").read_text()
    expected = json.loads((SAMPLES / "kafka-eos-stale-checkpoint" / "EXPECTED.json").read_text())
    (named,) = re.findall(r"orders keyed to partitions (\d+) and (\d+)\.", story)
    assert sorted(map(int, named)) == sorted(int(task.split("_")[1]) for task in expected["tasks"]) \
        == sorted(s["partition"] for s in expected["stale_checkpoints"])
