"""Large inputs on a cluster: gzip logs read by Spark itself, damaged ones recovered on the driver,
per-file windows run per chunk of lines, and a big single-split file parsed by several tasks.

The thresholds are module constants; the tests lower them so that small real-format files cross
every chunk border and split a gzip log over several tasks, and compare with the default run.
"""

from __future__ import annotations

import gzip
import os
import zlib
from datetime import datetime, timedelta

import pytest
from pyspark.sql import functions as F

from toolkit.layouts import reading, records as record_pass
from toolkit.bundle import gzip_logs, open_bundle
from toolkit.ingest import parse_bundle
from toolkit.layouts import parse_logs

THREAD = "org.apache.kafka.streams.processor.internals.StreamThread"
KAFKA = "[{}] {} stream-thread [orders-agg-StreamThread-1] {} (" + THREAD + ")\n"
QUICK = "{} INFO  " + THREAD.ljust(60) + " - stream-thread [wc-StreamThread-1] {}\n"
STATES = ("CREATED", "STARTING", "PARTITIONS_ASSIGNED", "RUNNING", "PARTITIONS_REVOKED")
ERROR = "Encountered the following exception during processing and the thread is going to shut down: "
STACK = (
    "org.apache.kafka.common.errors.TimeoutException: Timeout expired after 60000ms while awaiting InitProducerId\n"
    "\tat org.apache.kafka.clients.producer.internals.TransactionManager.initializeTransactions(TransactionManager.java:301)\n"
    "\tat org.apache.kafka.clients.producer.KafkaProducer.initTransactions(KafkaProducer.java:597)\n"
    "\tat org.apache.kafka.streams.processor.internals.StreamsProducer.initTransaction(StreamsProducer.java:189)\n"
    "\tat org.apache.kafka.streams.processor.internals.StreamThread.run(StreamThread.java:569)\n"
)


def kafka_log(records: int, start_minute: int = 0) -> str:
    """Kafka's own layout; every seventh record is an error with a five-line stack trace."""
    out = []
    for i in range(records):
        minute = start_minute + i
        stamp = f"2026-03-07 {10 + minute // 3600 % 12:02d}:{minute // 60 % 60:02d}:{minute % 60:02d},{i % 1000:03d}"
        if i % 7 == 3:
            out.append(KAFKA.format(stamp, "ERROR", ERROR) + STACK)
        else:
            a, b = STATES[i % 5], STATES[(i + 1) % 5]
            out.append(KAFKA.format(stamp, "INFO", f"State transition from {a} to {b}"))
    return "".join(out)


def quickstart_across_midnight(records: int) -> str:
    """A time-only layout: the day turns twice; some records carry a stack trace."""
    out = []
    for i in range(records):
        second = (23 * 3600 + 59 * 60 + i * 60) % 86400  # from 23:59:00, a minute apart
        stamp = f"{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d},{i % 1000:03d}"
        a, b = STATES[i % 5], STATES[(i + 1) % 5]
        out.append(QUICK.format(stamp, f"State transition from {a} to {b}"))
        if i % 4 == 1:
            out.append(STACK)
    return "".join(out)


def rows(records) -> list[tuple]:
    cols = ["source", "line_no", "host", "ts", "ts_raw", "level", "thread", "logger", "message", "stack", "layout",
            "ts_quality", "line_count"]
    return sorted(tuple(r) for r in records.select(*cols).collect())


@pytest.fixture(scope="module")
def windows_bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("chunked")
    (root / "bundle.toml").write_text('[defaults]\ntimezone = "UTC"\n[hosts.quick-config]\n'
                                      'timezone = "Europe/Berlin"\ndate = "2026-03-07"\n')
    for host in ("orders-agg-0", "quick-config", "quick-mtime"):
        (root / host).mkdir()
    # Starts inside a stack trace longer than a chunk: those lines have no record above them.
    (root / "orders-agg-0" / "app.log").write_text(STACK + STACK + kafka_log(60))
    # A record a minute: the day turns at record 1 and again at record 1441.
    day = quickstart_across_midnight(1460)
    (root / "quick-config" / "app.log").write_text(day)
    (root / "quick-mtime" / "app.log").write_text(day)
    stamp = datetime(2026, 3, 9, 12).timestamp()
    os.utime(root / "quick-mtime" / "app.log", (stamp, stamp))
    return root


