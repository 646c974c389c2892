"""Log-platform exports (toolkit/bundle/exports.py): recognised by content, rewritten per host in time order,
duplicates read once, entry numbers kept. The corpus of real-format exports is read in test_export_corpus.py."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pyarrow.parquet as pq
import pytest

from toolkit.bundle import open_bundle
from toolkit.bundle.exports import INNER_RECORD_BASE, load_export_formats, lookup, parse_shipped, sniff_export

RUNNING = ("[2024-03-07 14:02:11,408] INFO stream-thread [orders-app-StreamThread-1] State transition from "
           "PARTITIONS_ASSIGNED to RUNNING (org.apache.kafka.streams.processor.internals.StreamThread)")
REVOKED = ("[2024-03-07 14:02:08,998] INFO stream-thread [orders-app-StreamThread-1] State transition from RUNNING "
           "to PARTITIONS_REVOKED (org.apache.kafka.streams.processor.internals.StreamThread)")
ERROR = ("[2024-03-07 14:02:10,098] ERROR stream-thread [orders-app-StreamThread-1] Encountered the following "
         "exception during processing and the thread is going to shut down:  "
         "(org.apache.kafka.streams.processor.internals.StreamThread)")
STACK = ["org.apache.kafka.streams.errors.ProcessorStateException: Error opening store orders-store at location "
         "/var/lib/kafka-streams/orders-app/0_1/rocksdb/orders-store",
         "\tat org.apache.kafka.streams.state.internals.RocksDBStore.openRocksDB(RocksDBStore.java:299)"]


def loki(pod: str, stamp: str, line: str) -> str:
    return json.dumps({"labels": {"app": "orders", "namespace": "streams", "pod": pod}, "line": line,
                       "timestamp": stamp})


def es_hit(pod: str, stamp: str, message: str) -> dict:
    return {"_index": ".ds-logs-generic-default-2024.03.07-000001", "_id": "x", "_score": None,
            "_source": {"@timestamp": stamp, "message": message, "kubernetes": {"pod": {"name": pod}},
                        "host": {"name": "node-a"}}}


def write_newest_first_loki_query(path) -> None:
    """Two pods' entries newest first, as logcli prints by default; a stack shipped one entry per line, one instant."""
    rows = [loki("orders-agg-1", "2024-03-07T14:02:11.412000000+01:00", RUNNING),
            loki("orders-agg-1", "2024-03-07T14:02:10.101000000+01:00", STACK[1]),
            loki("orders-agg-1", "2024-03-07T14:02:10.101000000+01:00", STACK[0]),
            loki("orders-agg-1", "2024-03-07T14:02:10.101000000+01:00", ERROR),
            loki("orders-agg-2", "2024-03-07T14:02:09.000000000+01:00", REVOKED)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def formats_by_id() -> dict:
    return {f.id: f for f in load_export_formats().formats}


@pytest.mark.parametrize(("head", "expected"), [
    (loki("orders-agg-1", "2024-03-07T14:02:11.412345678+01:00", RUNNING) + "\n", "loki-jsonl"),
    (json.dumps({"took": 3, "timed_out": False, "_shards": {"total": 1},
                 "hits": {"total": {"value": 1, "relation": "eq"}, "max_score": None,
                          "hits": [es_hit("orders-agg-1", "2024-03-07T13:02:11.412Z", RUNNING)]}}, indent=2),
     "elasticsearch-search"),
    (json.dumps(es_hit("orders-agg-1", "2024-03-07T13:02:11.412Z", RUNNING)) + "\n", "elasticsearch-ndjson"),
    (json.dumps({"events": [{"logStreamName": "orders-agg-1", "timestamp": 1709816531412, "message": RUNNING,
                             "ingestionTime": 1709816531900, "eventId": "3783"}], "searchedLogStreams": []},
                indent=4), "cloudwatch-events"),
    (json.dumps([{"insertId": "abc", "logName": "projects/p/logs/stdout", "receiveTimestamp": "2024-03-07T13:02:12Z",
                  "resource": {"labels": {"pod_name": "orders-agg-1"}, "type": "k8s_container"},
                  "textPayload": RUNNING, "timestamp": "2024-03-07T13:02:11.412Z"}], indent=2), "gcloud-logging"),
    (json.dumps({"preview": False, "offset": 0, "result": {"_raw": RUNNING, "_time": "2024-03-07T14:02:11.412+01:00",
                                                           "host": "orders-agg-1"}}) + "\n", "splunk-export"),
    ('"@timestamp",message,"kubernetes.pod.name"\n"Mar 7, 2024 @ 14:02:11.412","' + RUNNING + '","orders-agg-1"\n',
     "kibana-csv"),
    ("@timestamp,@message,@logStream\n2024-03-07 13:02:11.412,x,y\n", "cloudwatch-insights-csv"),
    ('"_time","host","_raw"\n"2024-03-07T14:02:11.412+0100","orders-agg-1","x"\n', "splunk-csv"),
])
def test_an_export_is_recognised_by_its_content(head, expected):
    fmt = sniff_export(head.encode())
    assert fmt is not None and fmt.id == expected


@pytest.mark.parametrize("head", [
    RUNNING + "\n",  # Kafka's own layout starts with a bracket too
    '{"log":"' + RUNNING + '\\n","stream":"stdout","time":"2024-03-07T13:02:11.408512345Z"}\n',  # docker json-file
    # an application's own JSON line (logstash-logback-encoder) is the jsonl layout's, even with a host name
    json.dumps({"@timestamp": "2024-03-07T14:02:11.408+01:00", "message": "x", "logger_name": "a.B",
                "thread_name": "t", "level": "INFO", "host.name": "orders-agg-1"}) + "\n",
    "2024-03-07 14:02:11,408 INFO  [main] a.B - one, two\n",
])
def test_logs_are_not_taken_for_exports(head):
    assert sniff_export(head.encode()) is None


def test_dotted_keys_are_found_nested_or_flat():
    assert lookup({"kubernetes": {"pod": {"name": "p1"}}}, "kubernetes.pod.name") == "p1"
    assert lookup({"kubernetes.pod.name": "p2"}, "kubernetes.pod.name") == "p2"
    assert lookup({"kubernetes": {"pod.name": "p3"}}, "kubernetes.pod.name") == "p3"
    assert lookup({"kubernetes": {"pod": {}}}, "kubernetes.pod.name") is None
    assert lookup({"host": ""}, "host") is None


@pytest.mark.parametrize(("value", "zone", "expected"), [
    ("2024-03-07T14:02:11.412345678+01:00", timezone.utc, "2024-03-07T13:02:11.412345"),
    ("2024-03-07T13:02:11.412Z", timezone.utc, "2024-03-07T13:02:11.412000"),
    (1709816531412, timezone.utc, "2024-03-07T13:02:11.412000"),
    ("1709816531412345678", timezone.utc, "2024-03-07T13:02:11.412346"),
    ("2024-03-07 13:02:11.412", timezone.utc, "2024-03-07T13:02:11.412000"),
    ("Mar 7, 2024 @ 14:02:11.412", ZoneInfo("Europe/Berlin"), "2024-03-07T13:02:11.412000"),
    ("2024-03-07T14:02:11.412+0100", timezone.utc, "2024-03-07T13:02:11.412000"),
])
def test_platform_timestamps_are_read_as_instants(value, zone, expected):
    got = parse_shipped(value, zone)
    assert got is not None and got.tzinfo is not None
    assert got.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds") == expected


@pytest.mark.parametrize("value", ["yesterday", None, True, {"a": 1}, "Foo 7, 2024 @ 14:02:11.412"])
def test_what_is_no_timestamp_gives_none(value):
    assert parse_shipped(value) is None


def lines_of(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_newest_first_export_is_rewritten_per_host_in_time_order(tmp_path):
    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    write_newest_first_loki_query(bundle_dir / "query.jsonl")
    bundle = open_bundle(bundle_dir, tmp_path / "work")
    logs = {f.source: f for f in bundle.logs}
    assert sorted(logs) == ["query.jsonl#orders-agg-1", "query.jsonl#orders-agg-2"]
    first = logs["query.jsonl#orders-agg-1"]
    assert first.host == "orders-agg-1"
    written = lines_of(first.local_path)
    assert [w["log"].rstrip("\n") for w in written] == [ERROR, *STACK, RUNNING]
    assert [w["entry"] for w in written] == [4, 3, 2, 1]
    assert written[0]["time"] == "2024-03-07T13:02:10.101000Z"
    assert first.local_path.read_text(encoding="utf-8").startswith('{"log":"')  # as docker's json-file driver writes
    table = pq.read_table(first.entries).to_pylist()
    assert table == [{"source": "query.jsonl#orders-agg-1", "line_no": n, "entry": e, "entry_start": True}
                     for n, e in zip(range(1, 5), [4, 3, 2, 1])]
    assert bundle.problems == []


def test_overlapping_exports_are_read_once_and_say_so(tmp_path):
    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    early = [es_hit("orders-agg-1", "2024-03-07T13:02:08.999Z", REVOKED),
             es_hit("orders-agg-1", "2024-03-07T13:02:10.101Z", ERROR + "\n" + "\n".join(STACK))]
    late = [early[1], es_hit("orders-agg-1", "2024-03-07T13:02:11.412Z", RUNNING)]
    for name, hits in (("a.json", early), ("b.json", late)):
        (bundle_dir / name).write_text(json.dumps({"took": 1, "hits": {"hits": hits}}), encoding="utf-8")
    bundle = open_bundle(bundle_dir, tmp_path / "work")
    logs = {f.source: f for f in bundle.logs}
    assert sorted(logs) == ["a.json#orders-agg-1", "b.json#orders-agg-1"]
    a = lines_of(logs["a.json#orders-agg-1"].local_path)
    # a multi-line entry becomes one line per printed line, all of its entry
    assert [(w["entry"], w["log"].rstrip("\n")) for w in a] == [(1, REVOKED), (2, ERROR), (2, STACK[0]), (2, STACK[1])]
    assert [w["entry"] for w in lines_of(logs["b.json#orders-agg-1"].local_path)] == [2]
    assert [(p.source, p.problem) for p in bundle.problems] == [
        ("b.json", "1 of 2 entries are also in an export read before (same platform, host, time and line): "
         "read once")]


def test_an_entry_without_a_host_label_takes_the_files_host(tmp_path):
    host_dir = tmp_path / "bundle" / "orders-agg-5"
    host_dir.mkdir(parents=True)
    event = {"timestamp": 1709816531412, "message": RUNNING, "ingestionTime": 1709816531900}
    (host_dir / "events.json").write_text(json.dumps({"events": [event], "nextForwardToken": "f/1"}), encoding="utf-8")
    bundle = open_bundle(tmp_path / "bundle", tmp_path / "work")
    assert [(f.source, f.host) for f in bundle.logs] == [("orders-agg-5/events.json#orders-agg-5", "orders-agg-5")]
    assert [p.problem for p in bundle.problems] == [
        "1 of 1 entries name no host (inner.kubernetes.pod_name, inner.kubernetes.pod.name, logStreamName): given "
        "the file's host orders-agg-5"]


def test_a_fluent_bit_record_in_a_cloudwatch_message_gives_line_and_pod(tmp_path):
    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    inner = {"log": RUNNING + "\n", "stream": "stdout", "time": "2024-03-07T13:02:11.408512345Z",
             "kubernetes": {"pod_name": "orders-agg-3", "namespace_name": "streams", "container_name": "app"}}
    event = {"logStreamName": "orders-agg-3_streams_app-" + "a" * 64, "timestamp": 1709816531412,
             "message": json.dumps(inner), "ingestionTime": 1709816531900, "eventId": "1"}
    (bundle_dir / "events.json").write_text(json.dumps({"events": [event], "searchedLogStreams": []}), encoding="utf-8")
    bundle = open_bundle(bundle_dir, tmp_path / "work")
    (log,) = bundle.logs
    assert log.host == "orders-agg-3"
    assert [w["log"] for w in lines_of(log.local_path)] == [RUNNING + "\n"]


def test_a_container_log_path_names_its_pod():
    fmt = formats_by_id()["shipper-ndjson"]
    from toolkit.bundle.exports import Tally, _entry

    source = {"@timestamp": "2024-03-07T13:02:11.412Z", "message": RUNNING,
              "log": {"file": {"path": "/var/log/containers/orders-agg-6_streams_app-" + "0f" * 32 + ".log"}},
              "agent": {"type": "filebeat"}}
    entry = _entry(fmt, 1, source, Tally())
    assert entry.host == "orders-agg-6"
    assert entry.shipped == datetime(2024, 3, 7, 13, 2, 11, 412000, tzinfo=timezone.utc)


def test_a_document_too_large_is_read_as_a_plain_log(tmp_path, monkeypatch):
    import toolkit.bundle.exports as exports

    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    (bundle_dir / "big.json").write_text(json.dumps({"hits": {"hits": [es_hit("p", "2024-03-07T13:02:11Z", RUNNING)]}}),
                                         encoding="utf-8")
    monkeypatch.setattr(exports, "MAX_DOCUMENT_BYTES", 10)
    bundle = open_bundle(bundle_dir, tmp_path / "work")
    assert [f.source for f in bundle.logs] == ["big.json"]
    assert bundle.problems[0].problem.startswith("Elasticsearch / OpenSearch _search response export too large")


def test_a_gzip_export_is_read_decompressed(tmp_path):
    import gzip

    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    with gzip.open(bundle_dir / "query.jsonl.gz", "wt", encoding="utf-8") as out:
        out.write(loki("orders-agg-1", "2024-03-07T14:02:11.412000000+01:00", RUNNING) + "\n")
    bundle = open_bundle(bundle_dir, tmp_path / "work")
    assert [(f.source, f.gzip) for f in bundle.logs] == [("query.jsonl.gz#orders-agg-1", False)]
    assert [w["log"] for w in lines_of(bundle.logs[0].local_path)] == [RUNNING + "\n"]


def test_a_structured_payload_is_written_as_one_json_line(tmp_path):
    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    payload = {"message": "stream-thread [orders-app-StreamThread-1] State transition from PARTITIONS_ASSIGNED to "
                          "RUNNING", "logger_name": "org.apache.kafka.streams.processor.internals.StreamThread",
               "thread_name": "orders-app-StreamThread-1", "level": "INFO"}
    entry = {"insertId": "a1", "jsonPayload": payload, "logName": "projects/p/logs/stdout",
             "resource": {"type": "k8s_container", "labels": {"pod_name": "orders-agg-4"}},
             "timestamp": "2024-03-07T13:02:11.408Z"}
    (bundle_dir / "read.json").write_text(json.dumps([entry], indent=2), encoding="utf-8")
    bundle = open_bundle(bundle_dir, tmp_path / "work")
    (log,) = bundle.logs
    assert log.host == "orders-agg-4"
    assert [json.loads(w["log"]) for w in lines_of(log.local_path)] == [payload]


def test_records_of_an_export_take_their_hosts_own_times_and_entry_numbers(spark, tmp_path):
    from toolkit.ingest import parse_bundle

    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    write_newest_first_loki_query(bundle_dir / "query.jsonl")
    # the second hit holds two records: a multiline rule joined the JVM's uncaught-exception line to the one before
    uncaught = ['Exception in thread "orders-app-StreamThread-1" java.lang.IllegalStateException: boom',
                "\tat org.apache.kafka.streams.processor.internals.StreamThread.run(StreamThread.java:569)"]
    hits = [es_hit("orders-agg-3", "2024-03-07T13:02:10.131Z", ERROR + "\n" + "\n".join(STACK)),
            es_hit("orders-agg-3", "2024-03-07T13:02:11.420Z", RUNNING + "\n" + "\n".join(uncaught))]
    (bundle_dir / "search.json").write_text(json.dumps({"took": 1, "hits": {"hits": hits}}), encoding="utf-8")
    # the lines print local time without a zone: read in the hosts' zone, as in a log file
    (bundle_dir / "bundle.toml").write_text('[defaults]\ntimezone = "Europe/Berlin"\n', encoding="utf-8")
    _, report, records = parse_bundle(spark, bundle_dir, tmp_path / "out")
    assert all(f.accounted for f in report.files)
    exported = {f.path: f.export for f in report.files}
    assert exported == {
        "query.jsonl#orders-agg-1": {"file": "query.jsonl", "format": "loki-jsonl", "entries": 4},
        "query.jsonl#orders-agg-2": {"file": "query.jsonl", "format": "loki-jsonl", "entries": 1},
        "search.json#orders-agg-3": {"file": "search.json", "format": "elasticsearch-search", "entries": 2}}
    got = sorted((r.source, r.line_no, r.host,
                  r.ts.astimezone(timezone.utc).isoformat(timespec="milliseconds") if r.ts else None,
                  r.level, r.message[-40:], (r.stack or "").count("\n") + 1 if r.stack else 0)
                 for r in records.collect())
    assert got == [
        ("query.jsonl#orders-agg-1", 1, "orders-agg-1", "2024-03-07T13:02:11.408+00:00", "INFO",
         "tion from PARTITIONS_ASSIGNED to RUNNING", 0),
        # the stack's entries (3, 2) are folded into the record of entry 4, which evidence names
        ("query.jsonl#orders-agg-1", 4, "orders-agg-1", "2024-03-07T13:02:10.098+00:00", "ERROR",
         "g and the thread is going to shut down: ", 2),
        ("query.jsonl#orders-agg-2", 5, "orders-agg-2", "2024-03-07T13:02:08.998+00:00", "INFO",
         "ition from RUNNING to PARTITIONS_REVOKED", 0),
        ("search.json#orders-agg-3", 1, "orders-agg-3", "2024-03-07T13:02:10.098+00:00", "ERROR",
         "g and the thread is going to shut down: ", 2),
        ("search.json#orders-agg-3", 2, "orders-agg-3", "2024-03-07T13:02:11.408+00:00", "INFO",
         "tion from PARTITIONS_ASSIGNED to RUNNING", 0),
        # its own record, numbered apart from the entry's (line 5 of the pod's rewritten copy), at the entry's time
        ("search.json#orders-agg-3", INNER_RECORD_BASE + 5, "orders-agg-3", "2024-03-07T13:02:11.420+00:00", None,
         '1" java.lang.IllegalStateException: boom', 1),
    ]


def test_kibanas_zone_less_stamps_take_the_zone_the_lines_show(tmp_path):
    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    # rendered in a browser at UTC+01:00; the pod prints UTC
    rows = [("Mar 7, 2024 @ 14:02:11.412", RUNNING.replace("14:02:11,408", "13:02:11,408")),
            ("Mar 7, 2024 @ 14:02:08.999", REVOKED.replace("14:02:08,998", "13:02:08,998")),
            ("Mar 7, 2024 @ 14:02:09.500", "\tat org.apache.kafka.streams.KafkaStreams.start(KafkaStreams.java:1)")]
    text = '"@timestamp","kubernetes.pod.name",message\n' + "".join(f'"{t}","orders-agg-1","{m}"\n' for t, m in rows)
    (bundle_dir / "discover.csv").write_text(text, encoding="utf-8")
    bundle = open_bundle(bundle_dir, tmp_path / "work")
    (log,) = bundle.logs
    assert [(w["entry"], w["time"]) for w in lines_of(log.local_path)] == [
        (3, "2024-03-07T13:02:08.999000Z"), (4, "2024-03-07T13:02:09.500000Z"), (2, "2024-03-07T13:02:11.412000Z")]


def test_zone_less_stamps_without_dated_lines_are_read_in_the_pods_zone(tmp_path):
    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    (bundle_dir / "bundle.toml").write_text('[hosts."orders-agg-1"]\ntimezone = "Asia/Kolkata"\n', encoding="utf-8")
    text = ('"@timestamp","kubernetes.pod.name",message\n'
            '"Mar 7, 2024 @ 18:32:11.412","orders-agg-1","stream-thread [orders-app-StreamThread-1] State transition '
            'from PARTITIONS_ASSIGNED to RUNNING"\n')
    (bundle_dir / "discover.csv").write_text(text, encoding="utf-8")
    (log,) = open_bundle(bundle_dir, tmp_path / "work").logs
    assert [w["time"] for w in lines_of(log.local_path)] == ["2024-03-07T13:02:11.412000Z"]


def test_the_entry_table_marks_where_each_entry_starts(tmp_path):
    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    hits = [es_hit("orders-agg-1", "2024-03-07T13:02:10.101Z", ERROR + "\n" + "\n".join(STACK)),
            es_hit("orders-agg-1", "2024-03-07T13:02:11.412Z", RUNNING)]
    (bundle_dir / "search.json").write_text(json.dumps({"hits": {"hits": hits}}), encoding="utf-8")
    (log,) = open_bundle(bundle_dir, tmp_path / "work").logs
    assert [(r["line_no"], r["entry"], r["entry_start"]) for r in pq.read_table(log.entries).to_pylist()] == [
        (1, 1, True), (2, 1, False), (3, 1, False), (4, 2, True)]


def test_an_export_sorted_in_many_runs_is_rewritten_as_in_one(tmp_path, monkeypatch):
    """Exports larger than the driver holds are sorted in runs and merged: the files are the same as when one
    run holds everything (newest-first files, an overlap, lines that are no entries, several pods)."""
    import toolkit.bundle.export_rewrite as rewrite

    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    rows = [loki(f"orders-agg-{n % 3}", f"2024-03-07T14:{n // 60:02d}:{n % 60:02d}.{n % 7:03d}000000+01:00",
                 [RUNNING, REVOKED, ERROR, *STACK][n % 5]) for n in range(400)]
    (bundle_dir / "a.jsonl").write_text("\n".join(rows[::-1][:250] + ["no entry"] + rows[::-1][250:]) + "\n",
                                        encoding="utf-8")
    (bundle_dir / "b.jsonl").write_text("\n".join(rows[::-1][100:300]) + "\n", encoding="utf-8")

    def rewritten(work: str) -> tuple:
        bundle = open_bundle(bundle_dir, tmp_path / work)
        return ([(f.source, f.local_path.read_bytes(), pq.read_table(f.entries).to_pylist()) for f in bundle.logs],
                [(p.source, p.problem) for p in bundle.problems])

    whole = rewritten("whole")
    runs = []
    write_run = rewrite._write_run
    monkeypatch.setattr(rewrite, "_write_run", lambda run, path: runs.append(path) or write_run(run, path))
    monkeypatch.setattr(rewrite, "RUN_BYTES", 2000)
    monkeypatch.setattr(rewrite, "_NUMBER_BATCH", 7)
    monkeypatch.setattr(rewrite._Spilling, "BATCH", 3)
    monkeypatch.setattr(rewrite, "_MERGE_FAN_IN", 3)  # merged in passes, as a thousand exports would be
    monkeypatch.setattr(rewrite, "_OPEN_WRITERS", 1)  # writers closed and reopened between entries
    assert rewritten("in-runs") == whole
    assert len(runs) > 20
    assert whole[1] == [("a.jsonl", "1 of 401 lines are not Grafana Loki (logcli query --output=jsonl) entries: "
                                    "read as plain lines"),
                        ("b.jsonl", "200 of 200 entries are also in an export read before (same platform, host, "
                                    "time and line): read once")]


def test_an_entry_repeated_in_a_later_export_drops_its_first_occurrences(tmp_path):
    """A later file holding an entry more often than an earlier one keeps the surplus: its last occurrences (the
    first ones are those the earlier file already gave)."""
    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    frame = loki("orders-agg-1", "2024-03-07T14:02:10.101000000+01:00", STACK[1])
    (bundle_dir / "a.jsonl").write_text(frame + "\n", encoding="utf-8")
    (bundle_dir / "b.jsonl").write_text("\n".join([frame, frame, loki("orders-agg-1", "2024-03-07T14:02:11.412000000"
                                                                      "+01:00", RUNNING)]) + "\n", encoding="utf-8")
    bundle = open_bundle(bundle_dir, tmp_path / "work")
    logs = {f.source: f for f in bundle.logs}
    assert [w["entry"] for w in lines_of(logs["b.jsonl#orders-agg-1"].local_path)] == [2, 3]
    assert [p.problem for p in bundle.problems] == [
        "1 of 3 entries are also in an export read before (same platform, host, time and line): read once"]


def test_a_rerun_links_the_exports_an_earlier_run_rewrote(tmp_path, monkeypatch):
    """With the parse cache's exports folder, the same exports are not read again: the rewritten logs, problem
    rows and entry counts come from the kept copy; a changed export is rewritten."""
    import toolkit.bundle.export_rewrite as rewrite
    from toolkit import cache_admin
    from toolkit.cache import ParseCache

    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    write_newest_first_loki_query(bundle_dir / "query.jsonl")
    (bundle_dir / "again.jsonl").write_text(loki("orders-agg-2", "2024-03-07T14:02:09.000000000+01:00", REVOKED)
                                            + "\nnot an entry\n", encoding="utf-8")
    cache = ParseCache(tmp_path / "cache")

    def opened(work: str) -> tuple:
        bundle = open_bundle(bundle_dir, tmp_path / work, export_cache=cache.root / "exports")
        return ([(f.source, f.host, f.size, f.local_path.read_bytes(), pq.read_table(f.entries).to_pylist())
                 for f in bundle.logs], [(p.source, p.problem, p.detail) for p in bundle.problems], bundle.exported)

    first = opened("first")
    assert [(e.kind, e.complete) for e in cache_admin.entries(cache)] == [("exports", True)]

    def no_read(*args, **kwargs):
        raise AssertionError("an export was read again")

    monkeypatch.setattr(rewrite, "_read", no_read)
    assert opened("second") == first
    monkeypatch.undo()

    write_newest_first_loki_query(bundle_dir / "query.jsonl")  # the same content again: still kept
    assert opened("third") == first
    (bundle_dir / "query.jsonl").write_text(loki("orders-agg-1", "2024-03-07T14:02:11.412000000+01:00", RUNNING)
                                            + "\n", encoding="utf-8")
    changed = opened("fourth")
    assert [f[0] for f in changed[0]] == ["again.jsonl#orders-agg-2", "again.jsonl#unknown-host",
                                         "query.jsonl#orders-agg-1"]
    assert len(cache_admin.entries(cache)) == 2
    assert opened("fifth") == changed


def test_a_line_no_encoding_can_write_is_written_escaped(tmp_path):
    """A JSON escape can make a lone surrogate, which UTF-8 cannot hold: the line is kept, written as the same
    JSON escape."""
    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    line = json.dumps({"labels": {"pod": "orders-agg-1"}, "line": "value \ud800 end",
                       "timestamp": "2024-03-07T14:02:11.412000000+01:00"})
    (bundle_dir / "query.jsonl").write_text(line + "\n", encoding="utf-8")
    bundle = open_bundle(bundle_dir, tmp_path / "work")
    assert "\\ud800" in bundle.logs[0].local_path.read_bytes().decode("utf-8")
    assert [w["log"] for w in lines_of(bundle.logs[0].local_path)] == ["value \ud800 end\n"]


def test_kept_json_documents_depend_on_every_json_document_of_the_bundle(tmp_path):
    """JSON documents share the driver's budget, so one read or not depends on the others: a changed document of
    another format changes the key of every JSON-document format, not that of JSON-lines exports."""
    from toolkit.bundle.export_cache import group_keys
    from toolkit.bundle.exports import PendingExport
    from toolkit.bundle.model import Bundle

    formats = formats_by_id()
    files = {name: tmp_path / name for name in ("a.json", "b.json", "c.jsonl")}
    for path in files.values():
        path.write_text("{}", encoding="utf-8")
    pending = {"elasticsearch-search": [PendingExport("a.json", files["a.json"], "h", 2,
                                                      formats["elasticsearch-search"])],
               "cloudwatch-events": [PendingExport("b.json", files["b.json"], "h", 2, formats["cloudwatch-events"])],
               "loki-jsonl": [PendingExport("c.jsonl", files["c.jsonl"], "h", 2, formats["loki-jsonl"])]}
    bundle = Bundle(root=tmp_path, work_dir=tmp_path / "work")
    before = group_keys(bundle, pending)
    files["b.json"].write_text('{"events": []}', encoding="utf-8")
    after = group_keys(bundle, pending)
    assert after["elasticsearch-search"] != before["elasticsearch-search"]
    assert after["cloudwatch-events"] != before["cloudwatch-events"]
    assert after["loki-jsonl"] == before["loki-jsonl"]
