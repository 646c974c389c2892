"""Times collected onto the driver do not depend on the driver's own time zone.

PySpark turns a collected timestamp into a naive datetime in the Python process's local zone; on a driver
in a zone with daylight saving time, differences across the change and times printed as UTC would be
off by an hour. These tests run the driver side under ``America/New_York`` (the JVM and the session stay
in UTC) on times straddling both changes of 2026: 2026-03-08 07:00 UTC (02:00 EST -> 03:00 EDT) and
2026-11-01 06:00 UTC (02:00 EDT -> 01:00 EST).
"""

from __future__ import annotations

import contextlib
import os
import time
from datetime import datetime, timedelta, timezone

import pytest

from pyspark.sql import functions as F

from support.timelines import ev, make_timeline
from toolkit import utc
from toolkit.detectors import run_detectors
from toolkit.detectors.base import iso_utc
from toolkit.detectors.common import all_rows, bounded, fmt_ts, rows, unix_millis, unix_seconds
from toolkit.detectors.preconditions import sql_timestamp

#: Pairs of UTC times one hour apart across a change of New York's offset.
SPRING = (datetime(2026, 3, 8, 6, 30), datetime(2026, 3, 8, 7, 30))   # 01:30 EST, 03:30 EDT
AUTUMN = (datetime(2026, 11, 1, 5, 30), datetime(2026, 11, 1, 6, 30))  # 01:30 EDT, 01:30 EST


