"""Records -> events across Kafka Streams 1.1-4.3 and NiFi 1.x/2.9 prefix styles, config dumps,
unknown shapes and process runs."""

from __future__ import annotations

from datetime import datetime

import pytest

from toolkit.events import EVENT_COLUMNS, classify, extract_config, tag_runs, unknown_shapes
from toolkit.redact import redact_config_value, redact_text
from toolkit.schemas import RECORD_SCHEMA

CID = "orders-app-3c8e7f0a-2b61-4c57-9a4e-0d1f5b6a7c88"
PID = "3c8e7f0a-2b61-4c57-9a4e-0d1f5b6a7c88"
T1 = f"{CID}-StreamThread-1"
NIFI_ID = "5f0c2a1e-0197-1000-9d3e-3b8c5e2f4a11"


def _records(spark, lines, host="h1", source="app.log"):
    """lines: (message, logger or None[, ts or None[, stack]]) -> record DataFrame."""
    rows = []
    for i, line in enumerate(lines, start=1):
        message, logger = line[0], line[1]
        ts = line[2] if len(line) > 2 else None
        stack = line[3] if len(line) > 3 else None
        rows.append((source, i, host, ts, None, "INFO", "-StreamThread-1", logger, message, stack, "test", "exact" if ts else "missing", 1))
    return spark.createDataFrame(rows, RECORD_SCHEMA)


