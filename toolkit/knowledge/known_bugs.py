"""Known upstream issues and version verdicts.

The data lives in ``known_bugs.toml`` next to this file (one ``[[bug]]`` per issue; the
file's header documents the keys).  This module loads it, finds the issues a detector should
mention, and says, for a version or a span of versions, whether the issue applies — in a
sentence a report can print as it is.

A verdict never turns missing knowledge into a fact: a version the data does not cover is
``unknown``, and a span of versions that crosses a boundary (part affected, part fixed) is
``unknown`` with both parts named.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Iterable, Literal

from toolkit.knowledge.versions import (
    Interval,
    Key,
    Span,
    VersionError,
    apache_kafka_line,
    line_end_key,
    line_start_key,
    parse_range,
    parse_version,
)

Status = Literal["affected", "fixed", "not_affected", "unknown"]

PRODUCTS: dict[str, str] = {"kafka-streams": "Kafka Streams", "nifi": "NiFi"}
KINDS = ("bug", "design")


@dataclass(frozen=True)
class Note:
    """A span of versions with the reason it has the status it has."""

    interval: Interval
    why: str


@dataclass(frozen=True)
class KnownBug:
    """One upstream issue (or, with ``kind == "design"``, a design change) from the data file."""

    id: str
    product: str
    kind: str
    title: str
    url: str
    affected: tuple[Interval, ...]
    fixed: tuple[str, ...]
    fix_release_verified: bool
    unknown: tuple[Note, ...]
    not_affected: tuple[Note, ...]
    ticket_affects: tuple[str, ...]
    ticket_fix_versions: tuple[str, ...]
    basis: str
    conditions: str
    detectors: tuple[str, ...]
    keywords: tuple[str, ...]

    @property
    def product_name(self) -> str:
        """``Kafka Streams`` or ``NiFi``."""
        return PRODUCTS[self.product]

    def affected_text(self) -> str:
        """The affected ranges in words, e.g. ``3.8.0 to before 4.1.3, 4.2.0 to before 4.2.2``."""
        return ", ".join(i.describe() for i in self.affected) or "no released version"

    def fix_text(self) -> str:
        """Where the fix is, in words, including what the ticket says when it differs."""
        if not self.fixed:
            return "no fix released"
        versions = ", ".join(self.fixed)
        text = f"fixed in {versions}" if self.fix_release_verified else (
            f"fix merged for {versions}, release not verified")
        if self.ticket_fix_versions and set(self.ticket_fix_versions) != set(self.fixed):
            text += f"; the ticket lists {', '.join(self.ticket_fix_versions)}"
        return text


@dataclass(frozen=True)
class Verdict:
    """Whether one issue applies to the version (or span of versions) a user runs."""

    bug_id: str
    status: Status
    sentence: str
    version_text: str | None = None


def _intervals(texts: Iterable[str], where: str) -> tuple[Interval, ...]:
    try:
        return tuple(parse_range(t) for t in texts)
    except VersionError as exc:
        raise ValueError(f"known_bugs.toml, {where}: {exc}") from exc


def _notes(rows: Iterable[dict], where: str) -> tuple[Note, ...]:
    notes = []
    for row in rows:
        (interval,) = _intervals([row["range"]], where)
        notes.append(Note(interval=interval, why=str(row.get("why", ""))))
    return tuple(notes)


def _bug_from_row(row: dict) -> KnownBug:
    bug_id = row["id"]
    if row["product"] not in PRODUCTS:
        raise ValueError(f"known_bugs.toml, {bug_id}: unknown product {row['product']!r}")
    kind = row.get("kind", "bug")
    if kind not in KINDS:
        raise ValueError(f"known_bugs.toml, {bug_id}: unknown kind {kind!r}")
    for version in row.get("fixed", []):
        parse_version(version)
    return KnownBug(
        id=bug_id,
        product=row["product"],
        kind=kind,
        title=row["title"],
        url=row["url"],
        affected=_intervals(row.get("affected", []), f"{bug_id}.affected"),
        fixed=tuple(row.get("fixed", [])),
        fix_release_verified=bool(row.get("fix_release_verified", True)),
        unknown=_notes(row.get("unknown", []), f"{bug_id}.unknown"),
        not_affected=_notes(row.get("not_affected", []), f"{bug_id}.not_affected"),
        ticket_affects=tuple(row.get("ticket_affects", [])),
        ticket_fix_versions=tuple(row.get("ticket_fix_versions", [])),
        basis=row.get("basis", ""),
        conditions=row.get("conditions", ""),
        detectors=tuple(row.get("detectors", [])),
        keywords=tuple(row.get("keywords", [])),
    )


@lru_cache(maxsize=1)
def load_known_bugs() -> tuple[KnownBug, ...]:
    """All entries of ``known_bugs.toml``, in file order (validated; read once per process)."""
    text = resources.files("toolkit.knowledge").joinpath("known_bugs.toml").read_text(encoding="utf-8")
    bugs = tuple(_bug_from_row(row) for row in tomllib.loads(text).get("bug", []))
    seen: set[str] = set()
    for bug in bugs:
        if bug.id in seen:
            raise ValueError(f"known_bugs.toml: duplicate id {bug.id}")
        seen.add(bug.id)
    return bugs


def get_known_bug(bug_id: str) -> KnownBug:
    """The entry with this id; ``KeyError`` when there is none."""
    for bug in load_known_bugs():
        if bug.id == bug_id:
            return bug
    raise KeyError(bug_id)


def bugs_for_detector(detector_id: str) -> list[KnownBug]:
    """The issues (bugs first, then design notes) that explain what ``detector_id`` finds."""
    matches = [b for b in load_known_bugs() if detector_id in b.detectors]
    return sorted(matches, key=lambda b: b.kind != "bug")


# --- verdicts -------------------------------------------------------------------------------


def _status_at(bug: KnownBug, key: Key) -> tuple[Status, str]:
    """Status of one exact version key, with the reason (empty when the ranges say it all)."""
    if any(i.contains(key) for i in bug.affected):
        return "affected", ""
    for note in bug.unknown:
        if note.interval.contains(key):
            return "unknown", note.why
    for note in bug.not_affected:
        if note.interval.contains(key):
            return "not_affected", note.why
    if any(parse_version(v).key <= key for v in bug.fixed):
        return "fixed", ""
    return "unknown", "the sources checked say nothing about this version"


def _boundaries(bug: KnownBug) -> set[Key]:
    keys: set[Key] = set()
    for interval in (*bug.affected, *(n.interval for n in bug.unknown), *(n.interval for n in bug.not_affected)):
        keys.update((interval.low, interval.high))
    keys.update(parse_version(v).key for v in bug.fixed)
    return keys


def _segments(bug: KnownBug, span: Span) -> list[tuple[Status, str]]:
    """The distinct (status, reason) pairs met across ``span``, in version order."""
    points = sorted({span.low} | {b for b in _boundaries(bug) if span.low < b < span.high})
    found: list[tuple[Status, str]] = []
    for point in points:
        pair = _status_at(bug, point)
        if pair not in found:
            found.append(pair)
    return found


def _span_for(bug: KnownBug, version: str | None,
              version_range: tuple[str | None, str | None] | None) -> tuple[Span | None, str | None]:
    """Turn the caller's version knowledge into a span; (None, reason) when there is none."""
    if version:
        parsed = parse_version(version)
        if bug.product == "kafka-streams":
            line = apache_kafka_line(parsed)
            if line is not None:
                # A Confluent build number: only the Apache minor line is known, not the patch.
                display = f"{parsed.text} (Confluent Platform build of Apache Kafka {line[0]}.{line[1]}.x)"
                return Span(low=line_start_key(line), high=line_end_key(line), text=display, exact=False), None
            if parsed.is_confluent_build:
                return None, f"{parsed.text} is a Confluent build whose Apache Kafka line is not known here"
        return Span.of_version(parsed), None
    if version_range and any(version_range):
        low, high = version_range
        return Span.between(low, high), None
    return None, "version unknown"


