"""Python strings as Spark SQL string literals, for expressions written as SQL text.

Spark's SQL parser processes backslash escapes inside a quoted literal (``'a\\'b'`` is ``a'b``), with
the default ``spark.sql.parser.escapedStringLiterals=false``. Before parsing, Spark also replaces
``${name}`` anywhere in the text by the value of a variable (``spark.sql.variable.substitute``), inside
literals too. So a value is quoted by doubling every backslash, escaping each single quote, writing the
``$`` of ``${`` as the escape ``\\u0024`` and (for readable SQL text) a newline as ``\\n``; every other
character, non-ASCII ones included, stands for itself. The parser reads the literal back as exactly the
original string, in ``spark.sql`` and in expressions (``selectExpr``, ``where``, ``F.expr``) alike.
"""

from __future__ import annotations

from typing import Iterable


def sql_str(value: str) -> str:
    """``value`` as a Spark SQL string literal: ``it's`` -> ``'it\\'s'``, ``C:\\x`` -> ``'C:\\\\x'``."""
    escaped = value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("${", "\\u0024{")
    return "'" + escaped + "'"


def sql_list(values: Iterable[str]) -> str:
    """String literals separated by commas (``'a', 'b'``), for ``IN (...)``, ``array(...)`` and the like."""
    return ", ".join(sql_str(v) for v in values)


def sql_in(column: str, values: Iterable[str]) -> str:
    """``column IN ('a', 'b')`` as Spark SQL; ``FALSE`` for no values."""
    listed = sql_list(values)
    return f"{column} IN ({listed})" if listed else "FALSE"


def event_in(names: Iterable[str]) -> str:
    """SQL: the row's ``event`` is one of ``names``, or its ``also_events`` lists one of them.

    No lambda (``exists(also_events, ...)``): the generated code of a Python lambda carries a variable name
    PySpark numbers on each call, so a session could not reuse the code of an earlier query."""
    listed = sql_list(names)
    return f"(event IN ({listed}) OR coalesce(arrays_overlap(also_events, array({listed})), false))"


#: The order that makes one row of a log the earliest: its time, then its place in the bundle.
LOG_ORDER = "ts, source, line_no"


def earliest(value: str, order: str = LOG_ORDER) -> str:
    """SQL aggregate: ``value`` on the earliest row (by ``order``) where it is not null; null when none is.

    ``first(value, true)`` would give whichever non-null value the aggregation happens to meet first,
    which depends on how the rows were split into tasks: two runs on one bundle could then disagree.
    """
    return f"min_by({value}, CASE WHEN ({value}) IS NOT NULL THEN struct({order}) END)"

