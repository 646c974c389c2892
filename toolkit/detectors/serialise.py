"""Findings to and from the JSON object documented in ``docs/findings-schema.md``."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
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


def _known(cls: type, item: dict[str, Any]) -> dict[str, Any]:
    """The keys of ``item`` that are fields of the dataclass ``cls``."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in item.items() if k in names}


class FindingsError(ValueError):
    """A findings document that does not conform to its schema; the message names every problem."""


def check_findings_json(data: Any, where: str = "findings.json") -> None:
    """Raise :class:`FindingsError` when ``data`` breaks the JSON Schema of ``findings.json``
    (``toolkit/resources/schemas/findings.schema.json``, documented in ``docs/findings-schema.md``)."""
    from toolkit.validation import schema_problems

    problems = schema_problems(data, "findings")
    if problems:
        raise FindingsError(f"{where} does not conform to its schema: " + "; ".join(problems[:10])
                            + (f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""))


def read_findings(path: str | Path) -> tuple[dict[str, Any], list[Finding]]:
    """A ``findings.json`` file read, checked against its schema, and its findings rebuilt."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise FindingsError(f"{path} is not JSON: {exc}") from None
    return data, findings_from_json(data, where=str(path))


def findings_from_json(data: dict[str, Any], where: str = "findings.json") -> list[Finding]:
    """Rebuild :class:`Finding` objects from :func:`findings_to_json` output (times stay strings), after checking
    it against the schema (:func:`check_findings_json`)."""
    check_findings_json(data, where)
    out = []
    for item in data.get("findings", []):
        # keys added by a later version are ignored, as docs/findings-schema.md tells every reader to
        item = _known(Finding, item)
        item["evidence"] = [Evidence(**_known(Evidence, e)) for e in item.get("evidence", [])]
        item["impact"] = Impact(**_known(Impact, item["impact"])) if item.get("impact") else None
        out.append(Finding(**item))
    return out