# (message as the `message` column holds it, logger as the layout printed it, expected fields)
VERSION_LINES = [
    # --- Kafka 1.1: task prefix without thread; KAFKA-7672 log, some prefixes without a space
    ("stream-thread [AuditTrailBatch-StreamThread-1]No checkpoint found for task 1_1 state store AuditTrailBatch-store1-changelog-1 with EOS turned on. Reinitializing the task and restore its state from the beginning.",
     "org.apache.kafka.streams.processor.internals.StoreChangelogReader",
     {"event": "CHECKPOINT_MISSING", "also_events": ["STATE_WIPED"], "task_id": "1_1", "topic": "AuditTrailBatch-store1-changelog",
      "partition": 1, "stream_thread": "AuditTrailBatch-StreamThread-1", "client_id": "AuditTrailBatch", "product": "kafka-streams"}),
    ("[Consumer clientId=AuditTrailBatch-StreamThread-1-restore-consumer, groupId=]Resetting offset for partition AuditTrailBatch-store1-changelog-1 to offset 0.",
     "org.apache.kafka.clients.consumer.internals.Fetcher",
     {"event": "OFFSET_RESET", "offset": 0, "partition": 1, "stream_thread": "AuditTrailBatch-StreamThread-1", "app_id": None}),
    ("stream-thread [AuditTrailBatch-StreamThread-1]State transition from PARTITIONS_ASSIGNED to RUNNING",
     "org.apache.kafka.streams.processor.internals.StreamThread",
     {"event": "THREAD_STATE", "from_state": "PARTITIONS_ASSIGNED", "to_state": "RUNNING", "stream_thread": "AuditTrailBatch-StreamThread-1"}),
    ("[Consumer clientId=AuditTrailBatch-StreamThread-1-consumer, groupId=AuditTrailBatch] Revoking previously assigned partitions [AuditTrailBatch-0-5]",
     "org.apache.kafka.clients.consumer.internals.ConsumerCoordinator",
     {"event": "PARTITIONS_REVOKED", "topic": "AuditTrailBatch-0", "partition": 5, "app_id": "AuditTrailBatch"}),
    ("[Consumer clientId=AuditTrailBatch-StreamThread-1-consumer, groupId=AuditTrailBatch] Successfully joined group with generation 323",
     "org.apache.kafka.clients.consumer.internals.AbstractCoordinator",
     {"event": "REBALANCE_JOINED", "generation": 323, "member_id": None}),
    ("task [0_1] Writing checkpoint: {orders-app-counts-changelog-1=10452}", None,
     {"event": "CHECKPOINT_WRITTEN", "task_id": "0_1", "task_role": "active", "offset": 10452, "stream_thread": None}),
    ("Kafka version : 1.1.1", "org.apache.kafka.common.utils.AppInfoParser", {"event": "APP_START", "version": "1.1.1"}),
    # --- Kafka 2.0: standby prefix without thread, migrated task
    ("standby-task [1_0] Failed to lock the state directory for task 1_0", None,
     {"event": "LOCK_FAILED", "task_id": "1_0", "task_role": "standby"}),
    (f"stream-thread [{T1}] Detected task 0_1 that got migrated to another thread. This implies that this thread missed a rebalance and dropped out of the consumer group. Will try to rejoin the consumer group. Below is the detailed description of the task:\nTaskId: 0_1\n",
     "o.a.k.s.p.internals.StreamThread", {"event": "TASK_MIGRATED", "task_id": "0_1", "process_id": PID, "app_id": "orders-app"}),
    # --- Kafka 2.4: stream-thread + task prefix, Adding newly assigned partitions
    (f"stream-thread [{T1}] task [0_1] Transitioning stream task 0_1 to restoring", None,
     {"event": "TASK_RESTORING", "task_id": "0_1", "stream_thread": T1}),
    (f"[Consumer clientId={T1}-consumer, groupId=orders-app] Adding newly assigned partitions: orders-0, orders-3",
     "org.apache.kafka.clients.consumer.internals.ConsumerCoordinator",
     {"event": "PARTITIONS_ASSIGNED", "topic": None, "partitions_n": 2, "app_id": "orders-app", "stream_thread": T1}),
    # --- Kafka 2.8: Generation{...}, process id file, processing summary
    (f"[Consumer clientId={T1}-consumer, groupId=orders-app] Successfully joined group with generation Generation{{generationId=42, memberId='{T1}-consumer-9d2f1c4e-5b7a-4e3d-8c1f-2a6b9e0d4f13', protocol='stream'}}",
     None, {"event": "REBALANCE_JOINED", "generation": 42, "member_id": f"{T1}-consumer-9d2f1c4e-5b7a-4e3d-8c1f-2a6b9e0d4f13"}),
    (f"Reading UUID from process file: {PID}", "org.apache.kafka.streams.processor.internals.StateDirectory",
     {"event": "PROCESS_ID_LOADED", "process_id": PID}),
    (f"stream-thread [{CID}-CleanupThread] Deleting obsolete state directory 0_1 for task 0_1 as 600523ms has elapsed (cleanup delay is 600000ms).",
     "o.a.k.s.p.internals.StateDirectory",
     {"event": "DIR_CLEANED", "task_id": "0_1", "duration_ms": 600523, "limit_ms": 600000, "client_id": CID, "process_id": PID}),
    # --- Kafka 3.4: task prefix still 'task', Suspended from, Shutting down unclean
    (f"stream-thread [{T1}] task [0_1] Suspended from RUNNING", None, {"event": "TASK_SUSPENDED", "from_state": "RUNNING", "task_id": "0_1"}),
    (f"stream-thread [{T1}] Shutting down unclean", "org.apache.kafka.streams.processor.internals.StreamThread", {"event": "SHUTDOWN_UNCLEAN"}),
    (f"stream-thread [{T1}] task [0_1] State store counts did not find checkpoint offsets while stores are not empty, since under EOS it has the risk of getting uncommitted data in stores we have to treat it as a task corruption error and wipe out the local state of task 0_1 before re-bootstrapping",
     None, {"event": "CHECKPOINT_MISSING", "also_events": ["TASK_CORRUPTED"], "store": "counts", "task_id": "0_1"}),
    # --- Kafka 3.8: stream-task prefix, checkpoint read at INFO, restore lines on stream-thread
    (f"stream-thread [{T1}] stream-task [0_1] State store counts initialized from checkpoint with offset 10452 at changelog orders-app-counts-changelog-1",
     "org.apache.kafka.streams.processor.internals.ProcessorStateManager",
     {"event": "CHECKPOINT_READ", "store": "counts", "offset": 10452, "partition": 1, "task_id": "0_1", "task_role": "active", "app_id": "orders-app"}),
    (f"stream-thread [{T1}] Restoration in progress for 2 partitions. {{orders-app-store-changelog-0: position=41234, end=98000, totalRestored=41235}} {{orders-app-store-changelog-3: position=unknown, end=12000, totalRestored=0}}",
     None, {"event": "RESTORE_PROGRESS", "partitions_n": 2, "topic": None, "count": 2}),
    (f"stream-thread [{T1}] stream-task [1_2] Writing checkpoint: {{orders-app-counts-changelog-2=77}} for task 1_2",
     None, {"event": "CHECKPOINT_WRITTEN", "task_id": "1_2", "offset": 77, "partition": 2, "store": "counts"}),
    # --- Kafka 4.1: state-updater prefix, Generation{..} with isFenced broker, terminal client stop
    (f"state-updater [{CID}-StateUpdater-1] Finished restoring changelog orders-app-counts-changelog-1 to store counts with a total number of 535 records",
     "org.apache.kafka.streams.processor.internals.StoreChangelogReader",
     {"event": "RESTORE_END", "records": 535, "store": "counts", "client_id": CID, "stream_thread": f"{CID}-StateUpdater-1"}),
    (f"stream-client [{CID}] Streams client stopped completely and transitioned to the terminal NOT_RUNNING state", None,
     {"event": "CLIENT_STOPPED", "to_state": "NOT_RUNNING", "client_id": CID}),
    (f"stream-client [{CID}] State transition from RUNNING to PENDING_SHUTDOWN", "o.a.k.streams.KafkaStreams",
     {"event": "CLIENT_STATE", "from_state": "RUNNING", "to_state": "PENDING_SHUTDOWN"}),
    (f"[Consumer clientId={T1}-consumer, groupId=orders-app] Revoke previously assigned partitions [orders-3]", None,
     {"event": "PARTITIONS_REVOKED", "topic": "orders", "partition": 3}),
    (f"stream-thread [{T1}] task [billing__0_1] Closed dirty", None, {"event": "TASK_CLOSED_DIRTY", "task_id": "billing__0_1"}),
    # --- NiFi 1.x
    ("Launching NiFi...", "org.apache.nifi.NiFi", {"event": "NIFI_STARTING", "product": "nifi"}),
    ("Launched Apache NiFi with Process ID 4242", "org.apache.nifi.bootstrap.Command", {"event": "NIFI_PROCESS_LAUNCHED", "pid": 4242}),
    # --- NiFi 2.9 (abbreviated loggers)
    ("Starting NiFi 2.9.0 using Java 21.0.6 with PID 4242", "org.apache.nifi.runtime.Application",
     {"event": "NIFI_STARTING", "version": "2.9.0", "pid": 4242}),
    (f"Starting ConsumeKinesis[id={NIFI_ID}]", "o.a.n.c.s.StandardProcessScheduler",
     {"event": "PROCESSOR_START_REQUESTED", "component_type": "ConsumeKinesis", "component_id": NIFI_ID}),
    (f"ConsumeKinesis[id={NIFI_ID}] Failed to properly initialize Processor. If still scheduled to run, NiFi will attempt to initialize and run the Processor again after the 'Administrative Yield Duration' has elapsed. Failure is due to software.amazon.awssdk.services.dynamodb.model.DynamoDbException: One or more parameter values were invalid: Missing the key leaseKey in the item (Service: DynamoDb, Status Code: 400, Request ID: 7QK3Q1P0V8RS2H4M)",
     "o.a.n.p.aws.kinesis.ConsumeKinesis",
     {"event": "PROCESSOR_START_FAILED", "component_id": NIFI_ID, "error_class": "software.amazon.awssdk.services.dynamodb.model.DynamoDbException"}),
    (f"ConsumeKinesis[id={NIFI_ID}] Copying checkpoint items from [orders-app_migration] to [orders-app]", "o.a.n.p.aws.kinesis.ConsumeKinesis",
     {"event": "MIGRATION_COPY_STARTED", "source_table": "orders-app_migration", "table": "orders-app"}),
    (f"ConsumeKinesis[id={NIFI_ID}] Deleting orphaned migration table [orders-app_migration]; legacy checkpoint table [orders-app] retains original data",
     None, {"event": "LINGERING_MIGRATION_DELETED", "table": "orders-app"}),
    (f"ConsumeKinesis[id={NIFI_ID}] Creating Enhanced Fan-Out subscription for stream [orders] shard [shardId-000000000003] type [TRIM_HORIZON] seq [null]",
     None, {"event": "SHARD_STARTED_FROM_INITIAL_POSITION", "shard_id": "shardId-000000000003", "stream": "orders", "position_type": "TRIM_HORIZON"}),
]


