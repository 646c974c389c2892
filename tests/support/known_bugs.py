"""Version verdicts of the known-bug data (``toolkit/knowledge/known_bugs.toml``) in one call."""

from __future__ import annotations

from toolkit.knowledge import get_known_bug, version_verdict


def verdict(bug_id: str, version: str | None = None, version_range=None):
    return version_verdict(get_known_bug(bug_id), version, version_range)
