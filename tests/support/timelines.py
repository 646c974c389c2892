"""Tiny timelines built by hand (no bundle parsing) for the detector, gate and run tests: each table holds the
rows a test gives (dicts; missing columns are null), with the real wording of the lines they stand for."""

from __future__ import annotations

from datetime import datetime, timedelta

T0 = datetime(2026, 3, 7, 9, 0, 0)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# --- a tiny timeline builder ----------------------------------------------------------------------


def event_schema():
    """The events table as the table registry declares it (``toolkit.tables``)."""
    from toolkit.tables import table

    return table("events").schema


def frame(spark, schema, rows_):
    names = [f.name for f in schema.fields]
    unknown = {k for r in rows_ for k in r} - set(names)
    assert not unknown, f"columns not in the schema: {unknown}"
    return spark.createDataFrame([tuple(r.get(n) for n in names) for r in rows_], schema)


def make_timeline(spark, *, events=(), state=None, **tables):
    """A Timeline whose tables hold the given rows (dicts; missing columns are null)."""
    from toolkit.state.schemas import STATE_SCHEMAS
    from toolkit.timeline import StateFacts, Timeline
    from toolkit.tables import table
    from toolkit.timeline.schemas import TABLES

    state = state or {}
    facts = StateFacts(**{name: frame(spark, schema, state.get(name, [])) for name, schema in STATE_SCHEMAS.items()})
    derived = {name: frame(spark, schema, tables.get(name, [])) for name, schema in TABLES.items()}
    config = spark.createDataFrame([], table("config").timeline_schema)
    return Timeline(events=frame(spark, event_schema(), list(events)), config=config, state=facts, **derived)


def ev(line_no, ts, message, event, host="h0", source=None, **fields):
    return {"source": source or f"{host}/app.log", "line_no": line_no, "host": host, "ts": ts, "message": message,
            "event": event, "product": fields.pop("product", "kafka-streams"), **fields}


# --- eos-stale-restore-checkpoint ------------------------------------------------------------------

CRASHED_EOS = [
    {"host": "h0", "run_id": "h0#1", "run_no": 1, "product": "kafka-streams", "version": "4.1.2", "start": at(0),
     "end": at(3600), "end_kind": "crash", "guarantee": "exactly_once_v2", "commit_interval_ms": 100,
     "end_source": "h0/app.log", "end_line_no": 30},
    {"host": "h0", "run_id": "h0#2", "run_no": 2, "product": "kafka-streams", "version": "4.1.2", "start": at(3700),
     "end": at(3800), "end_kind": "unknown", "guarantee": "exactly_once_v2"},
]
CHANGELOG = "app-store-changelog"


