"""``… Config values:`` dumps printed when Kafka clients are created (sorted keys, one ``\\tkey = value`` each).

Values are the client defaults, or the overrides Kafka Streams applies to its internal clients.
"""

from __future__ import annotations

from .templates import parse_version

_SERVERS = "[kafka-0.kafka:9092, kafka-1.kafka:9092, kafka-2.kafka:9092]"
_BYTES_DE = "class org.apache.kafka.common.serialization.ByteArrayDeserializer"
_BYTES_SER = "class org.apache.kafka.common.serialization.ByteArraySerializer"
_COMMON = {
    "bootstrap.servers": _SERVERS,
    "connections.max.idle.ms": "540000",
    "metadata.max.age.ms": "300000",
    "metric.reporters": "[]",
    "metrics.num.samples": "2",
    "metrics.recording.level": "INFO",
    "metrics.sample.window.ms": "30000",
    "receive.buffer.bytes": "65536",
    "reconnect.backoff.max.ms": "1000",
    "reconnect.backoff.ms": "50",
    "request.timeout.ms": "30000",
    "retry.backoff.ms": "100",
    "sasl.mechanism": "GSSAPI",
    "security.protocol": "PLAINTEXT",
    "send.buffer.bytes": "131072",
    "ssl.endpoint.identification.algorithm": "https",
    "ssl.protocol": "TLSv1.3",
}


def _dump(values: dict[str, str]) -> str:
    # AbstractConfig#logAll: "<Class> values: " + NL + "\t<k> = <v>" + NL per key (sorted), so the
    # rendered message ends with a newline.
    return "".join(f"\n\t{k} = {values[k]}" for k in sorted(values)) + "\n"


def streams_config(version: str, app_id: str, guarantee: str, state_dir: str, threads: int, standbys: int,
                   commit_ms: int, instance_id: str | None) -> str:
    v = parse_version(version)
    values = {k: _COMMON[k] for k in ("bootstrap.servers", "connections.max.idle.ms", "metadata.max.age.ms",
                                      "metric.reporters", "metrics.num.samples", "metrics.recording.level",
                                      "metrics.sample.window.ms", "reconnect.backoff.max.ms", "reconnect.backoff.ms",
                                      "retry.backoff.ms", "security.protocol", "send.buffer.bytes")}
    values |= {
        "application.id": app_id,
        "application.server": "",
        "buffered.records.per.partition": "1000",
        "client.id": "",
        "commit.interval.ms": str(commit_ms),
        "default.deserialization.exception.handler": "class org.apache.kafka.streams.errors.LogAndFailExceptionHandler",
        "default.key.serde": "null" if v >= (2, 7) else "class org.apache.kafka.common.serialization.Serdes$ByteArraySerde",
        "default.timestamp.extractor": "class org.apache.kafka.streams.processor.FailOnInvalidTimestamp",
        "default.value.serde": "null" if v >= (2, 7) else "class org.apache.kafka.common.serialization.Serdes$ByteArraySerde",
        "num.standby.replicas": str(standbys),
        "num.stream.threads": str(threads),
        "poll.ms": "100",
        "processing.guarantee": guarantee,
        "receive.buffer.bytes": "32768",
        "replication.factor": "3",
        "request.timeout.ms": "40000",
        "rocksdb.config.setter": "null",
        "state.cleanup.delay.ms": "600000",
        "state.dir": state_dir,
        "topology.optimization": "none" if v < (2, 7) else "all",
        "upgrade.from": "null",
        "windowstore.changelog.additional.retention.ms": "86400000",
    }
    if v < (3, 4):
        values["cache.max.bytes.buffering"] = "10485760"
    else:
        values["statestore.cache.max.bytes"] = "10485760"
    if v >= (2, 6):
        values |= {"acceptable.recovery.lag": "10000", "max.warmup.replicas": "2", "probing.rebalance.interval.ms": "600000",
                   "built.in.metrics.version": "latest", "max.task.idle.ms": "0"}
    if v >= (2, 7):
        values["task.timeout.ms"] = "300000"
    if v >= (3, 9):
        values["log.summary.interval.ms"] = "120000"
    if v >= (4, 1):
        values["group.protocol"] = "classic"
    if instance_id:
        values["group.instance.id"] = instance_id  # passed through to the main consumer
    return _dump(values)


def consumer_config(version: str, client_id: str, group_id: str | None, isolation: str, instance_id: str | None,
                    restore: bool) -> str:
    v = parse_version(version)
    values = dict(_COMMON) | {
        "allow.auto.create.topics": "false" if v >= (2, 3) else None,
        "auto.commit.interval.ms": "5000",
        "auto.offset.reset": "none" if restore else "earliest",
        "check.crcs": "true",
        "client.id": client_id,
        "client.rack": "",
        "default.api.timeout.ms": "60000",
        "enable.auto.commit": "false",
        "exclude.internal.topics": "true",
        "fetch.max.bytes": "52428800",
        "fetch.max.wait.ms": "500",
        "fetch.min.bytes": "1",
        "group.id": group_id if group_id is not None else ("null" if v >= (2, 2) else ""),
        "heartbeat.interval.ms": "3000",
        "interceptor.classes": "[]",
        "isolation.level": isolation,
        "key.deserializer": _BYTES_DE,
        "max.partition.fetch.bytes": "1048576",
        "max.poll.interval.ms": "300000",
        "max.poll.records": "1000",
        "partition.assignment.strategy": "[org.apache.kafka.streams.processor.internals.StreamsPartitionAssignor]"
        if not restore else "[class org.apache.kafka.clients.consumer.RangeAssignor]",
        "session.timeout.ms": "45000" if v >= (3, 0) else "10000",
        "value.deserializer": _BYTES_DE,
    }
    if v >= (2, 3):
        values["group.instance.id"] = instance_id if (instance_id and not restore) else "null"
    if v >= (4, 0):
        values["group.protocol"] = "classic"
    return _dump({k: x for k, x in values.items() if x is not None})


def producer_config(version: str, client_id: str, transactional_id: str | None) -> str:
    values = dict(_COMMON) | {
        "acks": "-1" if transactional_id else "1",
        "batch.size": "16384",
        "buffer.memory": "33554432",
        "client.id": client_id,
        "compression.type": "none",
        "delivery.timeout.ms": "2147483647",
        "enable.idempotence": "true" if transactional_id else "false",
        "interceptor.classes": "[]",
        "key.serializer": _BYTES_SER,
        "linger.ms": "100",
        "max.block.ms": "60000",
        "max.in.flight.requests.per.connection": "5",
        "max.request.size": "1048576",
        "retries": "2147483647",
        "transaction.timeout.ms": "10000",
        "transactional.id": transactional_id or "null",
        "value.serializer": _BYTES_SER,
    }
    return _dump(values)


def admin_config(version: str, client_id: str) -> str:
    values = {k: _COMMON[k] for k in ("bootstrap.servers", "metadata.max.age.ms", "metric.reporters", "metrics.num.samples",
                                      "metrics.recording.level", "metrics.sample.window.ms", "receive.buffer.bytes",
                                      "reconnect.backoff.max.ms", "reconnect.backoff.ms", "request.timeout.ms",
                                      "retry.backoff.ms", "security.protocol", "send.buffer.bytes")}
    values |= {"client.id": client_id, "connections.max.idle.ms": "300000", "retries": "2147483647",
               "default.api.timeout.ms": "60000"}
    return _dump(values)
