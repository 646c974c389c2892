"""Findings to and from the JSON object documented in ``docs/findings-schema.md``."""

from __future__ import annotations

from typing import Any, Sequence

from toolkit.detectors.base import FINDING_SEVERITIES, SCHEMA_VERSION, Evidence, Finding, Impact


def findings_to_json(findings: Sequence[Finding], **context: Any) -> dict[str, Any]:
    """The findings as one JSON-ready object (schema: ``docs/findings-schema.md``).

    ``context`` adds top-level keys such as ``bundle``; the keys ``schema_version``, ``findings``
    and ``summary`` are always present.
    """
    counts = {s: sum(1 for f in findings if f.severity == s) for s in FINDING_SEVERITIES}
    return {
        "schema_version": SCHEMA_VERSION,
        **context,
        "summary": {"findings": len(findings), **counts,
                    "detectors": sorted({f.detector for f in findings})},
        "findings": [f.to_json() for f in findings],
    }


def findings_from_json(data: dict[str, Any]) -> list[Finding]:
    """Rebuild :class:`Finding` objects from :func:`findings_to_json` output (times stay strings)."""
    out = []
    for item in data.get("findings", []):
        item = dict(item)
        item["evidence"] = [Evidence(**e) for e in item.get("evidence", [])]
        item["impact"] = Impact(**item["impact"]) if item.get("impact") else None
        out.append(Finding(**item))
    return out
