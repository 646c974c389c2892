"""NiFi repository checkpoints and component-state changes: the ``nifi_checkpoints`` and ``nifi_state_changes``
tables (schemas in :mod:`toolkit.timeline.schemas`).

Both merge log lines (origin ``log``, with ``source``/``line_no``) and state facts read from the write-ahead logs
on disk (origin ``capture``, ``ts`` = the file's mtime, which bounds when its last record was written). DataFrame
API only; the state facts are small, the events are filtered to a handful of NiFi events first.

Which repository a ``WAL_*`` line serves is not in its text (the same class logs for the FlowFile repository and,
in 2.x, for the local state provider): a path in the line decides first, then the thread (``Write-Ahead Local
State Provider Maintenance`` is the local state provider's), then the FlowFile repository line that follows on
the same thread, then the repository of the preceding line on that thread in the same run.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from toolkit.sqltext import sql_list, sql_str
from toolkit.timeline.sql import _conform, quoted, sql_map

# The columns rows of one origin never have (typed nulls; see ``_conform``): a log line has no capture file,
# a capture fact no line, run, event or thread.
_LOG_ABSENT = ("file_mtime", "capture_time", "complete")
_CAPTURE_ABSENT = ("run_id", "swap_files", "duration_ms", "event", "thread", "line_no")
_LOG_STATE_ABSENT = ("state_version", "entries_before", "entries_after", "listing_before", "listing_after",
                     "file_mtime")
_CAPTURE_STATE_ABSENT = ("run_id", "component_type", "records", "event", "line_no")

#: event -> (repository or None when the line does not say, kind)
CHECKPOINT_EVENTS: dict[str, tuple[str | None, str]] = {
    "FLOWFILE_REPO_CHECKPOINT_STARTED": ("flowfile", "checkpoint_started"),
    "FLOWFILE_REPO_CHECKPOINTED": ("flowfile", "checkpointed"),
    "FLOWFILE_REPO_CHECKPOINT_FAILED": ("flowfile", "checkpoint_failed"),
    "FLOWFILE_REPO_INITIALIZED": ("flowfile", "initialized"),
    "FLOWFILE_REPO_RESTORED": ("flowfile", "restored"),
    "FLOWFILE_REPO_ORPHANED": ("flowfile", "orphaned"),
    "FLOWFILE_REPO_ORPHANS_DROPPED": ("flowfile", "orphans_dropped"),
    "STATE_PROVIDER_CHECKPOINT_FAILED": ("local_state", "checkpoint_failed"),
    "WAL_RECOVERY_STARTED": (None, "recovery_started"),
    "WAL_SNAPSHOT_MISSING": (None, "snapshot_missing"),
    "WAL_SNAPSHOT_RECOVERED": (None, "snapshot_recovered"),
    "WAL_SNAPSHOT_RESTORED": (None, "snapshot_restored"),
    "WAL_SNAPSHOT_EMPTY": (None, "snapshot_empty"),
    "WAL_JOURNAL_RECOVERED": (None, "journal_recovered"),
    "WAL_JOURNAL_TRUNCATED": (None, "journal_truncated"),
    "WAL_JOURNAL_NUL_BYTES": (None, "journal_nul_bytes"),
    "WAL_JOURNAL_POISONED": (None, "journal_poisoned"),
    "WAL_RECOVERED": (None, "recovered"),
    "WAL_CHECKPOINTED": (None, "checkpointed"),
    "WAL_CHECKPOINT_FAILED": (None, "checkpoint_failed"),
}

#: event -> kind in ``nifi_state_changes``
STATE_EVENTS: dict[str, str] = {
    "COMPONENT_STATE_CLEARED": "reset_detected",
    "COMPONENT_STATE_SAVE_FAILED": "save_failed",
    "COMPONENT_STATE_READ_FAILED": "read_failed",
    "LISTING_CREATED": "listed",
    "STATE_CLEAR_FAILED": "clear_failed",
}

LOCAL_STATE_THREAD = "Write-Ahead Local State Provider Maintenance"
#: AbstractListProcessor's state key: the newest modification time already listed (epoch millis).
LISTING_TIMESTAMP_KEY = "listing.timestamp"
#: The state keys that hold a List processor's high-water mark (epoch millis), first found wins:
#: ``AbstractListProcessor`` (ListFile, ListSFTP, ..., and ListHDFS before 1.23) ``listing.timestamp``;
#: ListHDFS from 1.23 (NIFI-11178) ``latest.timestamp``; ListS3 ``currentTimestamp``.
LISTING_TIMESTAMP_KEYS = (LISTING_TIMESTAMP_KEY, "latest.timestamp", "currentTimestamp")


def _repository_from_path(path: str) -> str:
    """SQL: the repository a path belongs to, null when it does not say."""
    return (f"CASE WHEN contains({path}, 'flowfile_repository') THEN 'flowfile'"
            f" WHEN {path} RLIKE '(^|/)state/local(/|$)' OR {path} RLIKE '(^|/)local$' THEN 'local_state' END")


#: Events whose problem text is worth a column.
_PROBLEM_EVENTS = ("FLOWFILE_REPO_CHECKPOINT_FAILED", "WAL_CHECKPOINT_FAILED", "STATE_PROVIDER_CHECKPOINT_FAILED",
                   "WAL_JOURNAL_POISONED", "WAL_JOURNAL_TRUNCATED", "WAL_JOURNAL_NUL_BYTES", "WAL_SNAPSHOT_EMPTY")


def checkpoint_rows_from_logs(events: DataFrame) -> DataFrame:
    """Log half of ``nifi_checkpoints``: one row per repository life-cycle line."""
    ev = events.where(f"product = 'nifi' AND event IN ({sql_list(CHECKPOINT_EVENTS)})")
    fixed = sql_map({k: v[0] for k, v in CHECKPOINT_EVENTS.items() if v[0]})
    kinds = sql_map({k: v[1] for k, v in CHECKPOINT_EVENTS.items()})
    by_path = _repository_from_path("coalesce(path, '')")
    ev = ev.selectExpr("*", "coalesce(thread, '') AS _thread")
    ev = ev.selectExpr(
        "*", f"coalesce({fixed}[event], {by_path}, CASE WHEN _thread = {sql_str(LOCAL_STATE_THREAD)}"
             " THEN 'local_state' END) AS _repo")
    order = "PARTITION BY host, run_id, _thread ORDER BY ts, line_no"
    ev = ev.withColumn("_next", F.expr(f"lead(event) OVER ({order})"))
    ev = ev.withColumn("_repo", F.expr(
        "coalesce(_repo, CASE WHEN event = 'WAL_CHECKPOINTED' AND _next = 'FLOWFILE_REPO_CHECKPOINTED'"
        " THEN 'flowfile' END)"))
    ev = ev.withColumn("_repo", F.expr(
        f"coalesce(_repo, last(_repo, true) OVER ({order} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),"
        " 'unknown')"))
    # The FlowFile repository's own line says the same as its write-ahead log's: count each checkpoint once.
    kind = (f"CASE WHEN event = 'WAL_CHECKPOINTED' AND _repo = 'flowfile' THEN 'wal_checkpointed'"
            f" ELSE {kinds}[event] END")
    swap = ("CASE WHEN event = 'FLOWFILE_REPO_RESTORED' THEN count"
            " WHEN event IN ('WAL_CHECKPOINTED', 'WAL_SNAPSHOT_RESTORED') THEN count"
            " WHEN event = 'WAL_SNAPSHOT_RECOVERED' THEN CAST(detail AS BIGINT) END")
    records = "CASE WHEN event IN ('FLOWFILE_REPO_ORPHANED', 'FLOWFILE_REPO_ORPHANS_DROPPED') THEN count ELSE records END"
    max_tx = ("CASE WHEN event IN ('WAL_CHECKPOINTED', 'WAL_SNAPSHOT_RECOVERED', 'WAL_SNAPSHOT_RESTORED')"
              " THEN offset END")
    problem = (f"CASE WHEN event IN ({sql_list(_PROBLEM_EVENTS)})"
               " THEN substring_index(coalesce(stack, message), '\\n', 1) END")
    out = ev.selectExpr(
        "host", "run_id", "_repo AS repository", "ts", f"{kind} AS kind",
        f"{records} AS records", f"{swap} AS swap_files", "duration_ms", f"{max_tx} AS max_transaction_id",
        "'log' AS origin", "event", "thread", "path", f"{problem} AS problem", "source", "line_no",
    )
    return _conform(out, "nifi_checkpoints", absent=_LOG_ABSENT)


def checkpoint_rows_from_capture(files: DataFrame) -> DataFrame:
    """Capture half of ``nifi_checkpoints``: the snapshot and journal files of each write-ahead log."""
    rows = files.where("kind IN ('snapshot', 'snapshot_partial', 'journal')").selectExpr(
        "host", "repository", "mtime AS ts", "kind", "records",
        "'capture' AS origin", "path", "mtime AS file_mtime", "capture_time", "complete",
        # damage, or content the capture could not copy; other notes (a partial checkpoint next to its snapshot,
        # 1.x files next to 2.x ones) are not problems of the file
        "coalesce(problem, CASE WHEN note LIKE 'content not captured%' THEN note END) AS problem", "source",
        "CASE WHEN kind = 'journal' THEN last_transaction_id ELSE max_transaction_id END AS max_transaction_id",
    )
    return _conform(rows, "nifi_checkpoints", absent=_CAPTURE_ABSENT)


#: A flow component's id (framework services use their class name as the state's component id).
_UUID = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


def _millis_to_ts(text: str) -> str:
    """SQL: epoch millis written as text, as a time (null unless it looks like one)."""
    return f"CASE WHEN {text} RLIKE '^\\\\d{{10,16}}$' THEN timestamp_millis(CAST({text} AS BIGINT)) END"


def state_rows_from_logs(events: DataFrame) -> DataFrame:
    """Log half of ``nifi_state_changes``."""
    ev = events.where(f"product = 'nifi' AND event IN ({sql_list(STATE_EVENTS)})")
    out = ev.selectExpr(
        "host", "run_id", "component_type", "component_id", "ts",
        f"{sql_map(STATE_EVENTS)}[event] AS kind", "'log' AS origin", "records",
        "substring_index(message, '\\n', 1) AS detail", "event", "source", "line_no",
    )
    return _conform(out, "nifi_state_changes", absent=_LOG_STATE_ABSENT)


def state_rows_from_capture(local_state: DataFrame) -> DataFrame:
    """Capture half of ``nifi_state_changes``: every applied record against the component's record before it."""
    records = local_state.groupBy("host", "source", "path", "component_id", "record_no").agg(*[F.expr(e) for e in (
        "first(update_type) AS update_type", "first(state_version) AS state_version",
        "first(entry_count) AS entry_count", "first(applied) AS applied",
        "first(current) AS current", "first(origin) AS origin_file",
        "first(file_mtime) AS file_mtime", "first(capture_time) AS capture_time",
        "first(version_hint) AS version_hint",
        *[f"max(CASE WHEN key = {sql_str(k)} THEN value END) AS _listing_{n}"
          for n, k in enumerate(LISTING_TIMESTAMP_KEYS)],
    )])
    found = [f"_listing_{n}" for n in range(len(LISTING_TIMESTAMP_KEYS))]
    records = records.selectExpr(
        "*", f"coalesce({', '.join(found)}) AS _listing",
        "CASE " + " ".join(f"WHEN {c} IS NOT NULL THEN {sql_str(k)}" for c, k in zip(found, LISTING_TIMESTAMP_KEYS))
        + " END AS _listing_key").drop(*found)
    order = "PARTITION BY host, source, version_hint, component_id ORDER BY record_no"
    applied = records.where("applied").selectExpr(
        "*", f"lag(entry_count) OVER ({order}) AS entries_before", f"lag(_listing) OVER ({order}) AS _listing_before",
        f"lag(_listing_key) OVER ({order}) AS _listing_key_before",
        f"row_number() OVER ({order}) = 1 AS _first")
    kind = ("CASE WHEN update_type = 'DELETE' THEN 'deleted'"
            # A component that never held an entry is not cleared by an empty update (NiFi writes one per scope
            # when it removes a component).
            " WHEN coalesce(entry_count, 0) = 0 AND NOT _first AND coalesce(entries_before, 0) > 0 THEN 'cleared'"
            " WHEN _first THEN 'first_seen'"
            f" WHEN {_millis_to_ts('_listing')} < {_millis_to_ts('_listing_before')} THEN 'regressed'"
            " ELSE 'updated' END")
    detail = (
        "concat_ws('; ', concat('record ', update_type, ' version ', coalesce(CAST(state_version AS STRING), '-'),"
        " ' in ', path), CASE WHEN _listing_before IS NOT NULL OR _listing IS NOT NULL THEN concat("
        "coalesce(_listing_key, _listing_key_before), ' ', coalesce(_listing_before, 'none'), ' -> ',"
        " coalesce(_listing, 'none')) END)"
    )
    changes = applied.selectExpr(
        "host", "component_id", "file_mtime AS ts", f"{kind} AS kind", "'capture' AS origin",
        "state_version", "entries_before", "entry_count AS entries_after",
        f"{_millis_to_ts('_listing_before')} AS listing_before", f"{_millis_to_ts('_listing')} AS listing_after",
        f"{detail} AS detail", "file_mtime", "source",
    )
    # 1.x state next to a 2.x write-ahead log: 2.x never reads the 1.x files (WriteAheadLocalStateProvider#init
    # recovers only its SequentialAccessWriteAheadLog, 2.0.0-2.11.0; NIFI-14392's migration was never merged, and
    # it would have deleted the 1.x files). A component's current 1.x record is lost when its capture has 2.x
    # records and the 1.x record held entries: 1.x writes an empty UPDATE for a removed component (onComponentRemoved
    # -> clear) and its checkpoints carry that record forever, so an empty record is a component long gone, not
    # state lost. A 2.x record of the same component is the state it built again after starting empty. Only flow
    # components (UUIDs) count: framework services keep local state under their class name (1.x and 2.x
    # StandardVerificationKeyService: JWT verification keys), which 2.x writes afresh; losing it ends sessions.
    has_v2 = "max(CASE WHEN version_hint = '2.x' THEN 1 ELSE 0 END) OVER"
    v1 = records.selectExpr(
        "*", f"{has_v2} (PARTITION BY host, source) = 1 AS _v2_capture",
    ).where("current AND update_type != 'DELETE' AND version_hint = '1.x' AND coalesce(entry_count, 0) > 0"
            f" AND component_id RLIKE {sql_str(_UUID)}")
    lost = (v1.where("host IS NOT NULL AND source IS NOT NULL AND _v2_capture")
            # the 1.x log's last write: the upgrade came after it, and the loss with the first 2.x start
            .selectExpr("host", "component_id", "coalesce(file_mtime, capture_time) AS ts",
                        "'not_carried_over' AS kind", "'capture' AS origin", "state_version",
                        "entry_count AS entries_before", "0 AS entries_after",
                        f"{_millis_to_ts('_listing')} AS listing_before",
                        "concat('1.x local state in ', path,"
                        " ' is not read by the 2.x write-ahead log in the same folder') AS detail",
                        "file_mtime", "source"))
    return (_conform(changes, "nifi_state_changes", absent=_CAPTURE_STATE_ABSENT)
            .unionByName(_conform(lost, "nifi_state_changes", absent=(*_CAPTURE_STATE_ABSENT, "listing_after"))))


