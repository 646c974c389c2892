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

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from toolkit.timeline.schemas import TABLES

#: event -> (repository or None when the line does not say, kind)
CHECKPOINT_EVENTS: dict[str, tuple[str | None, str]] = {
    "FLOWFILE_REPO_CHECKPOINT_STARTED": ("flowfile", "checkpoint_started"),
    "FLOWFILE_REPO_CHECKPOINTED": ("flowfile", "checkpointed"),
    "FLOWFILE_REPO_CHECKPOINT_FAILED": ("flowfile", "checkpoint_failed"),
    "FLOWFILE_REPO_INITIALIZED": ("flowfile", "initialized"),
    "FLOWFILE_REPO_RESTORED": ("flowfile", "restored"),
    "FLOWFILE_REPO_ORPHANED": ("flowfile", "orphaned"),
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


def _conform(df: DataFrame, name: str) -> DataFrame:
    schema = TABLES[name]
    return df.select(*[
        (F.col(f.name) if f.name in df.columns else F.lit(None)).cast(f.dataType).alias(f.name) for f in schema.fields
    ])


def _mapping(pairs: dict[str, str]) -> Column:
    return F.create_map(*[x for k, v in pairs.items() for x in (F.lit(k), F.lit(v))])


def _repository_from_path(path: Column) -> Column:
    return (F.when(path.contains("flowfile_repository"), F.lit("flowfile"))
            .when(path.rlike(r"(^|/)state/local(/|$)") | path.rlike(r"(^|/)local$"), F.lit("local_state")))


def checkpoint_rows_from_logs(events: DataFrame) -> DataFrame:
    """Log half of ``nifi_checkpoints``: one row per repository life-cycle line."""
    names = list(CHECKPOINT_EVENTS)
    ev = events.where((F.col("product") == "nifi") & F.col("event").isin(names))
    fixed = _mapping({k: v[0] for k, v in CHECKPOINT_EVENTS.items() if v[0]})
    kinds = _mapping({k: v[1] for k, v in CHECKPOINT_EVENTS.items()})
    thread = F.coalesce(F.col("thread"), F.lit(""))
    ev = ev.withColumn("_thread", thread).withColumn(
        "_repo", F.coalesce(fixed[F.col("event")], _repository_from_path(F.coalesce(F.col("path"), F.lit(""))),
                            F.when(F.col("_thread") == LOCAL_STATE_THREAD, F.lit("local_state"))))
    order = Window.partitionBy("host", "run_id", "_thread").orderBy("ts", "line_no")
    ev = ev.withColumn("_next", F.lead("event").over(order))
    ev = ev.withColumn("_repo", F.coalesce(
        "_repo", F.when((F.col("event") == "WAL_CHECKPOINTED") & (F.col("_next") == "FLOWFILE_REPO_CHECKPOINTED"),
                        F.lit("flowfile"))))
    before = order.rowsBetween(Window.unboundedPreceding, -1)
    ev = ev.withColumn("_repo", F.coalesce("_repo", F.last("_repo", ignorenulls=True).over(before), F.lit("unknown")))
    # The FlowFile repository's own line says the same as its write-ahead log's: count each checkpoint once.
    kind = F.when((F.col("event") == "WAL_CHECKPOINTED") & (F.col("_repo") == "flowfile"),
                  F.lit("wal_checkpointed")).otherwise(kinds[F.col("event")])
    swap = (F.when(F.col("event") == "FLOWFILE_REPO_RESTORED", F.col("count"))
            .when(F.col("event").isin("WAL_CHECKPOINTED", "WAL_SNAPSHOT_RESTORED"), F.col("count"))
            .when(F.col("event") == "WAL_SNAPSHOT_RECOVERED", F.col("detail").cast("bigint")))
    records = F.when(F.col("event") == "FLOWFILE_REPO_ORPHANED", F.col("count")).otherwise(F.col("records"))
    max_tx = F.when(F.col("event").isin("WAL_CHECKPOINTED", "WAL_SNAPSHOT_RECOVERED", "WAL_SNAPSHOT_RESTORED"),
                    F.col("offset"))
    problem = F.when(F.col("event").isin("FLOWFILE_REPO_CHECKPOINT_FAILED", "WAL_CHECKPOINT_FAILED",
                                         "STATE_PROVIDER_CHECKPOINT_FAILED", "WAL_JOURNAL_POISONED",
                                         "WAL_JOURNAL_TRUNCATED", "WAL_JOURNAL_NUL_BYTES", "WAL_SNAPSHOT_EMPTY"),
                     F.substring_index(F.coalesce(F.col("stack"), F.col("message")), "\n", 1))
    out = ev.select(
        "host", "run_id", F.col("_repo").alias("repository"), "ts", kind.alias("kind"),
        records.alias("records"), swap.alias("swap_files"), "duration_ms", max_tx.alias("max_transaction_id"),
        F.lit("log").alias("origin"), "event", "thread", "path", problem.alias("problem"), "source", "line_no",
    )
    return _conform(out, "nifi_checkpoints")


def checkpoint_rows_from_capture(files: DataFrame) -> DataFrame:
    """Capture half of ``nifi_checkpoints``: the snapshot and journal files of each write-ahead log."""
    rows = files.where(F.col("kind").isin("snapshot", "snapshot_partial", "journal")).select(
        "host", "repository", F.col("mtime").alias("ts"), "kind", "records", "max_transaction_id",
        F.lit("capture").alias("origin"), "path", F.col("mtime").alias("file_mtime"), "capture_time", "complete",
        F.coalesce("problem", "note").alias("problem"), "source",
        F.when(F.col("kind") == "journal", F.col("last_transaction_id")).otherwise(F.col("max_transaction_id"))
        .alias("_max_tx"),
    ).withColumn("max_transaction_id", F.col("_max_tx"))
    return _conform(rows, "nifi_checkpoints")


def _millis_to_ts(text: Column) -> Column:
    return F.when(text.rlike(r"^\d{10,16}$"), F.timestamp_millis(text.cast("bigint")))


def state_rows_from_logs(events: DataFrame) -> DataFrame:
    """Log half of ``nifi_state_changes``."""
    ev = events.where((F.col("product") == "nifi") & F.col("event").isin(list(STATE_EVENTS)))
    out = ev.select(
        "host", "run_id", "component_type", "component_id", "ts",
        _mapping(STATE_EVENTS)[F.col("event")].alias("kind"), F.lit("log").alias("origin"), "records",
        F.substring_index(F.col("message"), "\n", 1).alias("detail"), "event", "source", "line_no",
    )
    return _conform(out, "nifi_state_changes")


def state_rows_from_capture(local_state: DataFrame) -> DataFrame:
    """Capture half of ``nifi_state_changes``: every applied record against the component's record before it."""
    records = local_state.groupBy("host", "source", "path", "component_id", "record_no").agg(
        F.first("update_type").alias("update_type"), F.first("state_version").alias("state_version"),
        F.first("entry_count").alias("entry_count"), F.first("applied").alias("applied"),
        F.first("current").alias("current"), F.first("origin").alias("origin_file"),
        F.first("file_mtime").alias("file_mtime"), F.first("capture_time").alias("capture_time"),
        F.first("version_hint").alias("version_hint"),
        F.max(F.when(F.col("key") == LISTING_TIMESTAMP_KEY, F.col("value"))).alias("_listing"),
    )
    applied = records.where(F.col("applied"))
    order = Window.partitionBy("host", "source", "version_hint", "component_id").orderBy("record_no")
    applied = (applied.withColumn("entries_before", F.lag("entry_count").over(order))
               .withColumn("_listing_before", F.lag("_listing").over(order))
               .withColumn("_first", F.row_number().over(order) == 1))
    listing_after = _millis_to_ts(F.col("_listing"))
    listing_before = _millis_to_ts(F.col("_listing_before"))
    kind = (F.when(F.col("update_type") == "DELETE", F.lit("deleted"))
            .when((F.coalesce("entry_count", F.lit(0)) == 0) & ~F.col("_first"), F.lit("cleared"))
            .when(F.col("_first"), F.lit("first_seen"))
            .when(listing_after < listing_before, F.lit("regressed"))
            .otherwise(F.lit("updated")))
    detail = F.concat_ws(
        "; ", F.concat(F.lit("record "), F.col("update_type"), F.lit(" version "), F.coalesce(
            F.col("state_version").cast("string"), F.lit("-")), F.lit(" in "), F.col("path")),
        F.when(F.col("_listing_before").isNotNull() | F.col("_listing").isNotNull(), F.concat(
            F.lit(LISTING_TIMESTAMP_KEY + " "), F.coalesce(F.col("_listing_before"), F.lit("none")), F.lit(" -> "),
            F.coalesce(F.col("_listing"), F.lit("none")))),
    )
    changes = applied.select(
        "host", "component_id", F.col("file_mtime").alias("ts"), kind.alias("kind"), F.lit("capture").alias("origin"),
        "state_version", "entries_before", F.col("entry_count").alias("entries_after"),
        listing_before.alias("listing_before"), listing_after.alias("listing_after"), detail.alias("detail"),
        "file_mtime", "source",
    )
    # 1.x state next to a 2.x write-ahead log: 2.x never reads the 1.x files (no migration in the source).
    current = records.where(F.col("current") & (F.col("update_type") != "DELETE"))
    v1 = current.where(F.col("version_hint") == "1.x")
    v2_sources = records.where(F.col("version_hint") == "2.x").select("host", "source").distinct()
    v2_components = records.where(F.col("version_hint") == "2.x").select("host", "source", "component_id").distinct()
    lost = (v1.join(v2_sources, ["host", "source"], "inner").join(v2_components, ["host", "source", "component_id"],
                                                                  "left_anti")
            .select("host", "component_id", F.coalesce("capture_time", "file_mtime").alias("ts"),
                    F.lit("not_carried_over").alias("kind"), F.lit("capture").alias("origin"), "state_version",
                    F.col("entry_count").alias("entries_before"), F.lit(0).alias("entries_after"),
                    _millis_to_ts(F.col("_listing")).alias("listing_before"),
                    F.concat(F.lit("1.x local state in "), F.col("path"),
                             F.lit(" is not read by the 2.x write-ahead log in the same folder")).alias("detail"),
                    "file_mtime", "source"))
    return _conform(changes, "nifi_state_changes").unionByName(_conform(lost, "nifi_state_changes"))


#: Event columns the NiFi tables read (typed as in ``toolkit.events``); absent ones are taken as null.
_EVENT_COLUMNS = {
    "host": "string", "run_id": "string", "ts": "timestamp", "event": "string", "product": "string",
    "thread": "string", "path": "string", "message": "string", "stack": "string", "records": "bigint",
    "count": "bigint", "offset": "bigint", "detail": "string", "duration_ms": "bigint", "source": "string",
    "line_no": "bigint", "component_type": "string", "component_id": "string",
}


def _with_event_columns(events: DataFrame) -> DataFrame:
    """Events as the NiFi tables need them: a hand-built or partial events frame gets null columns."""
    missing = [name for name in _EVENT_COLUMNS if name not in events.columns]
    for name in missing:
        events = events.withColumn(name, F.lit(None).cast(_EVENT_COLUMNS[name]))
    return events


def nifi_tables(events: DataFrame, state, runs: DataFrame | None = None) -> dict[str, DataFrame]:
    """Both NiFi tables from classified events and the state facts (``StateFacts``); ``runs`` is unused for now."""
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