def test_real_lines_of_each_version_classify_with_their_fields(spark):
    records = _records(spark, [(m, logger) for m, logger, _ in VERSION_LINES])
    events = classify(records)
    assert tuple(events.columns) == EVENT_COLUMNS
    rows = {r["line_no"]: r for r in events.collect()}
    problems = []
    for line_no, (message, _, want) in enumerate(VERSION_LINES, start=1):
        row = rows.get(line_no)
        if row is None:
            problems.append(f"not classified: {message[:90]}")
            continue
        for name, value in want.items():
            got = len(row["partitions"] or []) if name == "partitions_n" else row[name]
            if got != value:
                problems.append(f"{row['template_id']}: {name}={got!r}, expected {value!r}")
    assert problems == []
    progress = next(r for r in rows.values() if r["event"] == "RESTORE_PROGRESS")
    assert [(p["partition"], p["offset"], p["end_offset"], p["records"]) for p in progress["partitions"]] == [
        (0, 41234, 98000, 41235),
        (3, None, 12000, 0),
    ]


def test_unmatched_and_lookalike_lines_are_not_classified_and_ts_stays_null(spark):
    ts = datetime(2024, 3, 7, 14, 2, 11)
    records = _records(
        spark,
        [
            ("Restarting dead fetch loop soon", None, ts),  # lookalike of a NiFi template, wrong wording
            ("State transition from CREATED to RUNNING", None, ts),  # no prefix: cannot tell whose state machine
            (f"stream-thread [{T1}] Starting", None, None),  # real, without timestamp
            (None, None, ts),
        ],
    )
    rows = classify(records).collect()
    assert [(r["line_no"], r["event"], r["ts"]) for r in rows] == [(3, "THREAD_START", None)]


