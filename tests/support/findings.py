"""Picking the findings that matter out of a detector run."""

from __future__ import annotations

#: The severities a detector raises an incident with.
RAISED = ("critical", "warning")


def raised(findings, detector_id: str | None = None) -> list:
    """The ``critical`` and ``warning`` findings (of ``detector_id`` only, when given)."""
    return [f for f in findings if f.severity in RAISED and (detector_id is None or f.detector == detector_id)]
