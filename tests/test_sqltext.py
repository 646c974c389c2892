"""SQL text: a quoted Python string reads back, through Spark's SQL parser, as exactly that string."""

from __future__ import annotations

import pytest

from toolkit.sqltext import sql_in, sql_list, sql_str

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