def test_stack_gives_the_error_class_when_the_message_does_not(spark):
    stack = (
        "org.apache.kafka.streams.errors.TaskCorruptedException: Tasks [0_1] are corrupted and hence need to be re-initialized\n"
        "\tat org.apache.kafka.streams.processor.internals.TaskManager.handleCorruption(TaskManager.java:123)"
    )
    records = _records(spark, [(f"stream-thread [{T1}] Detected the states of tasks [0_1] are corrupted. Will close the task as dirty and re-create and bootstrap from scratch.", None, None, stack)])
    (row,) = classify(records).collect()
    assert (row["event"], row["task_id"], row["error_class"]) == (
        "TASK_CORRUPTED", "0_1", "org.apache.kafka.streams.errors.TaskCorruptedException",
    )


CONFIG_DUMP = (
    "StreamsConfig values: \n"
    "\tacceptable.recovery.lag = 10000\n"
    "\tapplication.id = orders-app\n"
    "\tbootstrap.servers = [SASL_SSL://broker-1:9093]\n"
    "\tprocessing.guarantee = exactly_once_v2\n"
    "\tsasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"hunter2\";\n"
    "\tsasl.mechanism = PLAIN\n"
    "\tssl.truststore.password = s3cr3t\n"
    "\tssl.keystore.key = null\n"
    "\tstate.dir = /var/lib/kafka-streams\n"
)