def _describe_span(span: Span) -> str:
    if span.exact:
        return span.text
    if "–" in span.text:
        return f"a version in {span.text}"
    if "Confluent" in span.text:
        return span.text
    return f"{span.text} (some {span.text}.x)"


def _applies_text(bug: KnownBug) -> str:
    return f" It bites only with: {bug.conditions}." if bug.conditions else ""


def version_verdict(bug: KnownBug, version: str | None,
                    version_range: tuple[str | None, str | None] | None = None) -> Verdict:
    """Say whether ``bug`` applies to ``version``, or to any version in ``version_range``.

    ``version`` is what the logs or the user say (``4.1.2``, ``3.8`` meaning some 3.8.x,
    ``7.9.0-ccs``).  When it is ``None``, ``version_range`` gives what is known instead, both
    ends included and ``major.minor`` ends covering their whole line (``("2.6", "3.6")`` from a
    log-template fingerprint).  With neither, the verdict is ``unknown``.

    For ``kind == "design"`` entries, ``affected`` means "the design change is in effect".
    """
    try:
        span, reason = _span_for(bug, version, version_range)
    except VersionError as exc:
        return Verdict(bug.id, "unknown", f"cannot tell: {exc}; {bug.id} affects {bug.affected_text()} "
                                          f"({bug.fix_text()}).", version)
    name = bug.product_name
    if span is None:
        return Verdict(bug.id, "unknown",
                       f"cannot tell: {reason} — {bug.id} affects {name} {bug.affected_text()} ({bug.fix_text()}).",
                       version)
    shown = _describe_span(span)
    if version and _is_prerelease_of_fix(bug, version):
        why = "a pre-release of a fix version may or may not contain the fix"
        return Verdict(bug.id, "unknown", _sentence(bug, "unknown", why, f"{name} {shown}"), span.text)
    segments = _segments(bug, span)
    if len(segments) > 1:
        parts = "; ".join(_segment_text(bug, status, why) for status, why in segments)
        sentence = (f"cannot tell: {name} {shown} straddles a boundary of {bug.id} — {parts}. "
                    f"The exact version decides.")
        return Verdict(bug.id, "unknown", sentence, span.text)
    status, why = segments[0]
    return Verdict(bug.id, status, _sentence(bug, status, why, f"{name} {shown}"), span.text)


