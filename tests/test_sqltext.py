"""SQL text: a quoted Python string reads back, through Spark's SQL parser, as exactly that string."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from toolkit.sqltext import earliest, event_in, sql_in, sql_list, sql_str

VALUES = [
    "", "plain", "it's", "''", "\\", "ends with a backslash \\", "\\'", "'\\", "C:\\tmp\\new", "\\n is not a newline",
    "a\nb", "tab\there", "cr\rlf", '"double"', "`tick`", "%_ like \\% and \\_", "\\u0041 and \\101",
    "${var} $1", "$${x}", "\\${y}", "${", "${system:user.name}",
    "Grüße, 東京, emoji 🚀", "zero\u0000byte", "-- not a comment", "/* nor this */", "a;b",
]


def test_literals_round_trip_through_spark_sql(spark):
    got = spark.sql(f"SELECT array({sql_list(VALUES)}) AS v").first().v
    assert got == VALUES
    for value in VALUES:
        assert spark.sql("SELECT " + sql_str(value) + " AS v").first().v == value


def test_literals_round_trip_through_expressions(spark):
    """``selectExpr`` and ``where`` parse SQL text the same way (variable substitution included)."""
    row = spark.range(1).selectExpr(f"array({sql_list(VALUES)}) AS v").first()
    assert row.v == VALUES
    assert spark.range(1).where(f"{sql_str('${var}')} = '\\u0024{{var}}'").count() == 1


def test_in_lists(spark):
    row = spark.sql(f"SELECT {sql_in(sql_str(VALUES[2]), VALUES)} AS hit, {sql_in(sql_str('absent'), VALUES)} AS miss, "
                    f"{sql_in(sql_str('x'), [])} AS empty").first()
    assert (row.hit, row.miss, row.empty) == (True, False, False)


@pytest.mark.parametrize("value, text", [("it's", "'it\\'s'"), ("a\\b", "'a\\\\b'"), ("a\nb", "'a\\nb'"),
                                         ("${x}", "'\\u0024{x}'"), ("$1", "'$1'")])
def test_the_quoting_is_readable(value, text):
    assert sql_str(value) == text


def test_earliest_takes_the_first_non_null_value_in_log_order_whatever_the_row_order(spark):
    from datetime import datetime

    at = [datetime(2026, 3, 7, 9, 0, s) for s in range(4)]
    rows = [  # (group, ts, source, line_no, value), listed latest first
        ("a", at[3], "b.log", 1, "late"), ("a", at[1], "b.log", 9, "second file, same second"),
        ("a", at[1], "a.log", 9, None), ("a", at[1], "a.log", 12, "first"), ("a", at[0], "a.log", 3, None),
        ("b", at[2], "a.log", 1, None), ("c", at[2], "a.log", 5, "only"),
    ]
    df = spark.createDataFrame(rows, "g string, ts timestamp, source string, line_no long, v string")
    for shuffled in (df.coalesce(1), df.repartition(3, "line_no"), df.orderBy("line_no")):
        got = {r.g: r.v for r in shuffled.groupBy("g").agg(F.expr(earliest("v")).alias("v")).collect()}
        assert got == {"a": "first", "b": None, "c": "only"}
    # the order can be given: by line number alone, "late" (line 1) comes first
    assert df.where("g = 'a'").agg(F.expr(earliest("v", "line_no, source")).alias("v")).first().v == "late"



def test_event_in_matches_the_event_or_one_it_also_counts_as(spark):
    rows = spark.createDataFrame(
        [(1, "LOCK_FAILED", None), (2, "STATE_CHANGE", ["LOCK_FAILED"]), (3, "STATE_CHANGE", ["TASK_CREATED"]),
         (4, "STATE_CHANGE", []), (5, "it's", None)],
        "id int, event string, also_events array<string>")
    names = ["LOCK_FAILED", "it's"]  # quoted like every other literal
    matched = rows.selectExpr("id", f"{event_in(names)} AS hit").collect()
    assert {r["id"]: r["hit"] for r in matched} == {1: True, 2: True, 3: False, 4: False, 5: True}
