"""A NiFi 2.9 node running ConsumeKinesis processors, and the AWS side (DynamoDB, CloudTrail) they leave.

``migrate`` plays the 2.9.0 legacy-checkpoint migration of one processor step by step (nifi reference
§3.6, §3.9): every ConsumeKinesis line is printed at its real level, and the scenario's logback levels
decide what survives (NiFi's default keeps ``org.apache.nifi.processors`` at WARN). Each AWS API call is
recorded for the CloudTrail file; table state is recorded for ``describe-table``/``scan`` captures.
"""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from .kafka import rng_uuid
from .layouts import LogLine, iso
from .templates import NIFI_TEMPLATES, fill

#: NiFi's shipped conf/logback.xml (reference §1.4).
NIFI_DEFAULT_LEVELS = {
    "org.apache.nifi": "INFO",
    "org.apache.nifi.processors": "WARN",
    "org.apache.nifi.controller.repository.StandardProcessSession": "WARN",
    "software.amazon.awssdk.kinesis": "WARN",
}
REGION, ACCOUNT = "eu-west-1", "111122223333"
ROLE = f"arn:aws:sts::{ACCOUNT}:assumed-role/nifi-kinesis-consumer/i-0a1b2c3d4e5f60718"


@dataclass
class Processor:
    """One ConsumeKinesis instance: its checkpoint table is named by 'Application Name'."""

    pid: str
    table: str
    stream: str
    shards: int
    thread: str
    position: str = "TRIM_HORIZON"


