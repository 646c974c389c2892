"""What a run's version (or the version range its log templates allow) says: known-bug verdicts and the
defaults that changed between releases.
"""

from __future__ import annotations

from typing import Sequence

from toolkit.knowledge import get_known_bug, verdicts_for_detector, version_verdict
from toolkit.knowledge.versions import VersionError, compare_versions


def version_args(version: str | None, version_range: str | None = None
                 ) -> tuple[str | None, tuple[str | None, str | None] | None]:
    """(version, (low, high)) as :func:`toolkit.knowledge.version_verdict` takes them, from a run's
    ``version`` and ``version_range`` (``2.0-2.1``, ``3.8``, ``>=4.1``)."""
    if version:
        if "-" in version and version[:1].isdigit() and version.split("-", 1)[1][:1].isdigit():
            version, version_range = None, version  # a range passed where a version was expected
        else:
            return version, None
    text = (version_range or "").strip()
    if not text or not text[:1].isdigit() and not text.startswith(">="):
        return None, None
    if text.startswith(">="):
        return None, (text[2:], None)
    low, _, high = text.partition("-")
    return None, (low, high or low)


def bug_status(bug_id: str, version: str | None, version_range: str | None = None) -> str:
    """``affected``, ``fixed``, ``not_affected`` or ``unknown``: what the run's version says about ``bug_id``."""
    v, span = version_args(version, version_range)
    return version_verdict(get_known_bug(bug_id), v, span).status


def known_bug_sentences(detector_id: str, versions: Sequence[str | None]) -> list[str]:
    """One verdict sentence per known issue of the detector, for each version (or template range) seen,
    or 'version unknown'."""
    sentences: list[str] = []
    for text in (list(v for v in versions if v) or [None]):
        version, span = version_args(text, None)
        for verdict in verdicts_for_detector(detector_id, version, span):
            if verdict.sentence not in sentences:
                sentences.append(verdict.sentence)
    return sentences


def default_state_updater(version: str | None, version_range: str | None = None) -> bool | None:
    """Whether the state updater is on by default in this version (3.8+), off (before 3.8), or unknown."""
    v, span = version_args(version, version_range)
    try:
        if v:
            return compare_versions(v, "3.8.0") >= 0
        if span and span[0]:
            low_on = compare_versions(span[0], "3.8") >= 0
            high_on = span[1] is None or compare_versions(span[1], "3.8") >= 0
            return low_on if low_on == high_on else None
    except VersionError:
        return None
    return None


def may_predate(version: str | None, version_range: str | None, floor: str) -> bool:
    """Whether the run may be older than ``floor``: its version is below it, or it is unknown (no version, or a
    range that reaches below it). False only when the run is known to be ``floor`` or later."""
    v, span = version_args(version, version_range)
    try:
        if v:
            return compare_versions(v, floor) < 0
        if span and span[0]:
            return compare_versions(span[0], floor) < 0
    except VersionError:
        return True
    return True
