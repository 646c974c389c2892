"""Preconditions: what a timeline must hold before a detector can find anything, checked for all at once.

A detector declares a *necessary* condition in its registration (``@detector(requires=...)``): rows of
a table matching a Spark SQL condition (:func:`rows_in`), an event name (:func:`events_named`), and
combinations (:func:`all_of`, :func:`any_of`). The runner checks the preconditions of every selected
detector in one aggregate query (:func:`check_preconditions`) and skips the detectors whose
precondition is false: on most bundles most detectors have nothing to look at, and each would still
spend a dozen Spark jobs finding that out. A precondition only ever skips a detector that could not
have produced a finding; when unsure it must be weaker, never stronger.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping, Union

from toolkit import utc
from toolkit.sqltext import event_in, sql_list


@dataclass(frozen=True)
class RowsIn:
    """At least ``min_rows`` rows of the timeline table ``table`` match ``where`` (a Spark SQL condition;
    empty: any row). A state table is named ``state.<name>``."""

    table: str
    where: str = ""
    min_rows: int = 1

    def describe(self) -> str:
        what = f"{self.min_rows}+ rows" if self.min_rows > 1 else "rows"
        return f"{self.table} has {what}" + (f" where {self.where}" if self.where else "")


@dataclass(frozen=True)
class AllOf:
    """Every part holds."""

    parts: tuple["Precondition", ...]

    def describe(self) -> str:
        return " and ".join(_describe_part(p) for p in self.parts)


@dataclass(frozen=True)
class AnyOf:
    """At least one part holds."""

    parts: tuple["Precondition", ...]

    def describe(self) -> str:
        return " or ".join(_describe_part(p) for p in self.parts)


Precondition = Union[RowsIn, AllOf, AnyOf]


def _describe_part(part: Precondition) -> str:
    return part.describe() if isinstance(part, RowsIn) else f"({part.describe()})"


def sql_timestamp(value: datetime) -> str:
    """A collected timestamp (naive UTC, see :mod:`toolkit.utc`) as a Spark SQL literal."""
    return f"timestamp_micros({utc.epoch_micros(value)})"


def rows_in(table: str, where: str = "", min_rows: int = 1) -> RowsIn:
    """``table`` has at least ``min_rows`` rows matching the Spark SQL condition ``where``."""
    return RowsIn(table, where, min_rows)


def events_named(*names: str, also: bool = True, where: str = "") -> RowsIn:
    """An event (log line) classified as one of ``names``; with ``also`` its ``also_events`` count too
    (as :func:`toolkit.detectors.common.event_is` matches them). ``where`` narrows the lines further."""
    condition = event_in(names) if also else f"event IN ({sql_list(names)})"
    return RowsIn("events", f"{condition} AND ({where})" if where else condition)


def all_of(*parts: Precondition) -> AllOf:
    """Every one of ``parts`` holds."""
    return AllOf(tuple(parts))


def any_of(*parts: Precondition) -> AnyOf:
    """At least one of ``parts`` holds."""
    return AnyOf(tuple(parts))


def atoms(precondition: Precondition | None) -> list[RowsIn]:
    """The row checks a precondition is made of (in order, without duplicates)."""
    found: list[RowsIn] = []

    def walk(part: Precondition | None) -> None:
        if part is None:
            return
        if isinstance(part, RowsIn):
            if part not in found:
                found.append(part)
        else:
            for sub in part.parts:
                walk(sub)

    walk(precondition)
    return found


def tables_of(precondition: Precondition | None) -> set[str]:
    """The timeline attributes a precondition reads (``state`` for a ``state.<name>`` table)."""
    return {atom.table.split(".", 1)[0] for atom in atoms(precondition)}


def evaluate(precondition: Precondition | None, facts: Mapping[RowsIn, bool | None]) -> bool | None:
    """Whether ``precondition`` holds given which row checks hold (``None`` in ``facts``: unknown).

    ``None`` when the answer depends on an unknown check; a detector without a precondition: ``True``.
    """
    if precondition is None:
        return True
    if isinstance(precondition, RowsIn):
        return facts.get(precondition)
    results = [evaluate(part, facts) for part in precondition.parts]
    if isinstance(precondition, AllOf):
        return False if False in results else (None if None in results else True)
    return True if True in results else (None if None in results else False)


def _table(timeline: Any, name: str) -> Any:
    """``timeline.<name>`` (``state.<table>`` reaches into the state facts); ``None`` when absent."""
    value = timeline
    for part in name.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def count_rows(timeline: Any, checks: Iterable[RowsIn]) -> dict[RowsIn, int | None]:
    """How many rows each check matches on ``timeline``, all counted in one aggregate query.

    Each table contributes the numbers of the checks each of its rows passes; the union is counted per
    check (at most one row per check comes back). A check on a table the timeline lacks is ``None``.
    """
    checks = list(dict.fromkeys(checks))
    by_table: dict[str, list[tuple[int, RowsIn]]] = {}
    for number, check in enumerate(checks):
        if _table(timeline, check.table) is not None:
            by_table.setdefault(check.table, []).append((number, check))
    counts: dict[int, int] = {}
    if by_table:
        parts = []
        for table, numbered in by_table.items():
            conditions = [(number, f"({check.where})" if check.where else "TRUE") for number, check in numbered]
            passed = ", ".join(f"IF(coalesce({cond}, FALSE), {number}, NULL)" for number, cond in conditions)
            parts.append(_table(timeline, table)
                         .where(" OR ".join(f"coalesce({cond}, FALSE)" for _, cond in conditions))
                         .selectExpr(f"explode(filter(array({passed}), n -> n IS NOT NULL)) AS matched"))
        union = parts[0]
        for part in parts[1:]:
            union = union.unionAll(part)
        counts = {r["matched"]: r["count"] for r in union.groupBy("matched").count().limit(len(checks)).collect()}
    found = {number for numbered in by_table.values() for number, _ in numbered}
    return {check: (counts.get(number, 0) if number in found else None) for number, check in enumerate(checks)}


def check_row_counts(timeline: Any, checks: Iterable[RowsIn]) -> dict[RowsIn, bool | None]:
    """Which row checks hold on ``timeline`` (at least ``min_rows`` rows), in one query (:func:`count_rows`)."""
    return {check: (None if n is None else n >= check.min_rows) for check, n in count_rows(timeline, checks).items()}


#: Words of Spark SQL conditions that are not column names (operators, literals, ``CASE`` and ``CAST``
#: syntax, interval units, type names). A word missing here would be taken for a column and fail the check
#: loudly at registration, never pass silently.
_SQL_WORDS = frozenset("""
and or not in is null true false like rlike ilike regexp between case when then else end as cast try_cast
distinct interval year years month months week weeks day days hour hours minute minutes second seconds
millisecond milliseconds microsecond microseconds string int integer bigint long smallint tinyint double float
decimal boolean timestamp timestamp_ltz timestamp_ntz date binary array map struct escape any some all
""".split())
_SQL_TOKEN = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`((?:[^`]|``)*)`|([A-Za-z_][A-Za-z0-9_]*)|(\S)")


def columns_read(where: str) -> set[str]:
    """The column names a Spark SQL condition reads, read off its text (no Spark session): identifiers that
    are not SQL words, function names (followed by ``(``), lambda variables, struct fields after a ``.`` or
    text inside string literals; a backquoted name is always a column."""
    tokens: list[tuple[str, str]] = []  # (kind, text): kind name | quoted | other
    for match in _SQL_TOKEN.finditer(where):
        quoted_name, word, other = match.group(1), match.group(2), match.group(3)
        if quoted_name is not None:
            tokens.append(("quoted", quoted_name.replace("``", "`")))
        elif word is not None:
            tokens.append(("name", word))
        elif other is not None:
            tokens.append(("other", other))
        else:
            tokens.append(("literal", match.group(0)))
    lambda_vars = {text for i, (kind, text) in enumerate(tokens[:-2])
                   if kind == "name" and tokens[i + 1] == ("other", "-") and tokens[i + 2] == ("other", ">")}
    found = set()
    for i, (kind, text) in enumerate(tokens):
        after_dot = i > 0 and tokens[i - 1] == ("other", ".")
        if kind == "quoted" and not after_dot:
            found.add(text)
        elif kind == "name" and not after_dot:
            is_call = i + 1 < len(tokens) and tokens[i + 1] == ("other", "(")
            if not is_call and text.lower() not in _SQL_WORDS and text not in lambda_vars:
                found.add(text)
    return found
