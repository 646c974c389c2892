"""Timeline -> findings: small registered detectors that name a root cause with its evidence lines.

Each detector lives in its own module of this package, registers itself with
:func:`detector` under a stable id and has a playbook of the same name
(``playbooks/<id>.md``). :func:`run_detectors` runs them all (or some) on a
:class:`~toolkit.timeline.Timeline` and ranks the findings: severity, then confidence, then time.
A detector that raises becomes an ``info`` finding ("detector X failed: ...") instead of ending
the run. :func:`findings_to_json` gives the machine-readable form documented in
``docs/findings-schema.md``.

Seed detectors (one per incident class of the sample bundles):

* ``eos-stale-restore-checkpoint`` (KAFKA-20685), ``standby-lock-stale-checkpoint`` (KAFKA-8187),
  ``restore-skipped-after-reassignment`` (KAFKA-7672), ``alos-crash-reprocessing``,
  ``kinesis-checkpoint-migration-loss`` (NIFI-16003).

General detectors: ``rebalance-storm``, ``lock-contention``, ``restore-from-scratch``,
``eos-task-corruption-wipe``, ``unclean-shutdown``, ``cleaner-races-assignment``,
``eos-checkpoint-stale-during-running``, and for NiFi's own state ``nifi-component-state-reset``,
``nifi-flowfile-repo-not-restored``, ``nifi-checkpoints-stopped``.
"""

from __future__ import annotations

import importlib
import traceback
from typing import Any, Iterable, Sequence

from toolkit.detectors.base import (
    CONFIDENCES,
    EVIDENCE_KINDS,
    REGISTRY,
    SCHEMA_VERSION,
    SEVERITIES,
    DetectorSpec,
    Evidence,
    Finding,
    Impact,
    detector,
    iso_utc,
    playbook_path,
)

#: Modules that register the built-in detectors (imported on first use).
DETECTOR_MODULES: tuple[str, ...] = (
    "eos_stale_restore_checkpoint",
    "standby_lock_stale_checkpoint",
    "restore_skipped_after_reassignment",
    "alos_crash_reprocessing",
    "kinesis_checkpoint_migration_loss",
    "rebalance_storm",
    "lock_contention",
    "restore_from_scratch",
    "eos_task_corruption_wipe",
    "unclean_shutdown",
    "cleaner_races_assignment",
    "eos_checkpoint_stale_during_running",
)
#: NiFi repository and component-state detectors.
DETECTOR_MODULES += ("nifi_component_state_reset", "nifi_flowfile_repo_not_restored", "nifi_checkpoints_stopped")

__all__ = [
    "CONFIDENCES",
    "EVIDENCE_KINDS",
    "SCHEMA_VERSION",
    "SEVERITIES",
    "DetectorSpec",
    "Evidence",
    "Finding",
    "Impact",
    "detector",
    "findings_from_json",
    "findings_to_json",
    "registered_detectors",
    "run_detectors",
]


def _load_builtin() -> None:
    for name in DETECTOR_MODULES:
        importlib.import_module(f"{__name__}.{name}")


def registered_detectors() -> dict[str, DetectorSpec]:
    """Every registered detector by id (the built-in ones are imported on first call)."""
    _load_builtin()
    return dict(sorted(REGISTRY.items()))


def _failure_finding(spec: DetectorSpec, exc: BaseException) -> Finding:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" (at {last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno})" if last else ""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return Finding(
        detector=spec.id,
        severity="info",
        confidence="possible",
        title=f"detector {spec.id} failed: {type(exc).__name__}: {message}"[:300],
        explanation=(f"The detector raised {type(exc).__name__}{where}; its root cause could not be checked. "
                     "The other detectors ran normally. Please report this with the bundle's ingest.json."),
    )


def run_detectors(timeline: Any, only: Iterable[str] | None = None) -> list[Finding]:
    """Run the registered detectors (or the ids in ``only``) on ``timeline``; ranked findings.

    Ranking: severity (critical, warning, info), then confidence (confirmed, likely, possible),
    then the time of the first relevant event. An unknown id in ``only`` raises ``KeyError``.
    """
    specs = registered_detectors()
    if only is not None:
        wanted = list(only)
        unknown = [d for d in wanted if d not in specs]
        if unknown:
            raise KeyError(f"unknown detector(s): {', '.join(unknown)}; known: {', '.join(specs)}")
        specs = {d: specs[d] for d in wanted}
    findings: list[Finding] = []
    for spec in specs.values():
        absent = [name for name in spec.needs if not hasattr(timeline, name)]
        if absent:
            findings.append(_failure_finding(spec, AttributeError(f"timeline has no {', '.join(absent)}")))
            continue
        try:
            produced = list(spec.fn(timeline) or [])
        except Exception as exc:  # a broken detector must not hide the others' findings
            produced = [_failure_finding(spec, exc)]
        findings.extend(produced)
    return sorted(findings, key=Finding.rank_key)


def findings_to_json(findings: Sequence[Finding], **context: Any) -> dict[str, Any]:
    """The findings as one JSON-ready object (schema: ``docs/findings-schema.md``).

    ``context`` adds top-level keys such as ``bundle``; the keys ``schema_version``, ``findings``
    and ``summary`` are always present.
    """
    counts = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}
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
