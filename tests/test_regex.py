"""Python -> Java regex conversion: same matches and group numbers on the JVM as in ``re``."""

from __future__ import annotations

import re

import pytest
from pyspark.sql import functions as F

from toolkit.regex import to_java_regex

# (pattern, text): each pattern once broke one of the earlier converters (one kept names with their
# underscores dropped, the other turned every "(?P<" into a group, escaped or inside a class).
CASES = [
    # names that collide once underscores are dropped: Java rejects the duplicate name
    (r"(?P<task_id>\d+_\d+) (?P<taskid>\w+)", "0_1 restored"),
    # a name that would start with a digit once its underscore is dropped
    (r"(?P<_1st>\w+)-(?P<second>\w+)", "stream-thread"),
    # a name outside ASCII: Python accepts it, Java does not
    (r"(?P<état>RUNNING|REBALANCING)", "State transition from REBALANCING to RUNNING"),
    # the Kafka LogContext prefix, with underscores in its names
    (r"^stream-thread \[(?P<thread_ref>[^\]]*)\] (?P<rest>.*)$",
     "stream-thread [app-StreamThread-1] State transition from CREATED to STARTING"),
    # an escaped "(" followed by "?P<": literal text, not a group
    (r"x\(?P<y>(?P<z>\d)", "x(P<y>7"),
    # "(?P<" inside a character class is four literal members
    (r"[(?P<]+(?P<tail>\w+)", "(<Ptail"),
    # a named back-reference: Java only knows numbered ones here
    (r"(?P<word>\w+) (?P=word)0", "again again0"),
]


@pytest.mark.parametrize("pattern,text", CASES)
def test_python_names_become_plain_groups(pattern: str, text: str) -> None:
    java = to_java_regex(pattern)
    assert re.compile(java).groupindex == {}
    assert re.compile(java).groups == re.compile(pattern).groups


def test_escaped_and_class_text_is_copied_unchanged() -> None:
    assert to_java_regex(r"x\(?P<y>(?P<z>\d)") == r"x\(?P<y>(\d)"
    assert to_java_regex(r"[(?P<]+(?P<tail>\w+)") == r"[(?P<]+(\w+)"
    assert to_java_regex(r"[]a](?P<b>c)") == r"[]a](c)"
    assert to_java_regex(r"(?P<word>\w+) (?P=word)0") == r"(\w+) (?:\1)0"


def test_spark_extracts_the_same_groups_as_python(spark) -> None:
    rows = spark.createDataFrame([(i, text) for i, (_, text) in enumerate(CASES)], "case int, text string")
    columns = []
    for i, (pattern, _) in enumerate(CASES):
        java = to_java_regex(pattern)
        for g in range(re.compile(pattern).groups + 1):
            columns.append(F.when(F.col("case") == i, F.regexp_extract("text", java, g)).alias(f"c{i}_g{g}"))
    got = {r["case"]: r for r in rows.select("case", *columns).collect()}
    for i, (pattern, text) in enumerate(CASES):
        match = re.search(pattern, text)
        assert match is not None, pattern
        want = [match.group(g) or "" for g in range(match.re.groups + 1)]
        assert [got[i][f"c{i}_g{g}"] for g in range(len(want))] == want, pattern