def _is_prerelease_of_fix(bug: KnownBug, version: str) -> bool:
    parsed = parse_version(version)
    if not parsed.is_prerelease:
        return False
    return any(parse_version(v).key[:4] == parsed.key[:4] for v in bug.fixed)


def _segment_text(bug: KnownBug, status: Status, why: str) -> str:
    if status == "affected":
        return f"affected for {bug.affected_text()}"
    if status == "fixed":
        return bug.fix_text()
    if status == "not_affected":
        return f"not affected where {why}" if why else "not affected in part"
    return f"unknown in part ({why})" if why else "unknown in part"


def _sentence(bug: KnownBug, status: Status, why: str, subject: str) -> str:
    ranges = f"affected {bug.affected_text()}; {bug.fix_text()}"
    if bug.kind == "design":
        return {
            "affected": f"{bug.id} (a design change, not a bug) is in effect in {subject}: {bug.title}.",
            "not_affected": f"{bug.id} (a design change) is not in effect in {subject}" + (f": {why}." if why else "."),
            "fixed": f"{bug.id} (a design change) is not in effect in {subject}.",
            "unknown": f"cannot tell whether {bug.id} (a design change) is in effect in {subject}: {why}.",
        }[status]
    if status == "affected":
        return f"{subject} is affected by {bug.id} ({ranges}).{_applies_text(bug)}"
    if status == "fixed":
        return f"{subject} has the fix for {bug.id} ({ranges})."
    if status == "not_affected":
        return f"{subject} is not affected by {bug.id} ({ranges})" + (f": {why}." if why else ".")
    return f"cannot tell whether {subject} is affected by {bug.id} ({ranges}): {why}."


def verdicts_for_detector(detector_id: str, version: str | None,
                          version_range: tuple[str | None, str | None] | None = None) -> list[Verdict]:
    """One verdict per issue linked to ``detector_id``: what a finding's explanation can cite."""
    return [version_verdict(b, version, version_range) for b in bugs_for_detector(detector_id)]