def eos_timeline(spark, *, end_kind="crash", with_write=True, wiped=False, capture=False):
    runs = [dict(r) for r in CRASHED_EOS]
    runs[0]["end_kind"] = end_kind
    events = [
        ev(10, at(6), f"Finished restoring changelog {CHANGELOG}-0 to store store with a total number of 5 records",
           "RESTORE_END", run_id="h0#1", topic=CHANGELOG, partition=0, records=5),
        ev(11, at(6), f"Writing checkpoint: {{{CHANGELOG}-0=1000}} for task 0_0", "CHECKPOINT_WRITTEN",
           run_id="h0#1", task_id="0_0", topic=CHANGELOG, partition=0, offset=1000),
        ev(30, at(3600), "Processed 100 total records", "PROCESSING_SUMMARY", run_id="h0#1"),
        ev(40, at(3705), f"State store store initialized from checkpoint with offset 1000 at changelog {CHANGELOG}-0",
           "CHECKPOINT_READ", run_id="h0#2", task_id="0_0", topic=CHANGELOG, partition=0, offset=1000),
        ev(41, at(3710), f"Finished restoring changelog {CHANGELOG}-0 to store store with a total number of 500 records",
           "RESTORE_END", run_id="h0#2", topic=CHANGELOG, partition=0, records=500),
    ]
    checkpoints = [
        {"host": "h0", "task_id": "0_0", "topic": CHANGELOG, "partition": 0, "ts": at(3705), "kind": "read",
         "offset": 1000, "origin": "log", "run_id": "h0#2", "source": "h0/app.log", "line_no": 40},
    ]
    if with_write:
        checkpoints.append({"host": "h0", "task_id": "0_0", "topic": CHANGELOG, "partition": 0, "ts": at(6),
                            "kind": "written", "offset": 1000, "origin": "log", "run_id": "h0#1",
                            "source": "h0/app.log", "line_no": 11})
    restorations = [
        {"host": "h0", "run_id": "h0#1", "task_id": "0_0", "topic": CHANGELOG, "partition": 0, "start": at(5),
         "end": at(6), "end_offset": 1001, "records": 5, "completed": True, "source": "h0/app.log", "line_no": 10},
        {"host": "h0", "run_id": "h0#2", "task_id": "0_0", "topic": CHANGELOG, "partition": 0, "start": at(3705),
         "end": at(3710), "start_offset": 1001, "end_offset": 1501, "records": 500, "completed": True,
         "source": "h0/app.log", "line_no": 41, "start_source": "h0/app.log", "start_line_no": 40},
    ]
    wipes = [{"host": "h0", "run_id": "h0#2", "task_id": "0_0", "ts": at(3705), "reason": "task-corrupted",
              "source": "h0/app.log", "line_no": 40}] if wiped else []
    state = {"checkpoints": [{"host": "h0", "source": "h0/state.tar.gz", "task_id": "0_0", "topic": CHANGELOG,
                              "partition": 0, "offset": 1000, "file": "app/0_0/.checkpoint", "file_mtime": at(6),
                              "capture_time": at(1800)}]} if capture else None
    return make_timeline(spark, events=events, state=state, process_runs=runs, checkpoints=checkpoints,
                         restorations=restorations, wipes=wipes)


def migration_step(table, ts, step, line_no, error_code=None, origin="cloudtrail"):
    return {"table": table, "base_table": table.removesuffix("_migration"), "ts": ts, "step": step, "origin": origin,
            "host": None, "error_code": error_code, "detail": f"{step} {error_code or ''}",
            "source": "cloudtrail.json", "line_no": line_no}


CLIENT = "orders-agg-db63a30b-1d50-404f-898c-780eca36b0b1"
T1 = f"{CLIENT}-StreamThread-1"
UPDATER = f"{CLIENT}-StateUpdater-1"


# --- eos-stale-restore-checkpoint ---------------------------------------------------------------

def task_phase(phase, seconds, role="active", line_no=None, run_id="h0#1", event="TASK_RUNNING"):
    return {"host": "h0", "run_id": run_id, "stream_thread": T1, "task_id": "0_0", "role": role, "phase": phase,
            "start": at(seconds), "end": None, "event": event, "source": "h0/app.log", "line_no": line_no}


def eos_versioned_timeline(spark, *, version="4.1.2", lifecycle=None, updater_lines=False, completed=True, **kw):
    """The KAFKA-20685 story of ``eos_timeline`` with the crashed run's version, task phases and
    state-updater lines chosen by the test."""
    tl = eos_timeline(spark, **kw)
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


RUNNING_ACTIVE = [task_phase("restoring", 5, event="RESTORE_QUEUED"), task_phase("running", 6.5, line_no=12)]


LEDGER = "ledger-ledger-store-changelog"
L1, L2 = "ledger-StreamThread-1", "ledger-StreamThread-2"