def test_chunked_windows_give_the_same_records_as_one_window_per_file(spark, windows_bundle, tmp_path, monkeypatch):
    bundle = open_bundle(windows_bundle, tmp_path / "work-whole")
    whole = rows(parse_logs(spark, bundle).records)

    # The stack traces and the midnights must cross chunk borders for this test to mean anything.
    by_source = {}
    for r in whole:
        by_source.setdefault(r[0], []).append(r)
    chunk = 5
    crossing = [r for r in whole if r[1] // chunk != (r[1] + r[12] - 1) // chunk]
    assert len(crossing) > 100
    for source in ("quick-config/app.log", "quick-mtime/app.log"):
        stamps = [r[3] for r in by_source[source] if r[3]]
        assert max(stamps) - min(stamps) > timedelta(hours=24)  # without the rollover: under a day
    assert max(r[3] for r in by_source["quick-mtime/app.log"] if r[3]).date().isoformat() == "2026-03-09"
    assert [r[1] for r in by_source["orders-agg-0/app.log"] if r[10] == "unparsed"] == list(range(1, 11))

    monkeypatch.setattr(record_pass, "WINDOW_CHUNK_LINES", chunk)
    bundle = open_bundle(windows_bundle, tmp_path / "work-chunked")
    assert rows(parse_logs(spark, bundle).records) == whole


def test_big_gzip_is_parsed_by_several_tasks_with_the_same_records(spark, tmp_path, monkeypatch):
    text = kafka_log(30_000)
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    (plain / "orders-agg-0").mkdir(parents=True)
    (packed / "orders-agg-0").mkdir(parents=True)
    (plain / "orders-agg-0" / "app.log").write_text(text)
    (packed / "orders-agg-0" / "app.log").write_bytes(gzip.compress(text.encode(), mtime=0))  # no .gz in the name

    expected = rows(parse_logs(spark, open_bundle(plain, tmp_path / "work-plain")).records)

    monkeypatch.setattr(record_pass, "SPREAD_SPLIT_LINES", 10_000)
    monkeypatch.setattr(reading, "SPREAD_TASK_LINES", 5_000)
    bundle = open_bundle(packed, tmp_path / "work-packed")
    (log,) = bundle.logs
    assert log.gzip and log.local_path.name.endswith(".gz")  # Spark decompresses it, the driver did not
    assert not (tmp_path / "work-packed" / "gunzipped").exists()
    path = str(log.local_path.resolve())
    # One split (a gzip is not splittable) of more lines than the lowered threshold: the parse spreads its
    # lines over tasks before the per-line work, and must number them as the plain file's.
    per_split = reading.raw_lines(spark, [path]).groupBy("_uri", "block_start").count().collect()
    assert len(per_split) == 1 and per_split[0]["count"] > record_pass.SPREAD_SPLIT_LINES
    assert rows(parse_logs(spark, bundle).records) == expected


def test_intact_gzip_is_read_by_spark_and_damaged_ones_are_recovered_on_the_driver(spark, tmp_path, monkeypatch):
    # Damage beyond the part checked when the bundle is opened is found by Spark's read.
    monkeypatch.setattr(gzip_logs, "HEAD_CHECK_BYTES", 4096)
    first, second = kafka_log(3000), kafka_log(2000, start_minute=5000)
    whole = first + second
    root = tmp_path / "bundle"
    (root / "orders-agg-0").mkdir(parents=True)
    # `cat a.gz b.gz`: two gzip members, one text.
    (root / "orders-agg-0" / "app.log.gz").write_bytes(gzip.compress(first.encode()) + gzip.compress(second.encode()))
    full = gzip.compress(whole.encode(), mtime=0)
    flipped = bytearray(full)
    flipped[len(full) // 2] ^= 0x55  # the trailer still declares a sane size: nothing to see when opened
    (root / "orders-agg-0" / "app.log.1.gz").write_bytes(bytes(flipped))
    cut = full[: len(full) * 3 // 5]
    (root / "orders-agg-0" / "app.log.2.gz").write_bytes(cut)

    bundle = open_bundle(root, tmp_path / "work")
    # A cut stream ends in deflate data, not a size: its last bytes usually read as a huge size, which
    # sends it to the driver at once; the flipped file is only found by reading it.
    assert {(p.source, p.problem) for p in bundle.problems} <= {("orders-agg-0/app.log.2.gz", "truncated or corrupt gzip")}
    spark_read = {f.source for f in bundle.logs if f.gzip and f.local_path.name.endswith(".gz")}
    assert {"orders-agg-0/app.log.gz", "orders-agg-0/app.log.1.gz"} <= spark_read

    bundle, report, records = parse_bundle(spark, bundle, tmp_path / "out")
    problems = {(p.source, p.problem) for p in report.problems}
    assert problems == {("orders-agg-0/app.log.1.gz", "truncated or corrupt gzip"),
                        ("orders-agg-0/app.log.2.gz", "truncated or corrupt gzip")}
    # Only the damaged files were decompressed on the driver.
    logs = {f.source: f for f in bundle.logs}
    assert sorted(p.name for p in (tmp_path / "work" / "gunzipped").iterdir()) == sorted(
        logs[s].local_path.name for s in ("orders-agg-0/app.log.1.gz", "orders-agg-0/app.log.2.gz"))
    assert logs["orders-agg-0/app.log.gz"].gzip

    files = {f.path: f for f in report.files}
    total = whole.count("\n")
    assert files["orders-agg-0/app.log.gz"].lines == total
    assert 0 < files["orders-agg-0/app.log.1.gz"].lines <= total
    recovered = zlib.decompressobj(wbits=31).decompress(cut)
    assert files["orders-agg-0/app.log.2.gz"].lines == len(recovered.decode().splitlines())
    assert 0 < files["orders-agg-0/app.log.2.gz"].lines < total
    assert all(f.accounted for f in report.files)

    # Line numbers run on across the second member, and the last record is the second text's last line.
    last = records.where(F.col("source") == "orders-agg-0/app.log.gz").orderBy(F.col("line_no").desc()).first()
    assert (last["line_no"], last["line_count"]) == (total, 1)
    assert last["message"] == (f"stream-thread [orders-agg-StreamThread-1] State transition from {STATES[1999 % 5]} "
                               f"to {STATES[2000 % 5]}")


def test_a_damaged_gzip_read_back_from_the_parse_cache_still_reports_its_damage(spark, tmp_path, monkeypatch):
    from toolkit.cache import ParseCache

    monkeypatch.setattr(gzip_logs, "HEAD_CHECK_BYTES", 4096)
    full = bytearray(gzip.compress(kafka_log(3000).encode(), mtime=0))
    full[len(full) // 2] ^= 0x55
    root = tmp_path / "bundle"
    (root / "orders-agg-0").mkdir(parents=True)
    (root / "orders-agg-0" / "app.log.gz").write_bytes(bytes(full))
    cache = ParseCache(tmp_path / "cache")

    reports = []
    for run in ("first", "second"):
        _, report, _ = parse_bundle(spark, root, tmp_path / run, cache=cache)
        reports.append(report)
    first, second = reports
    damage = [("orders-agg-0/app.log.gz", "truncated or corrupt gzip")]
    assert [(p.source, p.problem) for p in first.problems] == damage
    assert [(p.source, p.problem) for p in second.problems] == damage  # the records came from the cache
    assert second.files[0].lines == first.files[0].lines > 0
    assert second.files[0].accounted


@pytest.mark.timeout(600)
def test_a_record_with_a_megabyte_long_message_is_parsed_and_redacted(spark, tmp_path):
    """One record (Kafka's own layout) whose message holds a 2 MB token and a URL with a password:
    every line is accounted for and the password is gone. Redaction used to rescan such a token from
    every position and never finished."""
    token = "Ab1+" * 500_000
    (tmp_path / "h-0").mkdir()
    (tmp_path / "h-0" / "app.log").write_text(
        KAFKA.format("2026-03-07 10:00:00,000", "INFO", "State transition from CREATED to STARTING")
        + KAFKA.format("2026-03-07 10:00:01,000", "WARN", f"payload {token} from https://bob:pa55@host:8443/x")
        + KAFKA.format("2026-03-07 10:00:02,000", "INFO", "State transition from STARTING to RUNNING"))
    _, report, records = parse_bundle(spark, open_bundle(tmp_path), tmp_path / "out")
    assert report.totals["lines"] == 3 and report.totals["records"] == 3 and report.totals["unaccounted_files"] == 0
    long_one = records.where(F.col("level") == "WARN").select("message").first()["message"]
    assert long_one == f"stream-thread [orders-agg-StreamThread-1] payload {token} from https://bob:[redacted]@host:8443/x"


@pytest.mark.timeout(240)
def test_a_record_followed_by_a_long_block_of_blank_lines_is_parsed(spark, tmp_path):
    """Blank lines continue the record above them. Stripping the message's trailing newlines once
    rescanned a block of them from each newline (320,000 blank lines took 270 s)."""
    blank = 500_000
    (tmp_path / "h-0").mkdir()
    (tmp_path / "h-0" / "app.log").write_text(
        KAFKA.format("2026-03-07 10:00:00,000", "INFO", "State transition from CREATED to STARTING")
        + "\n" * blank + "more\n" + "\n" * 3
        + KAFKA.format("2026-03-07 10:00:01,000", "INFO", "State transition from STARTING to RUNNING"))
    _, report, records = parse_bundle(spark, open_bundle(tmp_path), tmp_path / "out")
    assert report.totals == {**report.totals, "lines": blank + 6, "records": 2, "continuation": blank + 4,
                             "unparsed": 0, "unaccounted_files": 0}
    first = records.orderBy("line_no").select("message").first()["message"]
    assert first == "stream-thread [orders-agg-StreamThread-1] State transition from CREATED to STARTING" \
        + "\n" * (blank + 1) + "more"
