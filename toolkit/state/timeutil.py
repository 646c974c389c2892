"""Small UTC time conversions shared by the state readers (all results are UTC-aware datetimes)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from typing import Any

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def from_ns(mtime_ns: int | None) -> datetime | None:
    """Epoch nanoseconds -> datetime, truncated to microseconds (Spark's TimestampType precision)."""
    if mtime_ns is None:
        return None
    return EPOCH + timedelta(microseconds=mtime_ns // 1000)


def decimal_seconds_to_ns(text: str) -> int:
    """``"1775639551.4020000000"`` (GNU find ``%T@``, CLI v1 epochs) -> nanoseconds, without float rounding."""
    whole, _, fraction = text.strip().partition(".")
    if not whole.lstrip("-").isdigit() or (fraction and not fraction.isdigit()):
        raise ValueError(f"not a decimal epoch: {text!r}")
    return int(whole) * 1_000_000_000 + int((fraction + "000000000")[:9] or 0)


def from_epoch_millis(value: Any) -> datetime | None:
    """DynamoDB ``N`` epoch milliseconds (string or number) -> datetime; None when absent or not a number."""
    if value is None or isinstance(value, bool):
        return None
    try:
        millis = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    if not millis.is_finite():
        return None
    try:
        return EPOCH + timedelta(microseconds=int(millis * 1000))
    except OverflowError:
        return None


def parse_aws_time(value: Any) -> datetime | None:
    """ISO 8601 (CLI v2, CloudTrail) or epoch seconds with a fraction (CLI v1) -> UTC datetime."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return from_ns(decimal_seconds_to_ns(repr(float(value)) if isinstance(value, float) else str(value)))
        except (ValueError, OverflowError):
            return None
    text = str(value).strip()
    if not text:
        return None
    try:
        return from_ns(decimal_seconds_to_ns(text))
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        return None
    if moment.tzinfo is None:  # AWS prints UTC; a naive value is taken as UTC rather than local time
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)