def standby_timeline(spark, *, version="2.0.1", role="standby", prior=True, lock=True, capture=False, restore=True):
    """Thread 2 fails to lock standby 1_0 held by thread 1; the cleaner deletes 1_0; a checkpoint comes back."""
    task_prefix = "standby-task" if role == "standby" else "task"
    kind = "standby" if role == "standby" else "stream"
    events = [
        ev(2, at(2), f"{task_prefix} [1_0] Writing checkpoint: {{{LEDGER}-0=48211}}", "CHECKPOINT_WRITTEN",
           run_id="h0#1", task_id="1_0", topic=LEDGER, partition=0, offset=48211, stream_thread=L1),
        ev(9, at(1200), "Deleting obsolete state directory 1_0 for task 1_0 as 1196311ms has elapsed "
                        "(cleanup delay is 600000ms).", "DIR_CLEANED", run_id="h0#1", task_id="1_0"),
        ev(12, at(1920), f"{task_prefix} [1_0] Writing checkpoint: {{{LEDGER}-0=48211}}", "CHECKPOINT_WRITTEN",
           run_id="h0#1", task_id="1_0", topic=LEDGER, partition=0, offset=48211, stream_thread=L2),
        ev(20, at(3660), f"Restoring partition {LEDGER}-0 from offset 48211 to endOffset 61877", "RESTORE_START",
           run_id="h0#1", topic=LEDGER, partition=0, offset=48211, end_offset=61877, stream_thread=L2),
        ev(3, at(2.5), f"partition assignment took 52 ms.\n\tcurrently assigned active tasks: []\n\t"
                       f"currently assigned {role} tasks: [1_0]\n", "ASSIGNMENT_APPLIED", run_id="h0#1",
           stream_thread=L2),
    ]
    if lock:
        events.append(ev(5, at(3), f"Could not create {kind} task 1_0 due to {task_prefix} [1_0] Failed to lock the "
                                   "state directory for task 1_0; will retry", "LOCK_FAILED", run_id="h0#1",
                         task_id="1_0", stream_thread=L2))
    checkpoints = [{"host": "h0", "task_id": "1_0", "topic": LEDGER, "partition": 0, "ts": at(1920), "kind": "written",
                    "offset": 48211, "origin": "log", "run_id": "h0#1", "source": "h0/app.log", "line_no": 12}]
    if prior:
        checkpoints.append({"host": "h0", "task_id": "1_0", "topic": LEDGER, "partition": 0, "ts": at(2),
                            "kind": "written", "offset": 48211, "origin": "log", "run_id": "h0#1",
                            "source": "h0/app.log", "line_no": 2})
    if not lock:  # INFO only: neither TRACE line nor the DEBUG restore start
        events = [e for e in events if e["line_no"] in (3, 9)]
        checkpoints = []
    state = None
    if capture:
        state = {"checkpoints": [{"host": "h0", "source": "h0/state.tar.gz", "task_id": "1_0", "topic": LEDGER,
                                  "partition": 0, "offset": 48211, "file": "ledger/1_0/.checkpoint",
                                  "file_mtime": at(1920), "capture_time": at(2400)}],
                 "state_files": [{"host": "h0", "source": "h0/state.tar.gz", "task_id": "1_0", "kind": "checkpoint",
                                  "path": "ledger/1_0/.checkpoint"}]}
    return make_timeline(
        spark, events=events, state=state,
        process_runs=[{"host": "h0", "run_id": "h0#1", "run_no": 1, "version": version, "start": at(0),
                       "end": at(4000), "end_kind": "unknown", "guarantee": "at_least_once", "num_standby_replicas": 1,
                       "num_stream_threads": 2}],
        task_lifecycles=[{"host": "h0", "run_id": "h0#1", "stream_thread": L1, "task_id": "1_0", "role": role,
                          "phase": "running", "start": at(0), "end": at(10), "source": "h0/app.log", "line_no": 1},
                         {"host": "h0", "run_id": "h0#1", "stream_thread": L2, "task_id": "1_0", "role": role,
                          "phase": "assigned", "start": at(2.5), "end": at(4000), "source": "h0/app.log",
                          "line_no": 3}],
        locks=[{"host": "h0", "run_id": "h0#1", "task_id": "1_0", "kind": "failed", "ts": at(3), "thread": L2,
                "role": "active", "holder_thread": L1, "source": "h0/app.log", "line_no": 5}] if lock else [],
        dir_cleanups=[{"host": "h0", "run_id": "h0#1", "task_id": "1_0", "ts": at(1200), "source": "h0/app.log",
                       "line_no": 9}],
        checkpoints=checkpoints,
        restorations=[{"host": "h0", "run_id": "h0#1", "topic": LEDGER, "partition": 0, "start": at(3660),
                       "start_offset": 48211, "end_offset": 61877, "completed": False,
                       "start_source": "h0/app.log", "start_line_no": 20}] if restore and lock else [],
    )


