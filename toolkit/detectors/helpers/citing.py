"""What a finding cites and what it asks for: log-line references the runner reads in one join, and the
evidence steps still to collect.
"""

from __future__ import annotations

from typing import Any, Iterable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from toolkit.detectors.base import MAX_EVIDENCE, Evidence
from toolkit.knowledge import missing_evidence_steps


def log_evidence(df: DataFrame, limit: int = MAX_EVIDENCE) -> list[Evidence]:
    """Evidence references for event rows (``source``, ``line_no``), oldest first; the runner reads the lines."""
    keys = df.where(F.col("source").isNotNull() & F.col("line_no").isNotNull()).select("source", "line_no", "ts")
    return log_refs((r.source, r.line_no) for r in keys.orderBy("ts", "source", "line_no").limit(limit).collect())


def log_refs(refs: Iterable[tuple[str | None, int | None]]) -> list[Evidence]:
    """Evidence references (``text`` still ``None``) for (source, line_no) pairs; the runner reads the
    lines of every finding in one join (:func:`toolkit.detectors.resolve_evidence`)."""
    pairs = sorted({(s, int(n)) for s, n in refs if s and n is not None})
    return [Evidence(source, line_no, None, "log") for source, line_no in pairs]


def evidence_at(tl: Any, refs: DataFrame, limit: int = MAX_EVIDENCE) -> list[Evidence]:
    """Evidence references for timeline rows (their ``source``/``line_no``), oldest rows first."""
    keys = refs.where(F.col("line_no").isNotNull() & F.col("source").isNotNull()).select("source", "line_no")
    return log_refs((r.source, r.line_no) for r in keys.limit(limit * 2).collect())


def evidence_lines(tl: Any, refs: Iterable[tuple[str | None, int | None]], limit: int = MAX_EVIDENCE) -> list[Evidence]:
    """Evidence references for (source, line_no) pairs collected earlier (no query here)."""
    return log_refs(refs)


def merge_evidence(*groups: Iterable[Evidence], limit: int | None = None) -> list[Evidence]:
    """Concatenate evidence lists without duplicates; the runner orders and bounds the result."""
    seen: set[tuple] = set()
    merged: list[Evidence] = []
    for group in groups:
        for item in group:
            key = (item.source, item.line_no, item.text)
            if key not in seen:
                seen.add(key)
                merged.append(item)
    return merged


def missing_steps(detector_id: str, *extra: str) -> list[str]:
    """Specific gaps first (``extra``), then the detector's standard evidence steps."""
    try:
        standard = missing_evidence_steps(detector_id)
    except KeyError:
        standard = []
    return [*extra, *[s for s in standard if s not in extra]]