#: Event columns the NiFi tables read (typed as in ``toolkit.events``); absent ones are taken as null.
_EVENT_COLUMNS = {
    "host": "string", "run_id": "string", "ts": "timestamp_ltz", "event": "string", "product": "string",
    "thread": "string", "path": "string", "message": "string", "stack": "string", "records": "bigint",
    "count": "bigint", "offset": "bigint", "detail": "string", "duration_ms": "bigint", "source": "string",
    "line_no": "bigint", "component_type": "string", "component_id": "string",
}


def _with_event_columns(events: DataFrame) -> DataFrame:
    """Events as the NiFi tables need them: a hand-built or partial events frame gets null columns."""
    missing = [name for name in _EVENT_COLUMNS if name not in events.columns]
    if not missing:
        return events
    return events.selectExpr("*", *[f"CAST(NULL AS {_EVENT_COLUMNS[name]}) AS {quoted(name)}" for name in missing])


def nifi_tables(events: DataFrame, state) -> dict[str, DataFrame]:
    """Both NiFi tables from classified events and the state facts (``StateFacts``)."""
    files = getattr(state, "nifi_repository_files", None)
    local_state = getattr(state, "nifi_local_state", None)
    events = _with_event_columns(events)
    checkpoints = checkpoint_rows_from_logs(events)
    changes = state_rows_from_logs(events)
    if files is not None:
        checkpoints = checkpoints.unionByName(checkpoint_rows_from_capture(files))
    if local_state is not None:
        changes = changes.unionByName(state_rows_from_capture(local_state))
    return {"nifi_checkpoints": checkpoints, "nifi_state_changes": changes}
