"""Layouts are data: every sample line in the layout catalogue parses to its fields, in Python
(detection) and on Spark (the real parser)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from toolkit.bundle import open_bundle
from toolkit.layouts import detect_lines, load_layouts, parse_logs

CAT = load_layouts()
TEXT_LAYOUTS = [l for l in CAT.layouts if not l.json]


@pytest.mark.parametrize("layout", TEXT_LAYOUTS, ids=lambda l: l.id)
def test_layout_samples_match_their_fields(layout):
    assert layout.samples, f"{layout.id} has no sample line"
    for sample in layout.samples:
        fields = layout.fields(sample["line"])
        assert fields, f"{layout.id} does not match its own sample {sample['line']!r}"
        for name in ("ts", "level", "thread", "logger", "message"):
            if name in sample:
                got = fields[name]
                got = got.strip() if name == "thread" else got
                assert got == sample[name], (layout.id, name, got)


@pytest.mark.parametrize("layout", CAT.layouts, ids=lambda l: l.id)
def test_each_layout_is_detected_on_its_own_samples(layout):
    det = detect_lines([s["line"] for s in layout.samples])
    assert det.layout == layout.id
    assert det.wrappers == ()


@pytest.mark.parametrize("wrapper", list(CAT.wrappers.values()), ids=lambda w: w.id)
def test_wrappers_are_detected_and_stripped(wrapper):
    det = detect_lines([wrapper.sample] * 3)
    assert wrapper.id in det.wrappers
    assert det.layout == "kafka-log4j"


def test_a_date_column_before_a_bar_is_no_compose_service():
    """``%d{yyyy-MM-dd} | %d{HH:mm:ss.SSS} | ...``: the date is the layout's own column. Taken for a compose
    service name, it was stripped and the records were dated from the file's modification time."""
    line = ("2022-12-07 | 16:24:08.414 | DEBUG | orders-app-StreamThread-1 | org.apache.kafka.clients.ClientUtils"
            " | Resolved host 10.56.132.112 as 10.56.132.112")
    det = detect_lines([line] * 3)
    assert det.wrappers == ()
    assert det.layout == "pipe-columns"
    assert CAT.layout("pipe-columns").fields(line)["ts"] == "2022-12-07 | 16:24:08.414"


def test_detection_prefers_nothing_over_a_wrong_guess():
    det = detect_lines(["hello world", "this is not a log line", "12345"])
    assert det.layout is None


def test_every_sample_parses_on_spark(spark, tmp_path):
    """One file per layout; the Spark parser must give each sample's fields back."""
    (tmp_path / "bundle.toml").write_text('[defaults]\ntimezone = "UTC"\ndate = "2026-01-05"\n')
    for layout in CAT.layouts:
        host = tmp_path / f"host-{layout.id}"
        host.mkdir()
        (host / "app.log").write_text("\n".join(s["line"] for s in layout.samples) + "\n")
    bundle = open_bundle(tmp_path, tmp_path.parent / f"{tmp_path.name}-work")
    parsed = parse_logs(spark, bundle)
    rows = {(r.source, r.line_no): r for r in parsed.records.collect()}
    for layout in CAT.layouts:
        source = f"host-{layout.id}/app.log"
        assert parsed.detections[source].layout == layout.id
        for i, sample in enumerate(layout.samples, start=1):
            rec = rows[(source, i)]
            assert rec.layout == layout.id
            assert rec.host == f"host-{layout.id}"
            assert rec.message == sample["message"]
            if "level" in sample:
                assert rec.level == sample["level"]
            if sample.get("thread"):
                assert rec.thread == sample["thread"]
            if sample.get("logger"):
                assert rec.logger == sample["logger"]
            if "ts" in sample:
                assert rec.ts is not None, (layout.id, sample["ts"])
                assert rec.ts_raw == sample["ts"]


def test_timestamps_are_converted_to_utc(spark, tmp_path):
    """Local times use the host zone from bundle.toml (DST included); offsets in the text win."""
    (tmp_path / "bundle.toml").write_text(
        '[hosts.berlin]\ntimezone = "Europe/Berlin"\n[hosts.offset]\ntimezone = "America/New_York"\n'
        '[hosts.skewed]\nclock_offset_ms = 1500\n'
    )
    for host in ("berlin", "offset", "skewed"):
        (tmp_path / host).mkdir()
    kafka = "[{}] INFO stream-thread [a-StreamThread-1] Starting (org.apache.kafka.streams.processor.internals.StreamThread)\n"
    (tmp_path / "berlin" / "app.log").write_text(kafka.format("2026-03-29 01:30:00,000") + kafka.format("2026-03-29 03:30:00,000"))
    (tmp_path / "offset" / "app.log").write_text(
        "2024-03-07T14:02:11.408+01:00  INFO 4242 --- [-StreamThread-1] o.a.k.s.p.internals.StreamThread         : "
        "stream-thread [a-StreamThread-1] Starting\n"
    )
    (tmp_path / "skewed" / "app.log").write_text(kafka.format("2026-01-05 10:00:01,500"))
    bundle = open_bundle(tmp_path, tmp_path.parent / f"{tmp_path.name}-work")
    got = {(r.source, r.line_no): r.ts for r in parse_logs(spark, bundle).records.collect()}
    utc = lambda *a: datetime(*a, tzinfo=timezone.utc).replace(tzinfo=None)  # noqa: E731
    # Berlin switches to CEST at 02:00 on 2026-03-29: 01:30 CET = 00:30 UTC, 03:30 CEST = 01:30 UTC.
    assert got[("berlin/app.log", 1)] == utc(2026, 3, 29, 0, 30)
    assert got[("berlin/app.log", 2)] == utc(2026, 3, 29, 1, 30)
    assert got[("offset/app.log", 1)] == utc(2024, 3, 7, 13, 2, 11, 408000)
    assert got[("skewed/app.log", 1)] == utc(2026, 1, 5, 10, 0, 0)


