"""Bounded reads of a detector's timeline: classified lines, bounded and complete ``collect``s, results the
detectors of one run share.

Collected results are bounded and go through :mod:`toolkit.utc` (naive ``datetime`` values in UTC).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from toolkit import utc
from toolkit.sqltext import event_in


def first_line(col: Column | str) -> Column:
    """The first line of a (possibly multi-line) message."""
    return F.substring_index(F.col(col) if isinstance(col, str) else col, "\n", 1)


def event_is(*names: str) -> Column:
    """The event (or one of its ``also_events``) is one of ``names``."""
    return F.expr(event_in(names))


def events_of(tl: Any, *names: str) -> DataFrame:
    """Events (log lines) classified as one of ``names``."""
    return tl.events.where(event_is(*names))


def rows(df: DataFrame, limit: int = 50, order: Sequence[str] | None = None) -> list:
    """A bounded ``collect``: at most ``limit`` rows, ordered by ``order`` when given.

    Only for lists whose length is not reported; :func:`bounded` also says how many there were.
    """
    if order:
        df = df.orderBy(*order)
    return utc.collect(df.limit(limit))


@dataclass(frozen=True)
class Bounded:
    """Rows of a bounded ``collect`` and how many rows the query really has."""

    rows: list
    total: int

    @property
    def truncated(self) -> bool:
        return self.total > len(self.rows)

    def record(self, what: str, truncation: dict | None = None) -> dict:
        """``truncation`` plus ``{what: {"total": ..., "shown": ...}}`` when rows were cut."""
        out = dict(truncation or {})
        if self.truncated:
            out[what] = {"total": self.total, "shown": len(self.rows)}
        return out


def bounded(df: DataFrame, limit: int, order: Sequence[Any] | None = None) -> Bounded:
    """At most ``limit`` rows and the true row count (counted only when the limit was reached)."""
    ordered = df.orderBy(*order) if order else df
    got = utc.collect(ordered.limit(limit + 1))
    if len(got) <= limit:
        return Bounded(got, len(got))
    return Bounded(got[:limit], df.count())


#: Rows of one set of facts a detector reads onto the driver to compare there (checkpoint reads of the
#: runs after crashes, the restorations of those runs...): far more than any incident has.
MAX_FACT_ROWS = 20_000


def all_rows(df: DataFrame, what: str, limit: int = MAX_FACT_ROWS) -> list:
    """Every row of ``df``, a small set of facts the detector compares on the driver.

    More than ``limit`` rows raise ``ValueError`` (the detector then reports that it failed) rather than
    compare a silently cut set.
    """
    got = utc.collect(df.limit(limit + 1))
    if len(got) > limit:
        raise ValueError(f"more than {limit:,} {what} to compare")
    return got


def has_rows(df: DataFrame) -> bool:
    """Whether ``df`` has at least one row (reads one row at most)."""
    return bool(df.limit(1).collect())


_T = TypeVar("_T")


def shared(tl: Any, key: Any, compute: Callable[[], _T]) -> _T:
    """``compute()``, once per detector run for ``key``: the detectors of one run share the result.

    A view handed out by :func:`toolkit.detectors.run_detectors` carries the run's memo; a timeline
    given directly computes every time. Read the tables a result depends on before calling this, so
    a detector that does not declare them still fails as it would without the memo.
    """
    memo = getattr(tl, "_memo", None)
    return compute() if memo is None else memo.get(key, compute)
