"""Time edge cases: time-only layouts (date from bundle.toml or mtime, midnight rollover), DST gap and
overlap, hosts in different zones, and clock offsets. One bundle, one parse (see docs/time.md)."""

from __future__ import annotations

import os
from datetime import datetime

import pytest

from support import REPO
from toolkit.bundle import open_bundle
from toolkit.ingest import parse_bundle

QUICK = "{} INFO  org.apache.kafka.streams.processor.internals.StreamThread                  - stream-thread [wc-StreamThread-1] {}\n"
KAFKA = "[{}] INFO stream-thread [a-StreamThread-1] {} (org.apache.kafka.streams.processor.internals.StreamThread)\n"
STACK = "java.lang.IllegalStateException: boom\n\tat org.apache.kafka.streams.KafkaStreams.start(KafkaStreams.java:1)\n"

TOML = """
[defaults]
timezone = "UTC"
[hosts.quick-config]
timezone = "Europe/Berlin"
date = "2026-03-07"
[hosts.quick-mtime]
timezone = "America/New_York"
[hosts.quick-dst]
timezone = "Europe/Berlin"
date = "2026-10-25"
[hosts.berlin]
timezone = "Europe/Berlin"
[hosts.new-york]
timezone = "America/New_York"
[hosts.tokyo]
timezone = "Asia/Tokyo"
[hosts.ahead]
clock_offset_ms = 90000
[hosts.behind]
clock_offset_ms = -2500
"""


def utc(*a) -> datetime:
    """Naive UTC, as Spark returns timestamps with the session zone at UTC."""
    return datetime(*a)


