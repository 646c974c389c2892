"""Timestamp text -> UTC timestamps, as Spark column expressions.

Spark parses a datetime pattern through ``java.time``'s formatter: a few microseconds a line, the largest
single cost of reading a log once the layout's regular expression has run. Most stamps are ISO-like
(``2026-03-07 08:00:00,123``, ``2026-03-07T08:00:00.123+01:00``), which Spark's own cast to ``timestamp``
reads several times faster. A format made only of ISO parts (:func:`cast_shape`) is read by that cast,
after a check that the text has exactly the shape the format prescribes (so the cast, which is more
lenient, never accepts a stamp the format would refuse); any other format goes through the formatter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from pyspark.sql import Column
from pyspark.sql import functions as F

_ISO_STAMP = r"^(\d{4})[-/](\d{2})[-/](\d{2})[T ](\d{2}:\d{2}:\d{2})(?:[.,](\d{1,9}))?"
_STAMP_ZONE = r"(Z|[+-]\d{2}:?\d{2}|UTC|GMT)$"
#: The generic stamp's ISO part rewritten to what the cast reads: date, space, time and fraction.
_ISO_REWRITE = r"^(\d{4})[-/](\d{2})[-/](\d{2})[T ](\d{2}:\d{2}:\d{2})(?:[.,](\d{1,9}))?.*$"

#: Pattern letters :func:`cast_shape` understands, with the text each must match.
_TOKENS = (
    ("yyyy", r"\d{4}"), ("MM", r"\d{2}"), ("dd", r"\d{2}"), ("HH", r"\d{2}"), ("mm", r"\d{2}"), ("ss", r"\d{2}"),
    ("XXX", r"(?:Z|[+-]\d{2}:\d{2})"), ("XX", r"(?:Z|[+-]\d{4})"),
)


@dataclass(frozen=True)
class CastShape:
    """A datetime pattern the cast can read: the regex its text must match, and whether it has a zone and a
    comma before the fraction (the cast wants a dot)."""

    regex: str
    zone: bool
    comma: bool


@lru_cache(maxsize=None)
def cast_shape(fmt: str) -> CastShape | None:
    """The :class:`CastShape` of a datetime pattern, or None when the pattern has parts the cast does not
    read the same way (month names, 12-hour clocks, single-letter fields, days of the year...)."""
    out: list[str] = []
    zone = comma = False
    i, depth = 0, 0
    while i < len(fmt):
        ch = fmt[i]
        if ch == "'":  # quoted literal
            end = fmt.find("'", i + 1)
            if end < 0:
                return None
            literal = fmt[i + 1:end]
            if literal not in ("T", " | "):
                return None
            if literal == " | ":
                return None  # not an ISO separator: the cast does not read it
            out.append(re.escape(literal))
            i = end + 1
            continue
        if ch == "[":
            out.append("(?:")
            depth += 1
            i += 1
            continue
        if ch == "]":
            if depth == 0:
                return None
            out.append(")?")
            depth -= 1
            i += 1
            continue
        if ch == "S":
            run = len(fmt[i:]) - len(fmt[i:].lstrip("S"))
            if run > 9 or not out or out[-1] not in (r"\.", ","):
                return None
            comma = comma or out[-1] == ","
            out.append(rf"\d{{1,{run}}}")  # Spark reads 1 to n fraction digits for n letters
            i += run
            continue
        for token, pattern in _TOKENS:
            if fmt.startswith(token, i):
                if fmt[i + len(token):i + len(token) + 1] == token[0]:
                    return None  # a longer run of the letter (e.g. XXXX): not this token
                out.append(pattern)
                zone = zone or token.startswith("X")
                i += len(token)
                break
        else:
            if ch in "-: ":
                out.append({"-": r"\-", ":": ":", " ": " "}[ch])
            elif ch == ".":
                out.append(r"\.")
            elif ch == ",":
                out.append(",")
            else:
                return None
            i += 1
    if depth:
        return None
    text = "".join(out)
    # The pieces a cast reads: a date, then a time; anything else is left to the formatter.
    if not text.startswith(r"\d{4}\-\d{2}\-\d{2}"):
        return None
    return CastShape("^" + text + "$", zone, comma)


def parse_stamp(text: Column, fmt: str) -> Column:
    """``text`` read with the datetime pattern ``fmt``: a timestamp in the session's zone (UTC) for a pattern
    without a zone, else the instant; null when the text does not fit."""
    shape = cast_shape(fmt)
    if shape is None:
        return F.try_to_timestamp(text, F.lit(fmt))
    readable = F.replace(text, F.lit(","), F.lit(".")) if shape.comma else text
    return F.when(text.rlike(shape.regex), readable.try_cast("timestamp"))


def parse_stamps(text: Column, formats: tuple[str, ...] | list[str]) -> Column:
    """The first of ``formats`` that reads ``text`` (see :func:`parse_stamp`)."""
    parsed = [parse_stamp(text, fmt) for fmt in formats]
    if not parsed:
        return F.lit(None).cast("timestamp")
    return F.coalesce(*parsed) if len(parsed) > 1 else parsed[0]


def generic_timestamp(ts_raw: Column, tz: Column, file_date: Column) -> Column:
    """UTC timestamp of any stamp shape the generic layout accepts.

    ISO-like stamps are normalised to ``yyyy-MM-dd HH:mm:ss.f`` (any fraction length) and their
    printed zone, if any, wins over the host's; a time of day takes the file's date; a syslog stamp
    the file's year.
    """
    fraction = F.regexp_extract(ts_raw, _ISO_STAMP, 5)
    local = F.regexp_replace(ts_raw, _ISO_REWRITE, "$1-$2-$3 $4")
    local = F.when(fraction != "", F.concat(local, F.lit("."), fraction)).otherwise(local)
    zone = F.regexp_extract(ts_raw, _STAMP_ZONE, 1)
    zone = (F.when(zone == "", tz).when(zone.isin("Z", "UTC", "GMT"), F.lit("UTC"))
            .otherwise(F.regexp_replace(zone, r"^([+-]\d{2}):?(\d{2})$", "$1:$2")))
    iso = F.to_utc_timestamp(F.when(local.rlike(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,9})?$"),
                                    local.try_cast("timestamp")), zone)
    time_only = F.to_utc_timestamp(F.try_to_timestamp(
        F.concat_ws(" ", file_date, F.translate(ts_raw, ",", ".")), F.lit("yyyy-MM-dd HH:mm:ss[.SSSSSSSSS]")), tz)
    jul = F.to_utc_timestamp(F.try_to_timestamp(ts_raw, F.lit("MMM d, yyyy h:mm:ss a")), tz)
    syslog = F.to_utc_timestamp(F.try_to_timestamp(
        F.concat_ws(" ", F.substring(file_date, 1, 4), F.regexp_replace(F.translate(ts_raw, ",", "."), " +", " ")),
        F.lit("yyyy MMM d HH:mm:ss[.SSSSSS]")), tz)
    log4j_date = F.to_utc_timestamp(F.try_to_timestamp(F.translate(ts_raw, ",", "."),
                                                       F.lit("dd MMM yyyy HH:mm:ss.SSS")), tz)
    first = F.substring(ts_raw, 1, 1)
    return (F.when(ts_raw.rlike(r"^\d{4}[-/]"), iso)
            .when(ts_raw.rlike(r"^\d{2}:"), time_only)
            .when(ts_raw.endswith("M"), jul)
            .when(first.rlike("[A-Z]"), syslog)
            .otherwise(log4j_date))


def in_zone(local: Column, tz: Column) -> Column:
    """``to_utc_timestamp(local, tz)``, without looking the zone up where it is UTC (most hosts)."""
    return F.when(tz == "UTC", local).otherwise(F.to_utc_timestamp(local, tz))


def layout_timestamp(ts_formats: tuple[str, ...], json: bool, ts_raw: Column, tz: Column,
                     file_date: Column) -> Column:
    """UTC timestamp from the raw timestamp text of a named layout (the first format that parses); a JSON
    layout also reads epoch numbers and log4j2's ``instant`` object."""
    candidates = []
    if json:  # epoch fields: seconds (with a fraction), milliseconds, microseconds or nanoseconds
        digits = F.length(F.regexp_extract(ts_raw, r"^(\d+)", 1))
        numeric = ts_raw.rlike(r"^\d{9,19}(?:\.\d+)?$")
        epoch = (F.when(numeric & (digits <= 11), F.timestamp_micros((ts_raw.cast("double") * 1e6).cast("long")))
                 .when(numeric & (digits <= 14), F.timestamp_millis(F.split(ts_raw, r"\.").getItem(0).cast("long")))
                 .when(numeric & (digits <= 17), F.timestamp_micros(F.split(ts_raw, r"\.").getItem(0).cast("long")))
                 .when(numeric, F.timestamp_micros(F.substring(ts_raw, 1, 16).cast("long"))))
        # log4j2 JsonLayout: "instant":{"epochSecond":..,"nanoOfSecond":..}
        micros = (F.get_json_object(ts_raw, "$.epochSecond").cast("long") * 1_000_000
                  + F.coalesce(F.get_json_object(ts_raw, "$.nanoOfSecond").cast("long"), F.lit(0)) / 1000)
        instant = F.when(ts_raw.startswith("{") & ts_raw.contains("epochSecond"),
                         F.timestamp_micros(micros.cast("long")))
        candidates += [epoch, instant]
    for fmt in ts_formats:
        has_zone = "X" in fmt or "Z" in fmt or "x" in fmt
        if "yyyy" in fmt:
            parsed = parse_stamp(ts_raw, fmt)
        else:  # time of day only: borrow the date from bundle.toml or the file
            parsed = parse_stamp(F.concat_ws(" ", file_date, ts_raw), f"yyyy-MM-dd {fmt}")
        candidates.append(parsed if has_zone else in_zone(parsed, tz))
    if not candidates:
        return F.lit(None).cast("timestamp_ltz")
    return F.coalesce(*candidates) if len(candidates) > 1 else candidates[0]
