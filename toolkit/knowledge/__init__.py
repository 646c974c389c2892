"""Knowledge that is data, not code: known upstream issues and how to collect better evidence.

* ``known_bugs.toml`` + :mod:`toolkit.knowledge.known_bugs` — upstream issues relevant to state
  and checkpoints, the detectors they explain, and version verdicts
  (:func:`load_known_bugs`, :func:`bugs_for_detector`, :func:`version_verdict`).
* ``loggers.toml`` + :mod:`toolkit.knowledge.collect` — the loggers each detector needs, rendered
  in four configuration syntaxes (:func:`logger_snippet`), the pointers a finding puts in its
  ``missing_evidence`` (:func:`missing_evidence_steps`) and the ``collect-guide`` text
  (:func:`render_guide`, :func:`write_playbook`).

Standard library only; no Spark.
"""

from toolkit.knowledge.collect import (
    LoggerSpec,
    LoggingStep,
    evidence_pointer,
    logger_snippet,
    logging_steps,
    missing_evidence_steps,
    render_guide,
    write_playbook,
)
from toolkit.knowledge.known_bugs import (
    KnownBug,
    Verdict,
    bugs_for_detector,
    get_known_bug,
    load_known_bugs,
    verdicts_for_detector,
    version_verdict,
)
from toolkit.knowledge.versions import compare_versions, parse_version

__all__ = [
    "KnownBug",
    "LoggerSpec",
    "LoggingStep",
    "Verdict",
    "bugs_for_detector",
    "compare_versions",
    "evidence_pointer",
    "get_known_bug",
    "load_known_bugs",
    "logger_snippet",
    "logging_steps",
    "missing_evidence_steps",
    "parse_version",
    "render_guide",
    "verdicts_for_detector",
    "version_verdict",
    "write_playbook",
]