def test_every_timestamped_line_starts_a_record_whatever_its_shape(spark, tmp_path):
    """Lines read one by one: a foreign or indented stamped line is a record start, never a continuation;
    java.util.logging's level line, time-only logback, docker's json-file driver and epoch JSON are read."""
    (tmp_path / "bundle.toml").write_text('[defaults]\ntimezone = "UTC"\n[hosts.timeonly]\ndate = "2025-06-12"\n')
    files = {
        "mixed": [
            "[2024-03-07 14:02:11,408] INFO stream-thread [a-StreamThread-1] Starting "
            "(org.apache.kafka.streams.processor.internals.StreamThread)",
            "\tat org.apache.kafka.streams.processor.internals.StreamThread.run(StreamThread.java:550)",
            "2024-03-07 14:02:12.001  INFO 4242 --- [-StreamThread-1] o.a.k.s.p.internals.StreamThread         : "
            "stream-thread [a-StreamThread-1] State transition from CREATED to STARTING",
            "      [2024-03-07 14:02:13,000] INFO stream-client [a] State transition from CREATED to REBALANCING "
            "(org.apache.kafka.streams.KafkaStreams)",
            'Exception in thread "a-StreamThread-1" java.lang.IllegalStateException: boom',
            "\tat org.apache.kafka.streams.processor.internals.StreamThread.run(StreamThread.java:550)",
        ],
        "jul": [
            "Mar 7, 2024 2:02:11 PM org.apache.kafka.streams.KafkaStreams setState",
            "INFO: stream-client [a] State transition from CREATED to REBALANCING",
        ],
        "timeonly": ["06:21:09 INFO  [STREAMS] StreamThread - stream-thread [a-StreamThread-1] Starting"],
        "dockerjson": [
            '{"log":"2024-03-07 14:02:11.408  INFO 1 --- [           main] o.a.k.s.KafkaStreams                     : '
            'stream-client [a] State transition from CREATED to REBALANCING\\n","stream":"stdout",'
            '"time":"2024-03-07T14:02:11.409123Z"}',
            '{"log":"\\u0009at org.apache.kafka.streams.KafkaStreams.start(KafkaStreams.java:1)\\n","stream":"stdout",'
            '"time":"2024-03-07T14:02:11.409200Z"}',
        ],
        "epoch": ['{"level":"ERROR","logger":"processing.CSAS_7","time":1647355211804,"message":"type 2 error"}'],
    }
    for host, lines in files.items():
        (tmp_path / host).mkdir()
        (tmp_path / host / "app.log").write_text("\n".join(lines) + "\n")
    bundle = open_bundle(tmp_path, tmp_path.parent / f"{tmp_path.name}-work")
    rows = {(r.source, r.line_no): r for r in parse_logs(spark, bundle).records.collect()}
    utc = lambda *a: datetime(*a, tzinfo=timezone.utc).replace(tzinfo=None)  # noqa: E731

    assert sorted(n for s, n in rows if s == "mixed/app.log") == [1, 3, 4, 5]
    assert rows[("mixed/app.log", 1)].line_count == 2 and rows[("mixed/app.log", 5)].line_count == 2
    foreign = rows[("mixed/app.log", 3)]
    assert (foreign.layout, foreign.ts, foreign.level) == ("generic", utc(2024, 3, 7, 14, 2, 12, 1000), "INFO")
    assert foreign.logger == "o.a.k.s.p.internals.StreamThread"
    assert foreign.message == "stream-thread [a-StreamThread-1] State transition from CREATED to STARTING"
    assert rows[("mixed/app.log", 4)].ts == utc(2024, 3, 7, 14, 2, 13)
    assert rows[("mixed/app.log", 5)].message.startswith('Exception in thread "a-StreamThread-1"')

    jul = rows[("jul/app.log", 1)]
    assert (jul.ts, jul.level, jul.line_count) == (utc(2024, 3, 7, 14, 2, 11), "INFO", 2)
    assert jul.message == "stream-client [a] State transition from CREATED to REBALANCING"

    timeonly = rows[("timeonly/app.log", 1)]
    assert (timeonly.ts, timeonly.thread, timeonly.logger) == (utc(2025, 6, 12, 6, 21, 9), "STREAMS", "StreamThread")

    docker = rows[("dockerjson/app.log", 1)]
    assert (docker.ts, docker.logger, docker.line_count) == (utc(2024, 3, 7, 14, 2, 11, 408000), "o.a.k.s.KafkaStreams", 2)
    assert docker.stack.startswith("\tat org.apache.kafka.streams.KafkaStreams.start")

    assert rows[("epoch/app.log", 1)].ts == utc(2022, 3, 15, 14, 40, 11, 804000)
