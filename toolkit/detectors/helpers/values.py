"""Values collected onto the driver: ordered as Spark orders them, as epoch numbers, printed in findings.

Collected results are bounded and go through :mod:`toolkit.utc` (naive ``datetime`` values in UTC).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from toolkit import utc


def spark_order(*values: Any) -> tuple:
    """A sort key ordering by ``values`` as Spark orders them (and structs of them): field by field, ascending,
    nulls first. For ``sorted``, ``min`` and ``max`` over collected rows."""
    return tuple((value is not None, value) for value in values)


def in_spark_order(items: Iterable[Any], key: Callable[[Any], tuple]) -> list:
    """``items`` sorted by the values ``key`` gives, ascending with nulls first, as Spark's ``orderBy`` does."""
    return sorted(items, key=lambda item: spark_order(*key(item)))


def unix_millis(ts: datetime | None) -> int | None:
    """Milliseconds since the epoch, rounded down as Spark's ``unix_millis`` does, of a collected timestamp
    (naive UTC, see :mod:`toolkit.utc`; for comparing collected timestamps with each other)."""
    return None if ts is None else utc.epoch_micros(ts) // 1000


def unix_seconds(ts: datetime | None) -> int | None:
    """Seconds since the epoch, rounded down as Spark's ``unix_timestamp`` does, of a collected timestamp
    (naive UTC, see :mod:`toolkit.utc`; for comparing collected timestamps with each other)."""
    return None if ts is None else utc.epoch_micros(ts) // 1_000_000


def fmt_int(value: Any) -> str:
    """``81732`` -> ``81,732``; ``None`` -> ``unknown``."""
    return "unknown" if value is None else f"{int(value):,}"


def fmt_ts(value: datetime | None) -> str:
    """``2026-03-07 10:06:07.807 UTC`` (or ``unknown``) of a collected (naive UTC) or an aware timestamp."""
    if value is not None and value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return "unknown" if value is None else value.strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d} UTC"