def test_config_dump_becomes_rows_and_secrets_appear_nowhere(spark):
    records = _records(spark, [("Kafka Streams version: 3.8.1", None), (CONFIG_DUMP, "org.apache.kafka.common.config.AbstractConfig")])
    config = extract_config(records)
    rows = config.collect()
    values = {r["key"]: r["value"] for r in rows}
    assert {r["config_class"] for r in rows} == {"StreamsConfig"}
    assert {r["line_no"] for r in rows} == {2}
    assert values["application.id"] == "orders-app"
    assert values["processing.guarantee"] == "exactly_once_v2"
    assert values["state.dir"] == "/var/lib/kafka-streams"
    assert values["sasl.jaas.config"] == "[redacted]"
    assert values["ssl.truststore.password"] == "[redacted]"
    assert values["ssl.keystore.key"] == "null"  # an unset secret is worth seeing
    assert len(values) == 9

    events = classify(records).collect()
    assert [e["event"] for e in events] == ["APP_START", "CONFIG_DUMP"]
    everything = [str(v) for r in rows for v in r] + [str(v) for e in events for v in e]
    assert not [v for v in everything if "hunter2" in v or "s3cr3t" in v]


def test_plain_python_redaction_matches_the_rules():
    assert redact_config_value("ssl.key.password", "pw") == "[redacted]"
    assert redact_config_value("ssl.truststore.type", "JKS") == "JKS"
    assert redact_config_value("sasl.jaas.config", "[hidden]") == "[hidden]"
    assert redact_text("connect to https://bob:pa55@host:8443/x") == "connect to https://bob:[redacted]@host:8443/x"
    assert "AKIAIOSFODNN7EXAMPLE" not in redact_text("aws key AKIAIOSFODNN7EXAMPLE used")


#: Texts with one very long token beside a secret: each redaction rule must scan the token once.
LONG_TOKEN = "Ab1+" * 250_000  # a megabyte of base64-like text (a logged payload or certificate)
LONG_TOKEN_CASES = [
    (f"payload {LONG_TOKEN} from https://bob:pa55@host:8443/x", f"payload {LONG_TOKEN} from https://bob:[redacted]@host:8443/x"),
    (f"{LONG_TOKEN}://bob:pa55@host", f"{LONG_TOKEN}://bob:[redacted]@host"),
    ("password" * 100_000 + ".x = hunter2", "password" * 100_000 + ".x = [redacted]"),
]


@pytest.mark.timeout(300)
def test_redaction_scans_a_megabyte_long_token_once(spark):
    """The URL rule once restarted inside a long run of scheme characters at every position, and the
    key rule rescanned a long key at every secret word in it: quadratic, hours for one such line."""
    from toolkit.redact import redact_text_col

    for text, expected in LONG_TOKEN_CASES:
        assert redact_text(text) == expected
    rows = spark.createDataFrame([(t,) for t, _ in LONG_TOKEN_CASES], "text string")
    got = [r[0] for r in rows.select(redact_text_col(rows["text"])).collect()]
    assert got == [expected for _, expected in LONG_TOKEN_CASES]


def test_texts_of_templates_without_a_logger_pass_the_gate_under_any_logger(spark):
    # An exception's text is logged by whoever caught it, at any level: the gate may not judge it by its logger.
    from toolkit.catalogue import load_templates

    ids = {"jvm.thread.uncaught": "UNCAUGHT_EXCEPTION", "ks.exception.task_corrupted": "TASK_CORRUPTED",
           "ks.exception.task_corrupted_v26": "TASK_CORRUPTED", "ks.exception.task_migrated": "TASK_MIGRATED"}
    found = [t for t in load_templates() if t.id in ids]
    assert {t.id for t in found} == set(ids)
    samples = [(sample, ids[t.id]) for t in found for sample in t.samples]
    lines = [(sample, "com.example.orders.OrderService") for sample, _ in samples]
    events = {row["line_no"]: row["event"] for row in classify(_records(spark, lines)).collect()}
    assert events == {i: event for i, (_, event) in enumerate(samples, start=1)}


