"""Helpers shared by detectors: evidence lines, versions, known-bug sentences, small Spark idioms.

Everything collects bounded results only (``limit`` before ``collect``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from toolkit.detectors.base import MAX_EVIDENCE, Evidence
from toolkit.knowledge import missing_evidence_steps, verdicts_for_detector

#: Guarantee values that mean exactly-once (``exactly_once`` is the pre-2.6 / deprecated spelling).
EOS_PREFIX = "exactly_once"


def first_line(col: Column | str) -> Column:
    """The first line of a (possibly multi-line) message."""
    return F.substring_index(F.col(col) if isinstance(col, str) else col, "\n", 1)


def is_eos(col: str = "guarantee") -> Column:
    """``processing.guarantee`` is one of the exactly-once values."""
    return F.lower(F.col(col)).startswith(EOS_PREFIX)


def event_is(*names: str) -> Column:
    """The event (or one of its ``also_events``) is one of ``names``."""
    cond = F.col("event").isin(*names)
    also = F.exists(F.coalesce(F.col("also_events"), F.array().cast("array<string>")), lambda e: e.isin(*names))
    return cond | also


def events_of(tl: Any, *names: str) -> DataFrame:
    """Events (log lines) classified as one of ``names``."""
    return tl.events.where(event_is(*names))


def rows(df: DataFrame, limit: int = 50, order: Sequence[str] | None = None) -> list:
    """A bounded ``collect``: at most ``limit`` rows, ordered by ``order`` when given."""
    if order:
        df = df.orderBy(*order)
    return df.limit(limit).collect()


def log_evidence(df: DataFrame, limit: int = MAX_EVIDENCE) -> list[Evidence]:
    """Evidence from event rows (``source``, ``line_no``, ``ts``, ``message``), oldest first."""
    picked = (df.where(F.col("source").isNotNull() & F.col("line_no").isNotNull())
              .select("source", "line_no", "ts", first_line("message").alias("text"))
              .dropDuplicates(["source", "line_no"]))
    return [Evidence(r.source, int(r.line_no), r.text or "", "log", r.ts)
            for r in rows(picked, limit, order=["ts", "source", "line_no"])]


def evidence_at(tl: Any, refs: DataFrame, limit: int = MAX_EVIDENCE) -> list[Evidence]:
    """Log evidence for timeline rows: their ``source``/``line_no`` joined back to the events' message."""
    keys = refs.where(F.col("line_no").isNotNull()).select("source", "line_no").dropDuplicates()
    lines = tl.events.select("source", "line_no", "ts", "message").join(keys, ["source", "line_no"], "inner")
    return log_evidence(lines, limit)


def evidence_lines(tl: Any, refs: Iterable[tuple[str | None, int | None]], limit: int = MAX_EVIDENCE) -> list[Evidence]:
    """Log evidence for a few (source, line_no) pairs collected earlier."""
    pairs = sorted({(s, int(n)) for s, n in refs if s and n is not None})[:limit * 2]
    if not pairs:
        return []
    cond = None
    for source, line_no in pairs:
        one = (F.col("source") == source) & (F.col("line_no") == line_no)
        cond = one if cond is None else cond | one
    return log_evidence(tl.events.where(cond), limit)


def merge_evidence(*groups: Iterable[Evidence], limit: int = MAX_EVIDENCE) -> list[Evidence]:
    """Concatenate evidence lists without duplicates, ordered by time (facts without time last)."""
    seen: set[tuple] = set()
    merged: list[Evidence] = []
    for group in groups:
        for item in group:
            key = (item.source, item.line_no, item.text)
            if key not in seen:
                seen.add(key)
                merged.append(item)
    merged.sort(key=lambda e: (e.ts is None, e.ts or datetime.max, e.source, e.line_no or 0))
    return merged[:limit]


def run_versions(tl: Any, hosts: Iterable[str] | None = None) -> list[str]:
    """Distinct product versions of the process runs (of ``hosts`` when given), sorted."""
    runs = tl.process_runs.where(F.col("version").isNotNull())
    hosts = list(hosts or [])
    if hosts:
        runs = runs.where(F.col("host").isin(hosts))
    return sorted({r.version for r in rows(runs.select("version").distinct(), 20)})


def known_bug_sentences(detector_id: str, versions: Sequence[str]) -> list[str]:
    """One verdict sentence per known issue of the detector, for each version seen (or 'version unknown')."""
    sentences: list[str] = []
    for version in (list(versions) or [None]):
        for verdict in verdicts_for_detector(detector_id, version):
            if verdict.sentence not in sentences:
                sentences.append(verdict.sentence)
    return sentences


def missing_steps(detector_id: str, *extra: str) -> list[str]:
    """Specific gaps first (``extra``), then the detector's standard evidence steps."""
    try:
        standard = missing_evidence_steps(detector_id)
    except KeyError:
        standard = []
    return [*extra, *[s for s in standard if s not in extra]]


def has_rows(df: DataFrame) -> bool:
    """Whether ``df`` has at least one row (reads one row at most)."""
    return bool(df.limit(1).collect())


def fmt_int(value: Any) -> str:
    """``81732`` -> ``81,732``; ``None`` -> ``unknown``."""
    return "unknown" if value is None else f"{int(value):,}"


def fmt_ts(value: datetime | None) -> str:
    """``2026-03-07 10:06:07.807 UTC`` (or ``unknown``)."""
    return "unknown" if value is None else value.strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d} UTC"


def captured_checkpoints(tl: Any) -> DataFrame:
    """Readable ``.checkpoint`` entries of state captures, with an effective ``capture_time``.

    A plain copy or ``tar`` of ``state.dir`` has no capture time (``capture_time`` null); the newest
    file mtime of the same capture is then a lower bound of when it was taken.
    """
    newest = tl.state.state_files.groupBy("host", "source").agg(F.max("mtime").alias("_newest"))
    files = tl.state.checkpoints.where(F.col("problem").isNull() & F.col("offset").isNotNull())
    return files.join(newest, ["host", "source"], "left").withColumn(
        "capture_time", F.coalesce(F.col("capture_time"), F.col("_newest"))).drop("_newest")
