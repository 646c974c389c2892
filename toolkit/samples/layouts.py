"""The four line layouts the generator writes, byte for byte as their logging backends print them.

* ``kafka``: log4j ``[%d] %p %m (%c)%n`` of Kafka's own config; time in the host's zone, no offset.
  A message that ends with a newline (config dumps, ``Updating assignment with``) leaves `` (logger)`` on a
  line of its own, as real Kafka logs do; log4j prints a throwable after the layout line.
* ``logback-springboot3``: Spring Boot 3 console pattern
  ``%d{yyyy-MM-dd'T'HH:mm:ss.SSSXXX} %5p ${PID} --- [%15.15t] %-40.40logger{39} : %m%n``.
* ``jsonl``: logstash-logback-encoder, one JSON object per line; multi-line text stays inside the fields.
* ``nifi``: NiFi's logback ``%date %level [%thread] %logger{40} %msg%n``; local time, no offset.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo

LAYOUTS = ("kafka", "logback-springboot3", "jsonl", "nifi")
LEVEL_VALUES = {"TRACE": 5000, "DEBUG": 10000, "INFO": 20000, "WARN": 30000, "ERROR": 40000}
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

#: Regex a record's first line matches, per layout (used by tests and documented for the parser).
FIRST_LINE_PATTERNS = {
    "kafka": r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] (TRACE|DEBUG|INFO|WARN|ERROR) ",
    "logback-springboot3": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d) ( INFO| WARN|ERROR|DEBUG|TRACE) \d+ --- "
    r"\[.{15}\] .{40} : ",
    "nifi": r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (TRACE|DEBUG|INFO|WARN|ERROR) \[[^\]]*\] \S+ ",
    "jsonl": r"^\{\"@timestamp\":",
}


@dataclass(slots=True)
class LogLine:
    """One log record before layout: true UTC time, what the logger printed, and what it means."""

    ts_ms: int
    level: str
    thread: str
    logger: str
    message: str
    stack: tuple[str, ...] = ()
    event: str | None = None
    fields: dict = field(default_factory=dict)


@lru_cache(maxsize=None)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def iso(ms: int) -> str:
    """ISO-8601 UTC with milliseconds, e.g. ``2026-03-07T09:00:06.912Z``."""
    dt = _EPOCH + timedelta(milliseconds=ms)
    return f"{dt:%Y-%m-%dT%H:%M:%S}.{dt.microsecond // 1000:03d}Z"


def local_time(ts_ms: int, tz: str, clock_offset_ms: int) -> datetime:
    """What the host's clock showed (true time + its offset), in its zone."""
    return (_EPOCH + timedelta(milliseconds=ts_ms + clock_offset_ms)).astimezone(_zone(tz))


def _iso_offset(dt: datetime) -> str:
    """Java's ``XXX``: ``Z`` for a zero offset, else ``+01:00``."""
    off = dt.utcoffset() or timedelta(0)
    if not off:
        return "Z"
    sign = "-" if off < timedelta(0) else "+"
    minutes = abs(int(off.total_seconds())) // 60
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def stamp(layout: str, dt: datetime) -> str:
    ms = dt.microsecond // 1000
    if layout in ("kafka", "nifi"):
        return f"{dt:%Y-%m-%d %H:%M:%S},{ms:03d}"
    return f"{dt:%Y-%m-%dT%H:%M:%S}.{ms:03d}{_iso_offset(dt)}"


@lru_cache(maxsize=None)
def abbreviate_logger(name: str, target: int) -> str:
    """logback's TargetLengthBasedClassNameAbbreviator (1.3+): shorten leading packages to one letter."""
    if len(name) < target:
        return name
    last_dot = name.rfind(".")
    if last_dot == -1:
        return name
    max_trim = last_dot - max(target - (len(name) - last_dot), 0)
    out: list[str] = []
    trimmed, in_dot, i = 0, True, 0
    while i < last_dot:
        c = name[i]
        if c == ".":
            if trimmed >= max_trim:
                break
            out.append(c)
            in_dot = True
        elif in_dot:
            out.append(c)
            in_dot = False
        else:
            trimmed += 1
        i += 1
    return "".join(out) + name[i:]


def render(layout: str, line: LogLine, tz: str, clock_offset_ms: int, pid: int = 1) -> str:
    """The physical text (possibly several lines, no final newline) for one record."""
    ts = stamp(layout, local_time(line.ts_ms, tz, clock_offset_ms))
    stack = "".join("\n" + s for s in line.stack)
    if layout == "kafka":
        return f"[{ts}] {line.level} {line.message} ({line.logger}){stack}"
    if layout == "nifi":
        return f"{ts} {line.level} [{line.thread}] {abbreviate_logger(line.logger, 40)} {line.message}{stack}"
    if layout == "logback-springboot3":
        thread = line.thread[-15:].rjust(15)
        logger = abbreviate_logger(line.logger, 39)[-40:].ljust(40)
        return f"{ts} {line.level:>5} {pid} --- [{thread}] {logger} : {line.message}{stack}"
    if layout == "jsonl":
        obj = {
            "@timestamp": ts,
            "@version": "1",
            "message": line.message,
            "logger_name": line.logger,
            "thread_name": line.thread,
            "level": line.level,
            "level_value": LEVEL_VALUES[line.level],
        }
        if line.stack:
            obj["stack_trace"] = "\n".join(line.stack) + "\n"
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    raise ValueError(f"unknown layout {layout!r}")


def stack_more(layout: str, n: int) -> str:
    """How the backend elides common frames: log4j prints ``... N more``, logback ``... N common frames omitted``."""
    return f"\t... {n} more" if layout == "kafka" else f"\t... {n} common frames omitted"