@contextlib.contextmanager
def driver_zone(name: str):
    """The Python process (not the JVM) in time zone ``name`` for the duration."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = name
    time.tzset()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved
        time.tzset()


def _frame(spark):
    """Both pairs as timestamp literals (read by the UTC session, so not through Python's zone), top level
    and nested in a struct and an array."""
    lit = lambda t: f"TIMESTAMP'{t:%Y-%m-%d %H:%M:%S}'"  # noqa: E731
    selects = [f"SELECT '{name}' AS pair, {lit(a)} AS a, {lit(b)} AS b, named_struct('at', {lit(b)}) AS s, "
               f"array({lit(a)}, {lit(b)}) AS arr"
               for name, (a, b) in (("spring", SPRING), ("autumn", AUTUMN))]
    return spark.sql(" UNION ALL ".join(selects))


def test_the_zone_switch_reaches_python_only(spark):
    with driver_zone("America/New_York"):
        assert datetime(2026, 3, 8, 7, 30, tzinfo=timezone.utc).astimezone().hour == 3
        assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


@pytest.mark.parametrize("read", ["all_rows", "rows", "bounded", "collect"])
def test_collected_times_are_utc_under_a_dst_driver_zone(spark, read):
    df = _frame(spark).orderBy("pair")
    with driver_zone("America/New_York"):
        got = {"all_rows": lambda: all_rows(df, "pairs"), "rows": lambda: rows(df, order=["pair"]),
               "bounded": lambda: bounded(df, 10, ["pair"]).rows, "collect": lambda: utc.collect(df)}[read]()
        by_pair = {r.pair: r for r in got}
        for name, (a, b) in (("spring", SPRING), ("autumn", AUTUMN)):
            r = by_pair[name]
            assert (r.a, r.b) == (a, b)
            assert r.b - r.a == timedelta(hours=1)
            assert unix_seconds(r.b) - unix_seconds(r.a) == 3600
            assert unix_millis(r.b) - unix_millis(r.a) == 3_600_000
            assert r.s.at == b and list(r.arr) == [a, b]
            assert fmt_ts(r.b) == f"{b:%Y-%m-%d %H:%M:%S}.000 UTC"
            assert iso_utc(r.b) == f"{b:%Y-%m-%dT%H:%M:%S}.000Z"


def test_first_and_pandas_frames_are_utc_under_a_dst_driver_zone(spark):
    df = _frame(spark).orderBy("pair")
    with driver_zone("America/New_York"):
        assert utc.first(df.where("pair = 'autumn'")).b == AUTUMN[1]
        pdf = utc.to_pandas(df.select("pair", "a", "b"))
    autumn = pdf[pdf["pair"] == "autumn"].iloc[0]
    assert (autumn["b"] - autumn["a"]).total_seconds() == 3600
    assert autumn["b"].to_pydatetime() == AUTUMN[1]


def test_times_given_back_to_spark_are_utc_under_a_dst_driver_zone(spark):
    with driver_zone("America/New_York"):
        for t in (*SPRING, *AUTUMN):
            aware = t.replace(tzinfo=timezone.utc).astimezone()  # the same instant, in New York
            got = spark.range(1).selectExpr(f"CAST({sql_timestamp(t)} AS STRING) AS sql").select(
                "sql", utc.lit(t).cast("string").alias("lit"), utc.lit(aware).cast("string").alias("aware")).first()
            assert got.sql == got.lit == got.aware == f"{t:%Y-%m-%d %H:%M:%S}"
            assert unix_seconds(aware) == unix_seconds(t)


def test_a_detector_measures_and_prints_across_a_dst_change_in_utc(spark):
    # The data is built while the driver is in UTC; only the detector runs in New York's zone.
    crash_at, back_at = SPRING
    runs = [{"host": "h0", "run_id": "h0#1", "run_no": 1, "product": "kafka-streams", "start": crash_at - timedelta(hours=1),
             "end": crash_at, "end_kind": "crash", "end_source": "h0/app.log", "end_line_no": 10,
             "source": "h0/app.log", "line_no": 1},
            {"host": "h0", "run_id": "h0#2", "run_no": 2, "product": "kafka-streams", "start": back_at, "end": None,
             "end_kind": "unknown", "source": "h0/app.log", "line_no": 20}]
    tl = make_timeline(spark, process_runs=runs)
    with driver_zone("America/New_York"):
        (finding,) = [f for f in run_detectors(tl, only=["unclean-shutdown"]) if f.detector == "unclean-shutdown"]
        doc = finding.to_json()
    assert "ended at 2026-03-08 06:30:00.000 UTC" in finding.explanation
    assert "the next run started 3600 s later" in finding.explanation
    assert doc["ts"] == "2026-03-08T06:30:00.000Z"


def test_a_detector_gives_collected_times_back_to_spark_in_utc(spark):
    # A storm of generations across the spring change; a lost partition inside it makes it a warning. The storm
    # window goes back to Spark as a literal of the collected start.
    base = SPRING[0] + timedelta(minutes=28)  # 06:58 UTC
    gens = [{"group_id": "app", "generation": g, "host": f"h{g % 3}", "run_id": f"h{g % 3}#1",
             "joined": base + timedelta(seconds=20 * g), "source": f"h{g % 3}/app.log", "line_no": g} for g in range(1, 9)]
    lost = [ev(40, base + timedelta(seconds=70), "stream-thread [app-StreamThread-1] at state RUNNING: partitions "
               "[orders-1] lost due to missed rebalance.\n\tlost active tasks: [0_1]\n\tlost assigned standby tasks: []\n",
               "PARTITIONS_LOST", host="h1", run_id="h1#1")]
    tl = make_timeline(spark, generations=gens, events=lost)
    with driver_zone("America/New_York"):
        found = [f for f in run_detectors(tl, only=["rebalance-storm"]) if f.detector == "rebalance-storm"]
    assert [f.severity for f in found] == ["warning"]
    assert "from 2026-03-08 06:58:20.000 UTC" in found[0].explanation


def test_rows_built_on_the_driver_are_utc_under_a_dst_driver_zone(spark):
    """``utc.create_frame`` reads a naive ``datetime`` as UTC and converts an aware one, whatever the driver's
    zone, for top-level and nested columns; no rows give an empty table of the schema."""
    schema = "name string, at timestamp, times array<timestamp>, attrs map<string, string>"
    with driver_zone("America/New_York"):
        rows = [("naive", AUTUMN[1], list(SPRING), {"k": "v"}),
                ("aware", AUTUMN[1].replace(tzinfo=timezone.utc).astimezone(), [], None)]
        df = utc.create_frame(spark, rows, schema)
        got = {r.name: r for r in df.select("name", F.col("at").cast("string").alias("at"),
                                            F.col("times").cast("array<string>").alias("times"), "attrs").collect()}
        empty = utc.create_frame(spark, [], schema)
    assert got["naive"].at == got["aware"].at == f"{AUTUMN[1]:%Y-%m-%d %H:%M:%S}"
    assert got["naive"].times == [f"{t:%Y-%m-%d %H:%M:%S}" for t in SPRING]
    assert got["naive"].attrs == {"k": "v"} and got["aware"].attrs is None
    assert empty.count() == 0 and empty.schema == df.schema