@pytest.fixture(scope="module")
def ts(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("time-bundle")
    (root / "bundle.toml").write_text(TOML)

    def write(rel: str, text: str, mtime: datetime | None = None) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if mtime:
            stamp = (mtime - datetime(1970, 1, 1)).total_seconds()
            os.utime(path, (stamp, stamp))

    # Time only, date from bundle.toml: the file starts on 2026-03-07 and crosses two midnights.
    write("quick-config/app.log", "".join([
        QUICK.format("23:59:58,000", "a"),
        QUICK.format("23:59:59,500", "b"),
        STACK,
        QUICK.format("00:00:01,000", "c: next day"),
        QUICK.format("00:00:00,500", "d: 0.5 s back, not a new day"),
        QUICK.format("12:00:00,000", "e"),
        QUICK.format("23:59:59,000", "f"),
        QUICK.format("00:00:02,000", "g: day after"),
    ]))
    # Time only, no date: the modification date is the date of the LAST record (host zone).
    write("quick-mtime/app.log", QUICK.format("22:00:00,000", "a") + QUICK.format("23:30:00,000", "b")
          + QUICK.format("01:15:00,000", "c"), mtime=utc(2026, 1, 16, 12, 0))
    write("quick-mtime/other.log", QUICK.format("10:00:00,000", "x"), mtime=utc(2026, 1, 16, 12, 0))
    # Time only across the autumn change: 02:59 CEST then 02:01 CET (the repeated hour).
    write("quick-dst/app.log", QUICK.format("01:59:00,000", "a") + QUICK.format("02:59:00,000", "b")
          + QUICK.format("02:01:00,000", "c") + QUICK.format("03:00:00,000", "d"))
    # Local zone DST: the spring gap (02:30 does not exist) and the autumn overlap (02:30 happens twice).
    write("berlin/app.log", "".join(KAFKA.format(t, m) for t, m in [
        ("2026-03-29 01:59:59,000", "before the gap"),
        ("2026-03-29 02:30:00,000", "inside the gap"),
        ("2026-03-29 03:00:00,000", "after the gap"),
        ("2026-10-25 01:59:59,000", "before the overlap"),
        ("2026-10-25 02:30:00,000", "ambiguous"),
        ("2026-10-25 03:00:00,000", "after the overlap"),
        ("2026-01-15 15:00:00,000", "same instant as the other zones"),
    ]))
    write("new-york/app.log", KAFKA.format("2026-01-15 09:00:00,000", "same instant"))
    write("tokyo/app.log", KAFKA.format("2026-01-15 23:00:00,000", "same instant"))
    write("ahead/app.log", KAFKA.format("2026-01-15 14:01:30,000", "clock 90 s fast"))
    write("behind/app.log", KAFKA.format("2026-01-15 13:59:57,500", "clock 2.5 s slow"))
    # journalctl -o short-iso-precise before a time-only logback line: the wrapper's stamp, to the microsecond.
    write("ahead/journal.log", (REPO / "tests" / "bundles" / "alos-reprocessing-2.8.2-journald-logback-info" / "settle-1"
                                / "journal-settle-1-2.log").read_text(encoding="utf-8").splitlines(keepends=True)[0])
    # A clock that steps back by an hour mid-file (NTP): kept as printed, in line order.
    write("jumpy/app.log", "".join(KAFKA.format(t, m) for t, m in [
        ("2026-01-15 14:00:00,000", "a"), ("2026-01-15 14:30:00,000", "b"), ("2026-01-15 13:35:00,000", "c")]))

    out = tmp_path_factory.mktemp("time-out")
    bundle = open_bundle(root, out / "work")
    _, report, records = parse_bundle(spark, bundle, out)
    assert all(f.accounted for f in report.files)
    return {(r.source, r.line_no): r for r in records.collect()}


def test_time_only_date_from_bundle_toml_rolls_over_midnight(ts):
    f = "quick-config/app.log"
    # Berlin in March is UTC+1.
    assert ts[(f, 1)].ts == utc(2026, 3, 7, 22, 59, 58)
    assert ts[(f, 2)].ts == utc(2026, 3, 7, 22, 59, 59, 500000)
    assert ts[(f, 2)].stack.startswith("java.lang.IllegalStateException")  # continuation lines do not count
    assert ts[(f, 5)].ts == utc(2026, 3, 7, 23, 0, 1)                       # 00:00:01 on the 8th
    assert ts[(f, 6)].ts == utc(2026, 3, 7, 23, 0, 0, 500000)               # small step back: same day
    assert ts[(f, 7)].ts == utc(2026, 3, 8, 11, 0, 0)
    assert ts[(f, 8)].ts == utc(2026, 3, 8, 22, 59, 59)
    assert ts[(f, 9)].ts == utc(2026, 3, 8, 23, 0, 2)                       # 00:00:02 on the 9th
    assert {ts[(f, n)].ts_quality for n in (1, 2, 5, 6, 7, 8, 9)} == {"date_inferred"}


def test_time_only_date_from_mtime_counts_back_from_the_last_record(ts):
    # mtime 2026-01-16 12:00 UTC = 07:00 in New York (UTC-5): the last record is on the 16th.
    assert ts[("quick-mtime/app.log", 1)].ts == utc(2026, 1, 16, 3, 0)   # 22:00 on the 15th
    assert ts[("quick-mtime/app.log", 2)].ts == utc(2026, 1, 16, 4, 30)  # 23:30 on the 15th
    assert ts[("quick-mtime/app.log", 3)].ts == utc(2026, 1, 16, 6, 15)  # 01:15 on the 16th
    assert ts[("quick-mtime/other.log", 1)].ts == utc(2026, 1, 16, 15, 0)


def test_time_only_repeated_autumn_hour_is_not_a_new_day(ts):
    f = "quick-dst/app.log"
    assert ts[(f, 1)].ts == utc(2026, 10, 24, 23, 59)  # 01:59 CEST
    assert ts[(f, 2)].ts == utc(2026, 10, 25, 0, 59)   # 02:59, ambiguous: the earlier (CEST) reading
    assert ts[(f, 3)].ts == utc(2026, 10, 25, 0, 1)    # 02:01 again: also read as CEST; goes back 58 min
    assert ts[(f, 4)].ts == utc(2026, 10, 25, 2, 0)    # 03:00 CET


def test_dst_gap_and_overlap_in_a_local_zone(ts):
    f = "berlin/app.log"
    assert ts[(f, 1)].ts == utc(2026, 3, 29, 0, 59, 59)
    assert ts[(f, 2)].ts == utc(2026, 3, 29, 1, 30)     # 02:30 does not exist: moved forward by the gap (03:30 CEST)
    assert ts[(f, 3)].ts == utc(2026, 3, 29, 1, 0)
    assert ts[(f, 4)].ts == utc(2026, 10, 24, 23, 59, 59)
    assert ts[(f, 5)].ts == utc(2026, 10, 25, 0, 30)    # 02:30 twice: the earlier offset (CEST, UTC+2)
    assert ts[(f, 6)].ts == utc(2026, 10, 25, 2, 0)
    assert {ts[(f, n)].ts_quality for n in range(1, 8)} == {"exact"}


def test_hosts_in_different_zones_agree_on_one_instant(ts):
    same = {ts[(s, n)].ts for s, n in [("berlin/app.log", 7), ("new-york/app.log", 1), ("tokyo/app.log", 1)]}
    assert same == {utc(2026, 1, 15, 14, 0)}
    assert ts[("tokyo/app.log", 1)].ts_raw == "2026-01-15 23:00:00,000"  # the raw text is kept


def test_clock_offsets_are_subtracted(ts):
    assert ts[("ahead/app.log", 1)].ts == utc(2026, 1, 15, 14, 0)
    assert ts[("behind/app.log", 1)].ts == utc(2026, 1, 15, 14, 0)


def test_a_clock_offset_keeps_the_microseconds_of_a_stamp(ts):
    # 14:30:09.450180 printed by a clock 90 s fast (the journal line names settle-1, which has no section:
    # the file's host's offset applies).
    assert ts[("ahead/journal.log", 1)].ts == utc(2022, 9, 14, 14, 28, 39, 450180)
    assert ts[("ahead/journal.log", 1)].ts_quality == "wrapper"


def test_a_clock_step_mid_file_keeps_line_order_and_printed_times(ts):
    f = "jumpy/app.log"
    assert [ts[(f, n)].ts for n in (1, 2, 3)] == [utc(2026, 1, 15, 14, 0), utc(2026, 1, 15, 14, 30),
                                                  utc(2026, 1, 15, 13, 35)]


#: The first record of the EOS sample's orders-agg-0, which prints Berlin time (with its config dump).
BERLIN_HEAD = "".join((REPO / "sample_logs" / "kafka-eos-stale-checkpoint" / "orders-agg-0" / "app.log")
                      .read_text(encoding="utf-8").splitlines(keepends=True)[:3])


def test_the_bundles_own_zones_win_over_the_command_lines(tmp_path):
    """[hosts.NAME] timezone, else [defaults] timezone, else --timezone, else UTC (docs/time.md)."""
    def zones(toml: str | None, cli_zone: str | None) -> dict[str, str]:
        root = tmp_path / f"b{len(list(tmp_path.iterdir()))}"
        for host in ("own", "plain"):
            (root / host).mkdir(parents=True)
            (root / host / "app.log").write_text(BERLIN_HEAD)
        if toml is not None:
            (root / "bundle.toml").write_text(toml)
        bundle = open_bundle(root, root.with_name(root.name + "-work"), timezone=cli_zone)
        return {host: bundle.settings_for(host).timezone for host in ("own", "plain")}

    own = '[hosts.own]\ntimezone = "Asia/Tokyo"\n'
    assert zones('[defaults]\ntimezone = "Europe/Berlin"\n' + own, "UTC") == {"own": "Asia/Tokyo", "plain": "Europe/Berlin"}
    assert zones('[defaults]\nclock_offset_ms = 0\n' + own, "America/New_York") == {
        "own": "Asia/Tokyo", "plain": "America/New_York"}
    assert zones(None, "America/New_York") == {"own": "America/New_York", "plain": "America/New_York"}
    assert zones(own, None) == {"own": "Asia/Tokyo", "plain": "UTC"}


def test_timezone_flag_does_not_override_the_bundles_default_zone(spark, tmp_path):
    from toolkit.cli import EXIT_OK, main

    root = tmp_path / "bundle"
    (root / "orders-agg-0").mkdir(parents=True)
    (root / "orders-agg-0" / "app.log").write_text(BERLIN_HEAD)
    (root / "bundle.toml").write_text('[defaults]\ntimezone = "Europe/Berlin"\n')
    firsts = []
    for flags in ([], ["--timezone", "UTC"]):
        out = tmp_path / f"out{len(firsts)}"
        assert main(["parse", str(root), "--out", str(out), "--quiet", "--no-cache", *flags]) == EXIT_OK
        (first,) = spark.read.parquet(str(out / "records.parquet")).where("line_no = 1").collect()
        firsts.append((first.ts_raw, first.ts))
    # 10:00 in Berlin (UTC+1 in March) is 09:00 UTC, with or without --timezone UTC.
    assert firsts == [("2026-03-07 10:00:00,000", utc(2026, 3, 7, 9, 0))] * 2