def test_unknown_shapes_groups_noise_by_masked_shape(spark):
    noise = [
        ("Fetched 120 records from partition orders-3 in 15ms", "com.example.OrderProcessor"),
        ("Fetched 98 records from partition orders-1 in 7ms", "com.example.OrderProcessor"),
        ("Fetched 3 records from partition orders-0 in 201ms", "com.example.OrderProcessor"),
        ("Request 7f3c9e2a-1b4d-4c8e-9f0a-2d6b8e1c3a57 served by node abcdef0123456789", "com.example.Http"),
        ("Request 0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d served by node 0123456789abcdef", "com.example.Http"),
        (f"stream-thread [{T1}] State transition from RUNNING to PARTITIONS_REVOKED", "o.a.k.s.p.internals.StreamThread"),
        ("user password=hunter2 rejected", None),
    ]
    shapes = unknown_shapes(_records(spark, noise), limit=10).collect()
    by_shape = {r["shape"]: r for r in shapes}
    fetched = by_shape["Fetched <n> records from partition orders-<n> in <n>ms"]
    assert (fetched["count"], fetched["logger"], fetched["example_source"], fetched["example_line_no"]) == (3, "com.example.OrderProcessor", "app.log", 1)
    assert by_shape["Request <uuid> served by node <hex>"]["count"] == 2
    assert shapes[0]["count"] == 3  # most frequent first
    assert not any("State transition" in s for s in by_shape)  # classified lines are not unknown
    assert all("hunter2" not in (r["example"] or "") for r in shapes)


def test_runs_start_at_jvm_start_markers_per_host(spark):
    def t(minute, second=0):
        return datetime(2024, 3, 7, 14, minute, second)

    lines = [
        (f"stream-thread [{T1}] State transition from RUNNING to PARTITIONS_REVOKED", None, t(0)),  # before any marker: run 0
        ("StreamsConfig values: \n\tapplication.id = orders-app\n", None, t(1)),  # start 1
        ("Kafka version: 3.8.1", None, t(1, 1)),  # same start (per-client banner)
        (f"stream-client [{CID}] Kafka Streams version: 3.8.1", None, t(1, 1)),  # same start
        (f"stream-client [{CID}] State transition from CREATED to REBALANCING", None, t(1, 2)),  # same start
        (f"stream-thread [{T1}] Starting", None, None),  # no ts: ordered by its file position
        ("Kafka version: 3.8.1", None, t(5)),  # late producer banner: not a new run (host has strong markers)
        ("StreamsConfig values: \n\tapplication.id = orders-app\n", None, t(20)),  # restart: run 2
        (f"stream-client [{CID}] State transition from CREATED to REBALANCING", None, t(20, 1)),
    ]
    other_host = [("Starting NiFi 2.9.0 using Java 21.0.6 with PID 4242", None, t(2)), ("Starting Flow Controller...", None, t(2, 5))]
    records = _records(spark, lines).unionByName(_records(spark, other_host, host="nifi-1"))
    runs = {(r["host"], r["line_no"]): (r["run_no"], r["run_id"]) for r in tag_runs(records).collect()}
    assert [runs[("h1", i)][0] for i in range(1, 10)] == [0, 1, 1, 1, 1, 1, 1, 2, 2]
    assert runs[("h1", 8)][1] == "h1#2"
    assert runs[("nifi-1", 1)] == (1, "nifi-1#1") and runs[("nifi-1", 2)][0] == 1


def test_runs_fall_back_to_version_banners_without_strong_markers(spark):
    lines = [
        ("Kafka version : 1.1.1", None, datetime(2024, 1, 1, 10, 0, 0)),
        ("Kafka version : 1.1.1", None, datetime(2024, 1, 1, 10, 0, 1)),
        ("Kafka version : 1.1.1", None, datetime(2024, 1, 1, 12, 0, 0)),
    ]
    runs = [r["run_no"] for r in tag_runs(_records(spark, lines)).orderBy("line_no").collect()]
    assert runs == [1, 1, 2]


@pytest.mark.parametrize("bad", [None, ""])
def test_classify_of_empty_messages_is_empty(spark, bad):
    assert classify(_records(spark, [(bad, None)])).count() == 0
