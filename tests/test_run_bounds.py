"""Run bounds without sorting every record: the same table as numbering every record with tag_runs.

The lines follow what Kafka Streams 4.1 and Spring Boot print at start-up (``StreamsConfig values:``, the
``Kafka Streams version`` banner, the client's ``CREATED`` transition, Spring's ``Starting ... using Java``
on ``main``), with hours of steady-state lines between the starts, so most records fall outside every
start-up window and are placed by their second alone.
"""

from __future__ import annotations

import pytest

from support.runs import THREAD, app_line, at, start, stopped, summary
from toolkit.events.runs import BOUNDS_COLUMNS

COLUMNS = "host string, source string, line_no bigint, ts timestamp, thread string, logger string, message string, " \
          "layout string"


def _records(spark, lines):
    return spark.createDataFrame(
        [(r["host"], r["source"], r["line_no"], r["ts"], r.get("thread"), r.get("logger"), r["message"],
          r.get("layout", "kafka-log4j")) for r in lines], COLUMNS)


def _both(spark, lines):
    from toolkit.events import runs as exact
    from toolkit.events.bounds import run_bounds

    records = _records(spark, lines)
    fast_df, slow_df = run_bounds(records), exact.run_bounds(records)
    assert fast_df.columns == slow_df.columns == list(BOUNDS_COLUMNS)
    fast = sorted(tuple(r) for r in fast_df.collect())
    held_rows, kept = _held_rows(records)
    assert held_rows == fast and kept == (2 if all(line["ts"] for line in lines) else 0)
    return fast, sorted(tuple(r) for r in slow_df.collect())


def _held_rows(records) -> tuple[list[tuple], int]:
    """The bounds computed with their intermediate tables kept (as ``derive_tables`` asks), then released;
    and how many tables were kept."""
    from toolkit.events.bounds import run_bounds

    held: list = []
    rows = sorted(tuple(r) for r in run_bounds(records, held).collect())
    if held:  # a host with a record without time takes the exact numbering, which keeps nothing
        assert len(held) == 2 and all(df.is_cached for df in held)
    for df in held:
        df.unpersist()
    assert not any(df.is_cached for df in held)
    return rows, len(held)


def _steady(src, first_line, first_second, count, step=30.0, thread=THREAD):
    """Steady-state lines every ``step`` seconds: summaries and the application's own lines."""
    out = []
    for i in range(count):
        maker = summary if i % 2 else app_line
        out.append(dict(maker(src, first_line + i, first_second + i * step), thread=thread))
    return out


def test_restarts_main_thread_start_up_and_quiet_bursts_give_the_same_bounds(spark):
    spring = "wallet-app-02/console.log"
    plain = "atb-0/streams.log"
    lines = [
        # Spring Boot: banner lines on main just before the markers open run 2; a crash ends run 1.
        *[dict(x, thread="main") for x in start(spring, 1, 0)],
        *_steady(spring, 10, 60, 200),
        dict(app_line(spring, 300, 7000), message="Starting WalletApplication v1.4.2 using Java 17.0.9 with PID 1",
             thread="main"),
        dict(app_line(spring, 301, 7001), message="No active profile set, falling back to 1 default profile",
             thread="main"),
        *[dict(x, thread="main") for x in start(spring, 310, 7003)],
        *_steady(spring, 320, 7060, 150),
        # A quick restart: the markers of the second start come 40 s after the first.
        *start(spring, 600, 20000), app_line(spring, 610, 20025), *start(spring, 620, 20040),
        *_steady(spring, 630, 20100, 100),
        # No thread names: the burst after a silence opens the next run; a clean stop ends the first.
        *start(plain, 1, 0), *_steady(plain, 5, 30, 100, thread=None), stopped(plain, 200, 5000),
        dict(app_line(plain, 201, 5017.7), message="Starting AuditTrailBatch stream processor"),
        *start(plain, 202, 5018), *_steady(plain, 210, 5080, 80, thread=None),
        # Lines before any start on a host: run 0.
        *_steady("late-host/app.log", 1, 100, 20),
        # A supervisor's line no layout understands and NiFi's bootstrap are left out of every run.
        dict(app_line(plain, 900, 9000), layout="unparsed", message="Main process exited, code=killed"),
        dict(app_line(plain, 901, 9001), logger="org.apache.nifi.bootstrap.RunNiFi", message="NiFi exited"),
    ]
    fast, slow = _both(spark, lines)
    assert fast == slow
    runs = {(r[0], r[1]): r for r in fast}
    assert sorted(runs) == [("atb-0", 1), ("atb-0", 2), ("late-host", 0), ("wallet-app-02", 1),
                            ("wallet-app-02", 2), ("wallet-app-02", 3), ("wallet-app-02", 4)]
    assert runs[("wallet-app-02", 2)][3] == at(7000)  # the banner on main opens the run
    assert runs[("wallet-app-02", 1)][5] == at(60 + 199 * 30)  # run 1 ends at its last steady line


def test_a_record_without_timestamp_falls_back_to_numbering_every_record(spark):
    src = "fraud-scoring-1/app.log"
    lines = [*start(src, 1, 0), *_steady(src, 5, 30, 20), dict(app_line(src, 30, 0), ts=None),
             *start(src, 40, 4000), *_steady(src, 45, 4030, 20)]
    fast, slow = _both(spark, lines)
    assert fast == slow and len(fast) == 2


@pytest.mark.parametrize("name", ["kafka-standby-lock-cleaner", "bundles/kafka8187-2.0.1-springboot2-trace",
                                  "bundles/alos-reprocessing-2.8.2-journald-logback-info"])
def test_real_format_bundles_give_the_same_bounds(spark, analysis_of, name):
    from toolkit.events import runs as exact
    from toolkit.events.bounds import run_bounds

    records = analysis_of(name).records
    fast, slow = run_bounds(records), exact.run_bounds(records)
    assert fast.columns == slow.columns
    assert sorted(fast.collect()) == sorted(slow.collect())
    assert _held_rows(records)[0] == sorted(tuple(r) for r in slow.collect())
    assert fast.count() >= 2



def test_derived_tables_let_go_of_what_the_run_bounds_kept(spark):
    """A large input's run bounds keep two tables while the derived tables are written; ``release`` frees them."""
    from toolkit.events.derive import derive_tables
    from toolkit.events.runs import run_bounds as exact_bounds

    from pyspark.sql import functions as F

    from toolkit.schemas import RECORD_SCHEMA

    src = "orders-agg-1/app.log"
    partial = _records(spark, [*start(src, 1, 0), *_steady(src, 5, 30, 40)])
    records = partial.select(*[F.col(f.name) if f.name in partial.columns else F.lit(None).cast(f.dataType).alias(f.name)
                               for f in RECORD_SCHEMA.fields])
    kept = spark.sparkContext._jsc.getPersistentRDDs  # the test's own look at the session's cached data
    before = kept().size()
    derived = derive_tables(records, shapes=False, exact_bounds=False)
    assert kept().size() == before + 2
    bounds = sorted(tuple(r) for r in derived.tables["run_bounds"].collect())
    derived.release()
    assert kept().size() == before
    assert bounds == sorted(tuple(r) for r in exact_bounds(records).collect())