@dataclass
class NifiHost:
    name: str
    version: str
    seed: str
    pid: int = 1
    lines: list[LogLine] = field(default_factory=list)
    aws: list[dict] = field(default_factory=list)  # CloudTrail-like records, unsorted
    tables: dict[str, dict] = field(default_factory=dict)  # table -> {"created_ms":..., "schema":..., "items":[...]}
    facts: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.processors: dict[str, Processor] = {}
        self.up: list[list[int | None]] = []

    # ---------------------------------------------------------------- helpers
    def emit(self, t: int, tid: str, thread: str, *args, stack: tuple[str, ...] = (), event: str | None = None,
             **fields) -> None:
        tpl = NIFI_TEMPLATES[tid]
        self.lines.append(LogLine(t, tpl.level, thread, tpl.logger, fill(tpl.text, args), stack, event or tpl.event, fields))

    def step(self, t: int, lo: int = 1, hi: int = 12) -> int:
        return t + self.rng.randint(lo, hi)

    def request_id(self) -> str:
        return "".join(self.rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(52))

    def seq(self, base: int) -> str:
        """A 56-digit Kinesis sequence number; ``base`` orders them."""
        return f"4965555095874122937536{base:010d}" + "".join(self.rng.choice("0123456789") for _ in range(24))

    def call(self, t: int, name: str, table: str, error: str | None = None, data: bool = False, **extra) -> None:
        self.aws.append({"t": t, "eventName": name, "table": table, "error": error, "data": data,
                         "requestID": self.request_id(), **extra})

    # ---------------------------------------------------------------- steps
    def start(self, t: int, processors: list[dict]) -> None:
        """NiFi JVM start with flow auto-resume: each ConsumeKinesis gets one `Starting …` line."""
        for p in processors:
            proc = Processor(**p)
            self.processors[proc.pid] = proc
        self.up.append([t, None])
        self.emit(t, "nifi.starting", "main", self.version, "21.0.7", self.pid)
        t = self.step(t, 20, 60)
        self.emit(t, "nifi.loading_props", "main", "./conf/nifi.properties")
        for repo in ("./state/local", "./flowfile_repository"):
            t = self.step(t, 200, 900)
            self.emit(t, "wal.recovering", "main", repo)
            n = self.rng.randint(20, 4000)
            t = self.step(t, 30, 400)
            self.emit(t, "wal.recovered", "main", n, self.rng.randint(8, 90))
            t = self.step(t, 10, 90)
            self.emit(t, "wal.checkpointed", "main", n, 0, self.rng.randint(5, 60), self.rng.randint(0, 4),
                      self.rng.randint(10_000, 90_000))
            if repo == "./flowfile_repository":
                self.emit(self.step(t), "ffr.initialized", "main")
                self.emit(self.step(t, 5, 20), "ffr.restored", "main", n, 0)
        t = self.step(t, 3000, 9000)
        self.emit(t, "fc.starting", "main")
        t = self.step(t, 2000, 6000)
        self.emit(t, "fc.autoresume", "main", len(processors) + self.rng.randint(8, 20))
        for proc in self.processors.values():
            t = self.step(t, 1, 6)
            self.emit(t, "sps.starting", "main", f"ConsumeKinesis[id={proc.pid}]", component_id=proc.pid)
        t = self.step(t, 300, 900)
        self.emit(t, "fc.started", "main")
        t = self.step(t, 800, 2500)
        self.emit(t, "jetty.started", "main", f"https://{self.name}.nifi.svc.cluster.local:8443/nifi")
        secs = (t - self.up[-1][0]) / 1000
        self.emit(self.step(t, 1, 5), "nifi.started", "main", f"{secs:.1f}",
                  int(secs * 1e9) + self.rng.randint(0, 999_999))
        self.facts["started_ms"] = t

    def migrate(self, t: int, processor: str, put_gap_ms: int, legacy_items: int) -> int:
        """2.9.0 `migrateAndRename` for one processor (reference §3.6, §3.9).

        ``put_gap_ms`` is the time between the re-created table turning ACTIVE and the first copy PutItem;
        below ~30 ms the router still has the old key schema and the copy fails with a ValidationException,
        NiFi retries after the 30 s administrative yield and the retry deletes the only copy. Returns the
        time the processor finally started consuming.
        """
        p = self.processors[processor]
        me, app, mig, th = f"ConsumeKinesis[id={p.pid}]", p.table, p.table + "_migration", p.thread
        f = dict(component_id=p.pid, table=app)
        fails = put_gap_ms < 40
        legacy_created = t - 86_400_000 * 97
        self.tables[app] = {"created_ms": legacy_created, "schema": "LEGACY", "items": legacy_items}
        self.call(t, "DescribeTable", app)
        self.emit(t, "ck.detected", th, me, app, "LEGACY", schema="LEGACY", **f)
        self.call(self.step(t), "DescribeTable", mig, error="ResourceNotFoundException")
        t = self.step(t, 20, 60)
        self.emit(t, "ck.legacy_detected", th, me, mig, **f | {"table": mig})
        self.emit(self.step(t, 1, 3), "ck.creating", th, me, mig, event="MIGRATION_TABLE_CREATE_REQUESTED", **f | {"table": mig})
        self.call(self.step(t, 2, 6), "CreateTable", mig)
        t = self.step(t, 5000, 9000)
        self.tables[mig] = {"created_ms": t, "schema": "NEW", "items": 0}
        self.emit(t, "ck.active", th, me, mig, **f | {"table": mig})
        t = self.step(t, 10, 40)
        self.call(t, "PutItem", mig, data=True, key="__migration__")
        self.emit(t, "ck.migration_lock", th, me, p.stream, **f)
        t = self.step(t, 5, 20)
        self.emit(t, "ck.migration_start", th, me, app, mig, p.stream, **f)
        self.call(self.step(t, 1, 4), "Scan", app, data=True)
        for _ in range(legacy_items):
            t = self.step(t, 8, 25)
            self.call(t, "UpdateItem", mig, data=True)
        t = self.step(t, 10, 30)
        self.emit(t, "ck.migration_done", th, me, p.stream, legacy_items, legacy_items, 0, 0, records=legacy_items, **f)
        self.call(self.step(t, 2, 8), "UpdateItem", mig, data=True, key="__migration__")
        t = self.step(t, 10, 30)
        self.emit(t, "ck.rename_lock", th, me, mig, **f | {"table": mig})
        t = self.step(t, 5, 15)
        self.call(t, "DeleteTable", app)
        self.emit(self.step(t, 20, 60), "ck.delete_initiated", th, me, app, **f)
        t = self.step(t, 4000, 9000)
        self.emit(t, "ck.deleted", th, me, app, **f)
        self.facts.setdefault("legacy_deleted", {})[app] = t
        t = self.step(t, 5, 20)
        self.emit(t, "ck.creating", th, me, app, **f)
        self.call(self.step(t, 2, 6), "CreateTable", app)
        t = self.step(t, 5000, 8000)
        self.tables[app] = {"created_ms": t - self.rng.randint(5000, 5200), "schema": "NEW", "items": 0}
        self.emit(t, "ck.active", th, me, app, **f)
        self.facts.setdefault("recreated_active", {})[app] = t
        self.emit(self.step(t, 1, 3), "ck.copying", th, me, mig, app, **f)
        self.call(t + 2, "Scan", mig, data=True)
        t += put_gap_ms
        if fails:
            rid = self.request_id()
            self.call(t, "PutItem", app, error="ValidationException", data=True, requestID=rid,
                      errorMessage="One or more parameter values were invalid: Missing the key leaseKey in the item")
            t = self.step(t, 3, 12)
            cause = ("software.amazon.awssdk.services.dynamodb.model.DynamoDbException: One or more parameter values were "
                     f"invalid: Missing the key leaseKey in the item (Service: DynamoDb, Status Code: 400, Request ID: {rid})")
            self.emit(t, "proc.init_failed", th, me, cause, stack=_dynamodb_stack(cause), error_class="DynamoDbException", **f)
            self.facts.setdefault("copy_failed", {})[app] = t
            # Administrative yield (30 s), @OnScheduled again: NEW + lingering _migration -> 2.9.0 deletes it.
            t = self.step(t, 30_000, 30_400)
            self.call(t, "DescribeTable", app)
            self.emit(t, "ck.detected", th, me, app, "NEW", schema="NEW", **f)
            t = self.step(t, 20, 80)
            self.emit(t, "ck.active", th, me, app, **f)
            t = self.step(t, 5, 30)
            self.emit(t, "ck.lingering_delete", th, me, mig, app, **f | {"table": mig})
            self.call(self.step(t, 2, 6), "DeleteTable", mig)
            self.emit(self.step(t, 20, 60), "ck.delete_initiated", th, me, mig, event="MIGRATION_TABLE_DELETED",
                      **f | {"table": mig})
            self.facts.setdefault("migration_deleted", {})[app] = t
            copied = 0
        else:
            for _ in range(legacy_items):
                self.call(t, "PutItem", app, data=True)
                t = self.step(t, 8, 25)
            self.emit(t, "ck.copied", th, me, legacy_items, mig, app, records=legacy_items, **f)
            t = self.step(t, 5, 20)
            self.call(t, "DeleteTable", mig)
            self.emit(self.step(t, 20, 60), "ck.delete_initiated", th, me, mig, event="MIGRATION_TABLE_DELETED",
                      **f | {"table": mig})
            self.facts.setdefault("migration_deleted", {})[app] = t
            copied = legacy_items
        del self.tables[mig]
        t = self.step(t, 40, 120)
        self.emit(t, "ck.using", th, me, app, p.stream, **f)
        self.emit(self.step(t, 50, 300), "ck.efo_active", th, me, app, p.stream, **f)
        for s in range(p.shards):
            t = self.step(t, 5, 40)
            shard = f"shardId-{s:012d}"
            if copied:
                self.emit(t, "ck.efo_subscribe", th, me, p.stream, shard, "AFTER_SEQUENCE_NUMBER", self.seq(9_000_000 + s),
                          shard_id=shard, **f)
            else:
                self.emit(t, "ck.efo_subscribe", th, me, p.stream, shard, p.position, "null",
                          event="SHARD_STARTED_FROM_INITIAL_POSITION", shard_id=shard, **f)
            self.emit(self.step(t, 80, 400), "ck.efo_established", "", me, shard, shard_id=shard, **f)
        self.facts.setdefault("consuming", {})[app] = (t, copied)
        return t

    # ---------------------------------------------------------------- noise
    def noise(self, debug_commits: bool = False) -> Iterator[LogLine]:
        gens = [self._periodic(start, end) for start, end in self.up]
        return heapq.merge(*gens, key=lambda x: x.ts_ms)

    def stop_noise(self, t: int) -> None:
        """End of the captured log window (the operator copied the log at ``t``)."""
        self.up[-1][1] = t

    def _periodic(self, start: int, end: int | None) -> Iterator[LogLine]:
        rng = random.Random(f"{self.seed}:noise:{start}")
        ffr, wal, saved = (NIFI_TEMPLATES[k] for k in ("ffr.checkpointed", "wal.checkpointed", "flow.saved"))
        t_ffr, t_wal, t_save = start + 20_000, start + 120_000, start + 60_000 + rng.randint(0, 600_000)
        txid = rng.randint(40_000, 90_000)
        while True:
            t = min(t_ffr, t_wal, t_save)
            if end is not None and t >= end:
                return
            if t == t_ffr:
                yield LogLine(t, ffr.level, "Checkpoint FlowFile Repository", ffr.logger,
                              fill(ffr.text, (rng.randint(0, 60), rng.randint(2, 40))), (), ffr.event, {})
                t_ffr = t + 20_000 + rng.randint(0, 60)
            elif t == t_wal:
                txid += rng.randint(5, 200)
                yield LogLine(t, wal.level, "Write-Ahead Local State Provider Maintenance", wal.logger,
                              fill(wal.text, (rng.randint(20, 80), 0, rng.randint(3, 40), rng.randint(0, 3), txid)), (),
                              wal.event, {})
                t_wal = t + 120_000 + rng.randint(0, 40)
            else:
                yield LogLine(t, saved.level, f"Flow Service Tasks Thread-{rng.randint(1, 2)}", saved.logger,
                              fill(saved.text, (f"org.apache.nifi.controller.FlowController@{rng.getrandbits(32):x}",
                                                "false")), (), saved.event, {})
                t_save = t + rng.randint(600_000, 3_600_000)

    # ---------------------------------------------------------------- AWS captures
    def cloudtrail(self) -> str:
        records = []
        for c in sorted(self.aws, key=lambda c: (c["t"], c["requestID"])):
            rec = {
                "eventVersion": "1.09",
                "userIdentity": {"type": "AssumedRole", "principalId": "AROAEXAMPLEID:i-0a1b2c3d4e5f60718", "arn": ROLE,
                                 "accountId": ACCOUNT,
                                 "sessionContext": {"sessionIssuer": {"type": "Role", "arn": f"arn:aws:iam::{ACCOUNT}:role/"
                                                                      "nifi-kinesis-consumer", "accountId": ACCOUNT,
                                                                      "userName": "nifi-kinesis-consumer"}}},
                "eventTime": iso(c["t"])[:19] + "Z",
                "eventSource": "dynamodb.amazonaws.com",
                "eventName": c["eventName"],
                "awsRegion": REGION,
                "sourceIPAddress": "10.20.3.41",
                "userAgent": "aws-sdk-java/2.42.28 md/io#sync md/http#Apache ua/2.1 os/Linux lang/java#21.0.7 "
                             "app/nifi-aws-kinesis",
                "requestParameters": {"tableName": c["table"]},
                "responseElements": None,
                "requestID": c["requestID"],
                "eventID": rng_uuid(self.rng),
                "readOnly": c["eventName"] in ("DescribeTable", "Scan"),
                "resources": [{"accountId": ACCOUNT, "type": "AWS::DynamoDB::Table",
                               "ARN": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{c['table']}"}],
                "eventType": "AwsApiCall",
                "managementEvent": not c["data"],
                "recipientAccountId": ACCOUNT,
                "eventCategory": "Data" if c["data"] else "Management",
            }
            if c["error"]:
                rec["errorCode"] = c["error"]
                rec["errorMessage"] = c.get("errorMessage", f"Requested resource not found: Table: {c['table']} not found")
            elif c["eventName"] in ("CreateTable", "DeleteTable"):
                rec["responseElements"] = {"tableDescription": {
                    "tableName": c["table"], "tableStatus": "CREATING" if c["eventName"] == "CreateTable" else "DELETING",
                    "tableArn": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{c['table']}"}}
            records.append(rec)
        return json.dumps({"Records": records}, indent=2) + "\n"

    def describe_table(self, table: str) -> str:
        info = self.tables[table]
        created = iso(info["created_ms"]).replace("Z", "000+00:00")
        keys = [("streamName", "HASH"), ("shardId", "RANGE")] if info["schema"] == "NEW" else [("leaseKey", "HASH")]
        doc = {"Table": {
            "AttributeDefinitions": [{"AttributeName": k, "AttributeType": "S"} for k, _ in keys],
            "TableName": table,
            "KeySchema": [{"AttributeName": k, "KeyType": r} for k, r in keys],
            "TableStatus": "ACTIVE",
            "CreationDateTime": created,
            "ProvisionedThroughput": {"NumberOfDecreasesToday": 0, "ReadCapacityUnits": 0, "WriteCapacityUnits": 0},
            "TableSizeBytes": 0,
            "ItemCount": 0,
            "TableArn": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}",
            "TableId": rng_uuid(random.Random(f"{self.seed}:{table}:{info['created_ms']}")),
            "BillingModeSummary": {"BillingMode": "PAY_PER_REQUEST", "LastUpdateToPayPerRequestDateTime": created},
            "DeletionProtectionEnabled": False,
        }}
        return json.dumps(doc, indent=2) + "\n"

    def scan(self, table: str, at_ms: int) -> str:
        """Items of a NEW-schema table at ``at_ms``: shard rows (lease + checkpoint) and one live heartbeat row."""
        p = next(x for x in self.processors.values() if x.table == table)
        consuming_ms, copied = self.facts["consuming"][table]
        rng = random.Random(f"{self.seed}:scan:{table}:{at_ms}")
        owner = rng_uuid(rng)
        items = []
        for s in range(p.shards):
            # Restarted shards checkpoint far behind the pre-upgrade positions (TRIM_HORIZON replay).
            base = 9_100_000 + s if copied else 1_200 + s
            items.append({"streamName": {"S": p.stream}, "shardId": {"S": f"shardId-{s:012d}"},
                          "sequenceNumber": {"S": self.seq(base)},
                          "lastUpdateTimestamp": {"N": str(at_ms - rng.randint(500, 9000))},
                          "leaseOwner": {"S": owner}, "leaseExpiry": {"N": str(at_ms + rng.randint(21_000, 29_000))}})
        items.append({"streamName": {"S": p.stream}, "shardId": {"S": f"__node__#{owner}"},
                      "nodeHeartbeat": {"N": str(at_ms - rng.randint(100, 9000))},
                      "lastUpdateTimestamp": {"N": str(at_ms - rng.randint(100, 9000))}})
        return json.dumps({"Items": items, "Count": len(items), "ScannedCount": len(items), "ConsumedCapacity": None},
                          indent=2) + "\n"


def _dynamodb_stack(header: str) -> tuple[str, ...]:
    """logback rendering of the copy failure; the NiFi frames are the 2.9.0 call path (``rel/nifi-2.9.0``: the
    copy is ``CheckpointTableUtils#copyCheckpointItems``, called from ``LegacyCheckpointMigrator``)."""
    frames = [
        "software.amazon.awssdk.services.dynamodb.model.DynamoDbException$BuilderImpl.build(DynamoDbException.java:104)",
        "software.amazon.awssdk.services.dynamodb.model.DynamoDbException$BuilderImpl.build(DynamoDbException.java:58)",
        "software.amazon.awssdk.protocols.json.internal.unmarshall.AwsJsonProtocolErrorUnmarshaller.unmarshall("
        "AwsJsonProtocolErrorUnmarshaller.java:101)",
        "software.amazon.awssdk.protocols.json.internal.unmarshall.AwsJsonProtocolErrorUnmarshaller.handle("
        "AwsJsonProtocolErrorUnmarshaller.java:84)",
        "software.amazon.awssdk.core.internal.http.CombinedResponseHandler.handleErrorResponse("
        "CombinedResponseHandler.java:125)",
        "software.amazon.awssdk.core.internal.http.CombinedResponseHandler.handleResponse(CombinedResponseHandler.java:82)",
        "software.amazon.awssdk.core.internal.http.pipeline.stages.RetryableStage.execute(RetryableStage.java:50)",
        "software.amazon.awssdk.core.internal.http.AmazonSyncHttpClient$RequestExecutionBuilderImpl.execute("
        "AmazonSyncHttpClient.java:210)",
        "software.amazon.awssdk.core.internal.handler.BaseSyncClientHandler.invoke(BaseSyncClientHandler.java:103)",
        "software.amazon.awssdk.core.internal.handler.BaseSyncClientHandler.doExecute(BaseSyncClientHandler.java:173)",
        "software.amazon.awssdk.core.internal.handler.BaseSyncClientHandler.execute(BaseSyncClientHandler.java:74)",
        "software.amazon.awssdk.core.client.handler.SdkSyncClientHandler.execute(SdkSyncClientHandler.java:45)",
        "software.amazon.awssdk.awscore.client.handler.AwsSyncClientHandler.execute(AwsSyncClientHandler.java:53)",
        "software.amazon.awssdk.services.dynamodb.DefaultDynamoDbClient.putItem(DefaultDynamoDbClient.java:4712)",
        "org.apache.nifi.processors.aws.kinesis.CheckpointTableUtils.copyCheckpointItems(CheckpointTableUtils.java:187)",
        "org.apache.nifi.processors.aws.kinesis.LegacyCheckpointMigrator.renameMigrationTable(LegacyCheckpointMigrator.java:114)",
        "org.apache.nifi.processors.aws.kinesis.LegacyCheckpointMigrator.migrateAndRename(LegacyCheckpointMigrator.java:105)",
        "org.apache.nifi.processors.aws.kinesis.KinesisShardManager.ensureCheckpointTableExists(KinesisShardManager.java:155)",
        "org.apache.nifi.processors.aws.kinesis.ConsumeKinesis.onScheduled(ConsumeKinesis.java:431)",
        "java.base/jdk.internal.reflect.DirectMethodHandleAccessor.invoke(DirectMethodHandleAccessor.java:103)",
        "java.base/java.lang.reflect.Method.invoke(Method.java:580)",
        "org.apache.nifi.util.ReflectionUtils.invokeMethodsWithAnnotations(ReflectionUtils.java:146)",
        "org.apache.nifi.util.ReflectionUtils.invokeMethodsWithAnnotations(ReflectionUtils.java:134)",
        "org.apache.nifi.util.ReflectionUtils.invokeMethodsWithAnnotations(ReflectionUtils.java:50)",
        "org.apache.nifi.util.ReflectionUtils.invokeMethodsWithAnnotation(ReflectionUtils.java:56)",
        "org.apache.nifi.controller.StandardProcessorNode.lambda$initiateStart$9(StandardProcessorNode.java:1710)",
        "java.base/java.util.concurrent.FutureTask.run(FutureTask.java:317)",
        "java.base/java.util.concurrent.ScheduledThreadPoolExecutor$ScheduledFutureTask.run(ScheduledThreadPoolExecutor.java:304)",
        "java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1144)",
        "java.base/java.util.concurrent.ThreadPoolExecutor$Worker.run(ThreadPoolExecutor.java:642)",
        "java.base/java.lang.Thread.run(Thread.java:1583)",
    ]
    return (header,) + tuple("\tat " + f for f in frames)