AUDIT = "AuditTrailBatch-store1-changelog"
A1, A2 = "AuditTrailBatch-StreamThread-1", "AuditTrailBatch-StreamThread-2"


def skipped_restore_timeline(spark, *, version="2.1.1", kind="from-beginning", second_thread=A1):
    common = {"run_id": "h0#1"}
    events = [
        ev(1, at(0), f"stream-thread [{A1}] Restoring partition {AUDIT}-1 from offset 0 to endOffset 734112",
           "RESTORE_START", topic=AUDIT, partition=1, offset=0, end_offset=734112, stream_thread=A1, **common),
        ev(2, at(40), f"stream-thread [{A1}] State transition from PARTITIONS_ASSIGNED to RUNNING", "THREAD_STATE",
           to_state="RUNNING", stream_thread=A1, **common),
        ev(5, at(4001), f"stream-thread [{second_thread}] State transition from PARTITIONS_ASSIGNED to RUNNING",
           "THREAD_STATE", to_state="RUNNING", stream_thread=second_thread, **common),
    ]
    if kind == "from-beginning":  # at-least-once: the INFO line is printed although nothing is restored
        events.append(ev(3, at(4000), f"stream-thread [{second_thread}] Restoring task 1_1's state store store1 from "
                                      f"beginning of the changelog {AUDIT}-1 ", "RESTORE_START", task_id="1_1",
                         store="store1", topic=AUDIT, partition=1, stream_thread=second_thread, **common))
    elif kind == "tail":  # a checkpoint exists: only the tail is skipped (DEBUG)
        events.append(ev(3, at(4000), f"stream-thread [{second_thread}] Restoring partition {AUDIT}-1 from offset "
                                      "790001 to endOffset 802377", "RESTORE_START", topic=AUDIT, partition=1,
                         offset=790001, end_offset=802377, stream_thread=second_thread, **common))
    else:  # exactly-once, as in the ticket's log
        events.append(ev(3, at(4000), f"stream-thread [{second_thread}]No checkpoint found for task 1_1 state store "
                                      f"store1 changelog {AUDIT}-1 with EOS turned on. Reinitializing the task and "
                                      "restore its state from the beginning.", "CHECKPOINT_MISSING", task_id="1_1",
                         store="store1", topic=AUDIT, partition=1, stream_thread=second_thread, **common))
    return make_timeline(spark, events=events,
                         process_runs=[{"host": "h0", "run_id": "h0#1", "run_no": 1, "version": version}])


def failed_lock(task, seconds, line_no, thread="app-StreamThread-2", holder="app-StreamThread-1"):
    return {"host": "h0", "run_id": "h0#1", "task_id": task, "kind": "failed", "ts": at(seconds), "thread": thread,
            "role": "active", "holder_thread": holder, "source": "h0/app.log", "line_no": line_no}


def runs_ending(end_kinds, guarantee="at_least_once") -> list[dict]:
    """Consecutive runs on h0, 100 s apart, ending as ``end_kinds`` says (with the lines of their starts and ends)."""
    return [{"host": "h0", "run_id": f"h0#{n}", "run_no": n, "product": "kafka-streams", "start": at(100 * n),
             "end": at(100 * n + 50), "end_kind": kind, "guarantee": guarantee, "end_source": "h0/app.log",
             "end_line_no": 10 * n, "source": "h0/app.log", "line_no": 10 * n - 5}
            for n, kind in enumerate(end_kinds, 1)]
