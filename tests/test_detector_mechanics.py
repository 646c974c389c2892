"""Detector mechanics on small timelines written from real template wording (catalogue samples).

Each decision rule has a case that must fire and legitimate look-alikes that must stay quiet, for
every version family the detector covers.
"""

from __future__ import annotations

import pytest

from test_detectors import CHANGELOG, _eos_timeline, at, ev, make_timeline
from toolkit.detectors import run_detectors

RAISED = ("critical", "warning")
CLIENT = "orders-agg-db63a30b-1d50-404f-898c-780eca36b0b1"
T1 = f"{CLIENT}-StreamThread-1"
UPDATER = f"{CLIENT}-StateUpdater-1"


def raised(findings, detector_id):
    return [f for f in findings if f.detector == detector_id and f.severity in RAISED]


# --- eos-stale-restore-checkpoint ---------------------------------------------------------------

def _phase(phase, seconds, role="active", line_no=None, run_id="h0#1", event="TASK_RUNNING"):
    return {"host": "h0", "run_id": run_id, "stream_thread": T1, "task_id": "0_0", "role": role, "phase": phase,
            "start": at(seconds), "end": None, "event": event, "source": "h0/app.log", "line_no": line_no}


def _eos(spark, *, version="4.1.2", lifecycle=None, updater_lines=False, completed=True, **kw):
    """The KAFKA-20685 story of ``_eos_timeline`` with the crashed run's version, task phases and
    state-updater lines chosen by the test."""
    tl = _eos_timeline(spark, **kw)
    runs = [r.asDict() for r in tl.process_runs.collect()]
    for r in runs:
        r["version"] = version
    restorations = [r.asDict() for r in tl.restorations.collect()]
    if not completed:
        restorations = [dict(r, completed=False, end=None) if r["run_id"] == "h0#1" else r for r in restorations]
    events = [r.asDict() for r in tl.events.collect()]
    if updater_lines:
        events.append(ev(3, at(4), "Stateful active task 0_0 was added to the state updater", "RESTORE_QUEUED",
                         run_id="h0#1", task_id="0_0", thread=UPDATER, prefix_kind="state-updater"))
    checkpoints = [r.asDict() for r in tl.checkpoints.collect()]
    state = {"checkpoints": [r.asDict() for r in tl.state.checkpoints.collect()]}
    return make_timeline(spark, events=events, state=state, process_runs=runs, checkpoints=checkpoints,
                         restorations=restorations, task_lifecycles=list(lifecycle or []),
                         wipes=[r.asDict() for r in tl.wipes.collect()])


RUNNING_ACTIVE = [_phase("restoring", 5, event="RESTORE_QUEUED"), _phase("running", 6.5, line_no=12)]


@pytest.mark.parametrize("version,updater_lines", [("4.1.2", False), ("3.8.1", False), ("4.2.1", False),
                                                   ("3.6.1", True)])
def test_eos_stale_fires_for_a_running_active_task_on_affected_versions(spark, version, updater_lines):
    tl = _eos(spark, version=version, lifecycle=RUNNING_ACTIVE, updater_lines=updater_lines)
    (finding,) = raised(run_detectors(tl, only=["eos-stale-restore-checkpoint"]), "eos-stale-restore-checkpoint")
    assert finding.tasks == ["0_0"] and finding.confidence == "confirmed"


@pytest.mark.parametrize("case", ["standby", "crash-during-restoration", "closed-clean", "suspended",
                                  "3.6-updater-off", "4.1.3-fixed", "4.2.2-fixed", "4.3", "3.2"])
def test_eos_stale_quiet_on_legitimate_checkpoints(spark, case):
    lifecycle, version, completed = RUNNING_ACTIVE, "4.1.2", True
    if case == "standby":
        lifecycle = [_phase("running", 6.5, role="standby", event="STANDBY_UPDATING")]
    elif case == "crash-during-restoration":
        lifecycle, completed = [_phase("restoring", 5, event="RESTORE_QUEUED")], False
    elif case == "closed-clean":
        lifecycle = [*RUNNING_ACTIVE, _phase("closed-clean", 3000, event="TASK_CLOSED_CLEAN")]
    elif case == "suspended":
        lifecycle = [*RUNNING_ACTIVE, _phase("suspended", 3000, event="TASK_SUSPENDED")]
    else:
        version = {"3.6-updater-off": "3.6.1", "4.1.3-fixed": "4.1.3", "4.2.2-fixed": "4.2.2", "4.3": "4.3.0",
                   "3.2": "3.2.3"}[case]
    tl = _eos(spark, version=version, lifecycle=lifecycle, completed=completed)
    found = run_detectors(tl, only=["eos-stale-restore-checkpoint"])
    assert raised(found, "eos-stale-restore-checkpoint") == [], [f.title for f in found]
