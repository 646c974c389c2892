"""Every helper detectors share, in one import (``from toolkit.detectors.common import ...``).

The helpers live in :mod:`toolkit.detectors.helpers`, one module per subject; this module only re-exports
them, so the detector modules keep a single import line and a helper can move between subjects without
touching them.
"""

from __future__ import annotations

from toolkit.detectors.helpers.frames import (
    MAX_FACT_ROWS,
    Bounded,
    all_rows,
    bounded,
    event_is,
    events_of,
    first_line,
    has_rows,
    rows,
    shared,
)
from toolkit.detectors.helpers.values import (
    fmt_int,
    fmt_ts,
    in_spark_order,
    spark_order,
    unix_millis,
    unix_seconds,
)
from toolkit.detectors.helpers.citing import (
    evidence_at,
    evidence_lines,
    log_evidence,
    log_refs,
    merge_evidence,
    missing_steps,
)
from toolkit.detectors.helpers.runs import (
    EOS_PREFIX,
    EOS_RUN_SQL,
    MAX_RUNS,
    NOT_NIFI_SQL,
    STATE_UPDATER_EVENTS,
    STATE_UPDATER_KEY,
    is_eos_guarantee,
    run_rows,
    run_versions,
    state_updater_of_runs,
)
from toolkit.detectors.helpers.versions import (
    bug_status,
    default_state_updater,
    known_bug_sentences,
    may_predate,
    version_args,
)
from toolkit.detectors.helpers.captures import (
    captured_checkpoint_rows,
    captured_checkpoints,
)
from toolkit.detectors.helpers.streams import (
    STREAMS_LOSS_EPISODE_S,
    STREAMS_LOSS_STATES,
    streams_loss_lines,
    streams_task_losses,
    summary_before,
)

__all__ = [
    "first_line",
    "event_is",
    "events_of",
    "rows",
    "Bounded",
    "bounded",
    "MAX_FACT_ROWS",
    "all_rows",
    "has_rows",
    "shared",
    "spark_order",
    "in_spark_order",
    "unix_millis",
    "unix_seconds",
    "fmt_int",
    "fmt_ts",
    "log_evidence",
    "log_refs",
    "evidence_at",
    "evidence_lines",
    "merge_evidence",
    "missing_steps",
    "EOS_PREFIX",
    "EOS_RUN_SQL",
    "NOT_NIFI_SQL",
    "is_eos_guarantee",
    "MAX_RUNS",
    "run_rows",
    "run_versions",
    "STATE_UPDATER_EVENTS",
    "STATE_UPDATER_KEY",
    "state_updater_of_runs",
    "version_args",
    "bug_status",
    "known_bug_sentences",
    "default_state_updater",
    "may_predate",
    "captured_checkpoints",
    "captured_checkpoint_rows",
    "summary_before",
    "STREAMS_LOSS_STATES",
    "STREAMS_LOSS_EPISODE_S",
    "streams_loss_lines",
    "streams_task_losses",
]
