"""Timeline -> findings: small registered detectors that name a root cause with its evidence lines.

Each detector lives in its own module of this package, registers itself with
:func:`detector` under a stable id and has a playbook of the same name
(``playbooks/<id>.md``). :func:`run_detectors` runs them all (or some) on a
:class:`~toolkit.timeline.Timeline` and ranks the findings: severity, then the detector's role (root
cause, trigger, consequence), then confidence, then time. Each detector sees a view of the timeline
holding only the tables it declares in ``needs``. A detector whose declared precondition (``requires``,
:mod:`toolkit.detectors.preconditions`) the timeline provably lacks is skipped: the preconditions of all
selected detectors are checked in one query first. A detector that raises becomes a finding of status
``error`` ("detector X failed: ...") instead of ending the run. The log lines that findings cite are
read for all findings at once, in one join. :func:`findings_to_json` gives the machine-readable form
documented in ``docs/findings-schema.md``.

The package is split by job, and re-exports the public names of each:

* :mod:`~toolkit.detectors.base` -- findings, evidence, the ``@detector`` decorator and the registry it fills;
* :mod:`~toolkit.detectors.registry` -- which modules hold the built-in detectors, loaded on first use;
* :mod:`~toolkit.detectors.runner` -- the gate, the views, running several detectors at once, ranking;
* :mod:`~toolkit.detectors.evidence` -- the cited lines read in one join, the evidence already kept;
* :mod:`~toolkit.detectors.serialise` -- findings to and from JSON;
* :mod:`~toolkit.detectors.verdict` -- what a run concludes, decided once for ``detect``'s text and the report;
* :mod:`~toolkit.detectors.harness` -- one detector on a few rows typed in a test or a notebook (not re-exported:
  it is imported where it is used);
* :mod:`~toolkit.detectors.common` -- the helpers detectors share (:mod:`toolkit.detectors.helpers`).

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

from toolkit.detectors.base import (
    CONFIDENCES,
    ERROR,
    EVIDENCE_KINDS,
    FINDING_SEVERITIES,
    MAX_EVIDENCE,
    REGISTRY,
    ROLES,
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
from toolkit.detectors.evidence import CONFIG_DUMP_POINTER, drop_logging_already_kept, resolve_evidence
from toolkit.detectors.registry import DETECTOR_MODULES, registered_detectors
from toolkit.detectors.runner import (
    CONCURRENT_DETECTORS,
    DetectorResults,
    SharedResults,
    TimelineView,
    gate_detectors,
    run_detectors,
)
from toolkit.detectors.serialise import (FindingsError, check_findings_json, findings_from_json, findings_to_json,
                                         read_findings)

__all__ = [
    "CONCURRENT_DETECTORS",
    "CONFIDENCES",
    "CONFIG_DUMP_POINTER",
    "DETECTOR_MODULES",
    "ERROR",
    "EVIDENCE_KINDS",
    "FINDING_SEVERITIES",
    "MAX_EVIDENCE",
    "REGISTRY",
    "ROLES",
    "SCHEMA_VERSION",
    "SEVERITIES",
    "DetectorSpec",
    "Evidence",
    "Finding",
    "Impact",
    "detector",
    "DetectorResults",
    "SharedResults",
    "drop_logging_already_kept",
    "FindingsError",
    "check_findings_json",
    "findings_from_json",
    "read_findings",
    "findings_to_json",
    "gate_detectors",
    "iso_utc",
    "playbook_path",
    "registered_detectors",
    "resolve_evidence",
    "run_detectors",
    "TimelineView",
]
