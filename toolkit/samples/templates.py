"""Log message templates the scenario generator may print, as data.

Every text here is copied from the product's source as catalogued in the project's reference notes
(Kafka Streams 1.1-4.3, NiFi 2.9). One template id can have several rows: one per version range where
the wording, level or logger name differs. ``{}`` are SLF4J placeholders, filled positionally.
The generator never prints a Kafka/NiFi line that is not in this table.
"""

from __future__ import annotations

from dataclasses import dataclass

PI = "org.apache.kafka.streams.processor.internals"
KS = "org.apache.kafka.streams.KafkaStreams"
ST = f"{PI}.StreamThread"
TM = f"{PI}.TaskManager"
TASK = f"{PI}.StreamTask"
PSM = f"{PI}.ProcessorStateManager"
SCR = f"{PI}.StoreChangelogReader"
SD = f"{PI}.StateDirectory"
DSU = f"{PI}.DefaultStateUpdater"
SPA = f"{PI}.StreamsPartitionAssignor"
CI = "org.apache.kafka.clients.consumer.internals"
AC, CC, CRLI = f"{CI}.AbstractCoordinator", f"{CI}.ConsumerCoordinator", f"{CI}.ConsumerRebalanceListenerInvoker"
CU = f"{CI}.ConsumerUtils"
KC = "org.apache.kafka.clients.consumer.KafkaConsumer"
APPINFO = "org.apache.kafka.common.utils.AppInfoParser"
ABSTRACT_CONFIG = "org.apache.kafka.common.config.AbstractConfig"


@dataclass(frozen=True)
class Template:
    """One wording of a log message, valid for an inclusive range of minor versions."""

    tid: str
    versions: str  # "2.6-4.3"; minor-version granularity
    level: str
    logger: str
    text: str
    event: str | None

    def covers(self, version: tuple[int, int]) -> bool:
        lo, _, hi = self.versions.partition("-")
        return parse_version(lo) <= version <= parse_version(hi or lo)


def parse_version(text: str) -> tuple[int, int]:
    """'4.1.2' -> (4, 1): templates only change between minor releases."""
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


_K = [
    # ---- client / thread state machines (reference §1.6, §6) ----
    ("client.state", "1.1-4.3", "INFO", KS, "State transition from {} to {}", "CLIENT_STATE"),
    ("thread.state", "1.1-4.3", "INFO", ST, "State transition from {} to {}", "THREAD_STATE"),
    ("thread.starting", "1.1-4.3", "INFO", ST, "Starting", "THREAD_START"),
    ("thread.create_restore_consumer", "1.1-4.1", "INFO", ST, "Creating restore consumer client", "THREAD_CREATED"),
    ("thread.create_consumer", "1.1-4.1", "INFO", ST, "Creating consumer client", "THREAD_CREATED"),
    ("thread.create_shared_producer", "1.1-2.5", "INFO", ST, "Creating shared producer client", "THREAD_CREATED"),
    ("thread.create_shared_producer", "2.6-3.9", "INFO", f"{PI}.ActiveTaskCreator", "Creating thread producer client", "THREAD_CREATED"),
    ("thread.create_task_producer", "1.1-2.5", "INFO", ST, "Creating producer client for task {}", "THREAD_CREATED"),
    ("streams.version", "2.4-4.3", "INFO", KS, "Kafka Streams version: {}", "APP_START"),
    ("streams.commit", "2.4-4.3", "INFO", KS, "Kafka Streams commit ID: {}", "APP_START"),
    ("streams.started", "1.1-2.1", "INFO", KS, "Started Streams client", "APP_START"),
    ("streams.started_threads", "3.2-4.3", "INFO", KS, "Started {} stream threads", "APP_START"),
    ("appinfo.version", "1.1-2.1", "INFO", APPINFO, "Kafka version : {}", "APP_START"),
    ("appinfo.version", "2.2-4.3", "INFO", APPINFO, "Kafka version: {}", "APP_START"),
    ("appinfo.commit", "1.1-2.1", "INFO", APPINFO, "Kafka commitId : {}", "APP_START"),
    ("appinfo.commit", "2.2-4.3", "INFO", APPINFO, "Kafka commitId: {}", "APP_START"),
    ("appinfo.start", "2.3-4.3", "INFO", APPINFO, "Kafka startTimeMs: {}", "APP_START"),
    # Config dumps: per-class logger up to 3.9, AbstractConfig from 4.0 (reference §13.3).
    ("config.streams", "1.1-3.9", "INFO", "org.apache.kafka.streams.StreamsConfig", "StreamsConfig values: ", "CONFIG_DUMP"),
    ("config.streams", "4.0-4.3", "INFO", ABSTRACT_CONFIG, "StreamsConfig values: ", "CONFIG_DUMP"),
    ("config.consumer", "1.1-3.9", "INFO", "org.apache.kafka.clients.consumer.ConsumerConfig", "ConsumerConfig values: ", "CONFIG_DUMP"),
    ("config.consumer", "4.0-4.3", "INFO", ABSTRACT_CONFIG, "ConsumerConfig values: ", "CONFIG_DUMP"),
    ("config.producer", "1.1-3.9", "INFO", "org.apache.kafka.clients.producer.ProducerConfig", "ProducerConfig values: ", "CONFIG_DUMP"),
    ("config.producer", "4.0-4.3", "INFO", ABSTRACT_CONFIG, "ProducerConfig values: ", "CONFIG_DUMP"),
    ("config.admin", "1.1-3.9", "INFO", "org.apache.kafka.clients.admin.AdminClientConfig", "AdminClientConfig values: ", "CONFIG_DUMP"),
    ("config.admin", "4.0-4.3", "INFO", ABSTRACT_CONFIG, "AdminClientConfig values: ", "CONFIG_DUMP"),
    ("sd.process_read", "2.8-4.3", "INFO", SD, "Reading UUID from process file: {}", "PROCESS_ID_LOADED"),
    ("sd.process_new", "2.8-4.3", "INFO", SD, "No process id found on disk, got fresh process id {}", "PROCESS_ID_CREATED"),
    # ---- consumer group coordinator (§1.2; AbstractCoordinator lines log as ConsumerCoordinator from 3.0) ----
    ("coord.discovered", "1.1-2.8", "INFO", AC, "Discovered group coordinator {}", "COORDINATOR_FOUND"),
    ("coord.discovered", "3.0-4.3", "INFO", CC, "Discovered group coordinator {}", "COORDINATOR_FOUND"),
    ("coord.request_join", "3.0-4.3", "INFO", CC, "Request joining group due to: {}", "REBALANCE_REQUESTED"),
    ("coord.joining", "1.1-2.8", "INFO", AC, "(Re-)joining group", "REBALANCE_JOIN_START"),
    ("coord.joining", "3.0-4.3", "INFO", CC, "(Re-)joining group", "REBALANCE_JOIN_START"),
    ("coord.joined", "1.1-2.8", "INFO", AC, "Successfully joined group with generation {}", "REBALANCE_JOINED"),
    ("coord.joined", "3.0-4.3", "INFO", CC, "Successfully joined group with generation {}", "REBALANCE_JOINED"),
    ("coord.synced", "2.7-2.8", "INFO", AC, "Successfully synced group in generation {}", "REBALANCE_SYNCED"),
    ("coord.synced", "3.0-4.3", "INFO", CC, "Successfully synced group in generation {}", "REBALANCE_SYNCED"),
    ("coord.heartbeat_rebalancing", "2.0-2.8", "INFO", AC, "Attempt to heartbeat failed since group is rebalancing", "REBALANCE_START"),
    ("coord.setting_assigned", "1.1-2.1", "INFO", CC, "Setting newly assigned partitions {}", "PARTITIONS_ASSIGNED"),
    ("coord.revoking_all", "1.1-2.3", "INFO", CC, "Revoking previously assigned partitions {}", "PARTITIONS_REVOKED"),
    ("coord.adding_assigned", "2.4-3.6", "INFO", CC, "Adding newly assigned partitions: {}", "PARTITIONS_ASSIGNED"),
    ("coord.adding_assigned", "3.7-4.3", "INFO", CRLI, "Adding newly assigned partitions: {}", "PARTITIONS_ASSIGNED"),
    ("coord.revoke", "2.4-3.6", "INFO", CC, "Revoke previously assigned partitions {}", "PARTITIONS_REVOKED"),
    ("coord.revoke", "3.7-4.3", "INFO", CRLI, "Revoke previously assigned partitions {}", "PARTITIONS_REVOKED"),
    ("coord.updating", "2.6-4.3", "INFO", CC,
     "Updating assignment with\n\tAssigned partitions:                       {}\n\tCurrent owned partitions:                  {}\n"
     "\tAdded partitions (assigned - owned):       {}\n\tRevoked partitions (owned - assigned):     {}\n", "ASSIGNMENT_RECEIVED"),
    ("coord.notifying", "2.6-4.3", "INFO", CC, "Notifying assignor about the new {}", "ASSIGNMENT_RECEIVED"),
    ("coord.finished_assignment", "2.4-4.3", "INFO", CC, "Finished assignment for group at generation {}: {}", "LEADER_ASSIGNMENT_DONE"),
    ("coord.committed_offset", "2.3-3.6", "INFO", CC, "Setting offset for partition {} to the committed offset {}", "OFFSET_POSITIONED"),
    ("coord.committed_offset", "3.7-4.3", "INFO", CU, "Setting offset for partition {} to the committed offset {}", "OFFSET_POSITIONED"),
    # The consumer class was split in 3.7 (LegacyKafkaConsumer) and renamed in 4.0 (ClassicKafkaConsumer).
    ("consumer.assigned_to", "3.3-3.6", "INFO", KC, "Assigned to partition(s): {}", None),
    ("consumer.assigned_to", "3.7-3.9", "INFO", f"{CI}.LegacyKafkaConsumer", "Assigned to partition(s): {}", None),
    ("consumer.assigned_to", "4.0-4.3", "INFO", f"{CI}.ClassicKafkaConsumer", "Assigned to partition(s): {}", None),
    ("consumer.seeking", "2.3-3.6", "INFO", KC, "Seeking to offset {} for partition {}", None),
    ("consumer.seeking", "3.7-3.9", "INFO", f"{CI}.LegacyKafkaConsumer", "Seeking to offset {} for partition {}", None),
    ("consumer.seeking", "4.0-4.3", "INFO", f"{CI}.ClassicKafkaConsumer", "Seeking to offset {} for partition {}", None),
    # Fetcher offset reset of the restore consumer (reference §13.9).
    ("fetcher.reset", "1.1-2.1", "INFO", f"{CI}.Fetcher", "Resetting offset for partition {} to offset {}.", None),
    # ---- Streams side of the rebalance (§1.3, §1.4) ----
    ("thread.revocation_took", "1.1-2.3", "INFO", ST,
     "partition revocation took {} ms.\n\tsuspended active tasks: {}\n\tsuspended standby tasks: {}", "REVOCATION_DONE"),
    ("thread.revocation_took", "2.6-4.3", "INFO", ST, "partition revocation took {} ms.", "REVOCATION_DONE"),
    ("thread.assignment_took", "1.1-2.3", "INFO", ST,
     "partition assignment took {} ms.\n\tcurrent active tasks: {}\n\tcurrent standby tasks: {}\n\tprevious active tasks: {}\n",
     "ASSIGNMENT_APPLIED"),
    ("thread.revoked_debug", "1.1-2.3", "DEBUG", ST,
     "at state {}: partitions {} revoked at the beginning of consumer rebalance.\n\tcurrent assigned active tasks: {}\n"
     "\tcurrent assigned standby tasks: {}\n", "PARTITIONS_REVOKED"),
    ("thread.assigned_debug", "1.1-2.3", "DEBUG", ST,
     "at state {}: partitions {} assigned at the end of consumer rebalance.\n\tcurrent suspended active tasks: {}\n"
     "\tcurrent suspended standby tasks: {}\n", "PARTITIONS_ASSIGNED"),
    ("tm.handle_assignment", "2.6-4.3", "INFO", TM,
     "Handle new assignment with:\n\tNew active tasks: {}\n\tNew standby tasks: {}\n\tExisting active tasks: {}\n"
     "\tExisting standby tasks: {}", "ASSIGNMENT_APPLIED"),
    ("spa.assigned_clients", "1.1-2.3", "INFO", SPA, "Assigned tasks to clients as {}.", "ASSIGNMENT_COMPUTED"),
    ("spa.assigned_total", "3.6-4.3", "INFO", SPA, "Assigned {} total tasks including {} stateful tasks to {} client nodes.",
     "ASSIGNMENT_COMPUTED"),
    ("spa.stable", "2.6-4.3", "INFO", SPA, "Finished stable assignment of tasks, no followup rebalances required.", "ASSIGNMENT_STABLE"),
    # ---- task lifecycle (§2) ----
    ("task.initializing", "1.1-2.5", "DEBUG", f"{PI}.AssignedStreamsTasks", "Initializing {}s {}", "TASK_INITIALIZED"),
    ("standby.initializing", "1.1-2.5", "DEBUG", f"{PI}.AssignedStandbyTasks", "Initializing {}s {}", "TASK_INITIALIZED"),
    ("task.to_restoring", "1.1-2.5", "DEBUG", f"{PI}.AssignedStreamsTasks", "Transitioning {} {} to restoring", "TASK_RESTORING"),
    ("task.to_running", "1.1-2.1", "DEBUG", f"{PI}.AssignedStreamsTasks", "transitioning {} {} to running", "TASK_RUNNING"),
    ("task.to_running", "2.2-2.5", "DEBUG", f"{PI}.AssignedStreamsTasks", "Transitioning {} {} to running", "TASK_RUNNING"),
    ("task.initialized", "2.6-4.3", "INFO", TASK, "Initialized", "TASK_INITIALIZED"),
    ("task.restored", "2.6-4.3", "INFO", TASK, "Restored and ready to run", "TASK_RUNNING"),
    ("task.suspended", "3.4-4.3", "INFO", TASK, "Suspended from {}", "TASK_SUSPENDED"),
    ("task.closed_clean", "2.6-4.3", "INFO", TASK, "Closed clean", "TASK_CLOSED_CLEAN"),
    ("thread.summary", "2.8-3.8", "INFO", ST,
     "Processed {} total records, ran {} punctuators, and committed {} total tasks since the last update", "PROCESSING_SUMMARY"),
    ("thread.summary", "3.9-4.3", "INFO", ST,
     "Processed {} total records, ran {} punctuators, polled {} times and committed {} total tasks since the last update {}ms ago",
     "PROCESSING_SUMMARY"),
    ("thread.committed_debug", "1.1-4.3", "DEBUG", ST, "Committed all active tasks {} and standby tasks {} in {}ms", "COMMIT"),
    # Fetch-session bookkeeping of the main consumer at DEBUG: high-volume noise no catalogue template matches.
    # The suffix is `responseDataToLogString` below TRACE: " with N response partition(s)[, M implied partition(s)]".
    ("fetch_session.incremental", "2.3-4.3", "DEBUG", "org.apache.kafka.clients.FetchSessionHandler",
     "Node {} sent an incremental fetch response with throttleTimeMs = {} for session {} with {} response partition(s){}",
     None),
    # ---- state directory (§3): StateDirectory has no LogContext, the thread part is in the template ----
    ("sd.acquired", "1.1-2.8", "DEBUG", SD, "{} Acquired state dir lock for task {}", "LOCK_ACQUIRED"),
    ("sd.released", "1.1-4.3", "DEBUG", SD, "{} Released state dir lock for task {}", "LOCK_RELEASED"),
    ("sd.cleaned", "1.1-4.3", "INFO", SD,
     "{} Deleting obsolete state directory {} for task {} as {}ms has elapsed (cleanup delay is {}ms).", "DIR_CLEANED"),
    # 2.0-2.3 standby creation retry after a LockException is TRACE only (reference §3 and §13.10).
    ("standby.could_not_create", "1.1-2.3", "TRACE", f"{PI}.AssignedStandbyTasks", "Could not create {} {} due to {}; will retry",
     "LOCK_FAILED"),
    # ---- checkpoints and restoration (§4) ----
    ("psm.writing_checkpoint", "1.1-2.4", "TRACE", PSM, "Writing checkpoint: {}", "CHECKPOINT_WRITTEN"),
    ("psm.writing_checkpoint", "2.5-3.4", "DEBUG", PSM, "Writing checkpoint: {}", "CHECKPOINT_WRITTEN"),
    ("psm.writing_checkpoint", "3.5-4.2", "DEBUG", PSM, "Writing checkpoint: {} for task {}", "CHECKPOINT_WRITTEN"),
    ("psm.initialized_from_checkpoint", "2.6-3.6", "DEBUG", PSM,
     "State store {} initialized from checkpoint with offset {} at changelog {}", "CHECKPOINT_READ"),
    ("psm.initialized_from_checkpoint", "3.7-4.3", "INFO", PSM,
     "State store {} initialized from checkpoint with offset {} at changelog {}", "CHECKPOINT_READ"),
    ("psm.no_checkpoint", "2.6-4.3", "INFO", PSM,
     "State store {} did not find checkpoint offset, hence would default to the starting offset at changelog {}",
     "CHECKPOINT_MISSING"),
    ("scr.start_restoring", "1.1-2.5", "DEBUG", SCR, "Start restoring state stores from changelog topics {}", "RESTORE_START"),
    ("scr.restoring_partition", "1.1-2.5", "DEBUG", SCR, "Restoring partition {} from offset {} to endOffset {}", "RESTORE_START"),
    # First appears in 2.0.1 (reference §13.8); the generator only renders it for 2.0.1 and later.
    ("scr.no_checkpoint_eos", "2.0-2.5", "INFO", SCR,
     "No checkpoint found for task {} state store {} changelog {} with EOS turned on. Reinitializing the task and restore its "
     "state from the beginning.", "CHECKPOINT_MISSING"),
    ("scr.restoring_from_beginning", "2.1-2.5", "INFO", SCR, "Restoring task {}'s state store {} from beginning of the changelog {} ",
     "RESTORE_START"),
    ("scr.end_offset", "3.5-4.3", "INFO", SCR, "End offset for changelog {} initialized as {}.", "RESTORE_TARGET"),
    ("scr.in_progress", "2.6-4.3", "INFO", SCR, "Restoration in progress for {} partitions. {}", "RESTORE_PROGRESS"),
    ("scr.finished_changelog", "2.6-4.3", "INFO", SCR, "Finished restoring changelog {} to store {} with a total number of {} records",
     "RESTORE_END"),
    ("dsu.started", "3.3-4.3", "INFO", DSU, "State updater thread started", "STATE_UPDATER_START"),
    ("dsu.added", "3.4-4.3", "INFO", DSU, "Stateful active task {} was added to the state updater", "RESTORE_QUEUED"),
    ("dsu.completed", "3.4-4.3", "INFO", DSU, "Stateful active task {} completed restoration", "RESTORE_END"),
    ("dsu.shutting_down", "3.6-4.3", "INFO", DSU, "Shutting down state updater thread", "SHUTDOWN_REQUESTED"),
    ("dsu.stopped", "3.6-4.3", "INFO", DSU, "State updater thread stopped", "THREAD_STOPPED"),
    # ---- shutdown (§6.2) ----
    ("streams.shutting_down_threads", "3.2-4.3", "INFO", KS, "Shutting down {} stream threads", "SHUTDOWN_REQUESTED"),
    ("streams.shutdown_threads_complete", "3.2-4.3", "INFO", KS, "Shutdown {} stream threads complete", "SHUTDOWN_PROGRESS"),
    ("thread.informed", "1.1-4.3", "INFO", ST, "Informed to shut down", "SHUTDOWN_REQUESTED"),
    ("thread.shutting_down", "1.1-3.3", "INFO", ST, "Shutting down", "SHUTDOWN_START"),
    ("thread.shutting_down", "3.4-4.3", "INFO", ST, "Shutting down {}", "SHUTDOWN_CLEAN"),
    ("thread.shutdown_complete", "1.1-4.3", "INFO", ST, "Shutdown complete", "THREAD_STOPPED"),
    ("streams.stopped", "1.1-4.0", "INFO", KS, "Streams client stopped completely", "CLIENT_STOPPED"),
    ("streams.stopped", "4.1-4.3", "INFO", KS, "Streams client stopped completely and transitioned to the terminal {} state",
     "CLIENT_STOPPED"),
]

KAFKA_TEMPLATES: dict[str, list[Template]] = {}
for _row in _K:
    KAFKA_TEMPLATES.setdefault(_row[0], []).append(Template(*_row))

# ---- NiFi 2.9 (nifi reference §2.1, §2.2, §3.7, §5) ----
APP = "org.apache.nifi.runtime.Application"
SPS = "org.apache.nifi.controller.scheduling.StandardProcessScheduler"
CK = "org.apache.nifi.processors.aws.kinesis.ConsumeKinesis"
NIFI_TEMPLATES: dict[str, Template] = {
    t.tid: t
    for t in [
        Template("nifi.starting", "2.0-2.11", "INFO", APP, "Starting NiFi {} using Java {} with PID {}", "NIFI_STARTING"),
        Template("nifi.loading_props", "2.0-2.11", "INFO", "org.apache.nifi.runtime.PropertiesProvider",
                 "Loading Application Properties [{}]", None),
        Template("wal.recovering", "2.0-2.11", "INFO", "org.apache.nifi.wali.SequentialAccessWriteAheadLog",
                 "Recovering records from Write-Ahead Log at {}", "STATE_WAL_RECOVERED"),
        Template("wal.recovered", "2.0-2.11", "INFO", "org.apache.nifi.wali.SequentialAccessWriteAheadLog",
                 "Successfully recovered {} records in {} milliseconds. Now checkpointing to ensure that Write-Ahead Log is in a "
                 "consistent state", "STATE_WAL_RECOVERED"),
        Template("wal.checkpointed", "2.0-2.11", "INFO", "org.apache.nifi.wali.SequentialAccessWriteAheadLog",
                 "Checkpointed Write-Ahead Log with {} Records and {} Swap Files in {} milliseconds (Stop-the-world time = {} "
                 "milliseconds), max Transaction ID {}", "STATE_WAL_CHECKPOINT"),
        Template("ffr.initialized", "2.0-2.11", "INFO", "org.apache.nifi.controller.repository.WriteAheadFlowFileRepository",
                 "Initialized FlowFile Repository", None),
        Template("ffr.restored", "2.0-2.11", "INFO", "org.apache.nifi.controller.repository.WriteAheadFlowFileRepository",
                 "Successfully restored {} FlowFiles and {} Swap Files", None),
        Template("ffr.checkpointed", "2.0-2.11", "INFO", "org.apache.nifi.controller.repository.WriteAheadFlowFileRepository",
                 "Successfully checkpointed FlowFile Repository with {} records in {} milliseconds", None),
        Template("fc.starting", "2.0-2.11", "INFO", "org.apache.nifi.web.contextlistener.ApplicationStartupContextListener",
                 "Starting Flow Controller...", "FLOW_CONTROLLER_STARTING"),
        Template("fc.started", "2.0-2.11", "INFO", "org.apache.nifi.web.contextlistener.ApplicationStartupContextListener",
                 "Flow Controller started successfully.", "FLOW_CONTROLLER_STARTED"),
        Template("fc.autoresume", "2.0-2.11", "INFO", "org.apache.nifi.controller.FlowController",
                 "Starting {} processors/ports/funnels", "FLOW_AUTORESUME"),
        Template("jetty.started", "2.0-2.11", "INFO", "org.apache.nifi.web.server.JettyServer", "Started Server on {}",
                 "NIFI_UI_AVAILABLE"),
        Template("nifi.started", "2.0-2.11", "INFO", APP, "Started Application in {} seconds ({} ns)", "NIFI_STARTED"),
        Template("flow.saved", "2.0-2.11", "INFO", "org.apache.nifi.controller.StandardFlowService",
                 "Saved flow controller {} // Another save pending = {}", "FLOW_SAVED"),
        Template("sps.starting", "2.0-2.11", "INFO", SPS, "Starting {}", "PROCESSOR_START_REQUESTED"),
        Template("proc.init_failed", "2.0-2.11", "ERROR", CK,
                 "{} Failed to properly initialize Processor. If still scheduled to run, NiFi will attempt to initialize and run "
                 "the Processor again after the 'Administrative Yield Duration' has elapsed. Failure is due to {}",
                 "PROCESSOR_START_FAILED"),
        # ConsumeKinesis 2.9.0 INFO/DEBUG lines; hidden by the default logback.xml (org.apache.nifi.processors = WARN).
        Template("ck.detected", "2.9-2.11", "DEBUG", CK, "{} Checkpoint table [{}] detected as {}", "CHECKPOINT_TABLE_SCHEMA_DETECTED"),
        Template("ck.legacy_detected", "2.9-2.11", "INFO", CK, "{} Legacy checkpoint table detected; migrating via [{}]",
                 "MIGRATION_DETECTED_LEGACY"),
        Template("ck.creating", "2.9-2.11", "INFO", CK, "{} Creating DynamoDB checkpoint table [{}]", "CHECKPOINT_TABLE_CREATE_REQUESTED"),
        Template("ck.active", "2.9-2.11", "INFO", CK, "{} DynamoDB checkpoint table [{}] is now ACTIVE", "CHECKPOINT_TABLE_ACTIVE"),
        Template("ck.migration_lock", "2.9-2.11", "INFO", CK, "{} Acquired checkpoint migration lock for stream [{}]",
                 "MIGRATION_LOCK_ACQUIRED"),
        Template("ck.migration_start", "2.9-2.11", "INFO", CK, "{} Starting legacy checkpoint migration from [{}] to [{}] for stream [{}]",
                 "MIGRATION_SCAN_STARTED"),
        Template("ck.migration_done", "2.9-2.11", "INFO", CK,
                 "{} Legacy checkpoint migration complete for stream [{}]: scanned={}, migrated={}, skippedNonNumeric={}, "
                 "skippedMissingAttr={}", "MIGRATION_SCAN_COMPLETED"),
        Template("ck.rename_lock", "2.9-2.11", "INFO", CK, "{} Acquired rename lock for migration table [{}]", "RENAME_LOCK_ACQUIRED"),
        Template("ck.delete_initiated", "2.9-2.11", "INFO", CK, "{} Initiated deletion of DynamoDB table [{}]", "CHECKPOINT_TABLE_DELETED"),
        Template("ck.deleted", "2.9-2.11", "INFO", CK, "{} DynamoDB table [{}] has been deleted", "CHECKPOINT_TABLE_DELETE_CONFIRMED"),
        Template("ck.copying", "2.9-2.11", "INFO", CK, "{} Copying checkpoint items from [{}] to [{}]", "MIGRATION_COPY_STARTED"),
        Template("ck.copied", "2.9-2.11", "INFO", CK, "{} Copied {} checkpoint item(s) from [{}] to [{}]", "MIGRATION_COPY_COMPLETED"),
        Template("ck.lingering_delete", "2.9-2.9", "INFO", CK,
                 "{} Deleting orphaned migration table [{}]; legacy checkpoint table [{}] retains original data",
                 "LINGERING_MIGRATION_DELETED"),
        Template("ck.using", "2.9-2.11", "INFO", CK, "{} Using checkpoint table [{}] for stream [{}]", "CHECKPOINT_TABLE_IN_USE"),
        Template("ck.efo_active", "2.9-2.11", "INFO", CK, "{} Enhanced Fan-Out consumer [{}] for stream [{}] already registered and ACTIVE",
                 "EFO_CONSUMER_REGISTERED"),
        Template("ck.efo_subscribe", "2.9-2.11", "INFO", CK,
                 "{} Creating Enhanced Fan-Out subscription for stream [{}] shard [{}] type [{}] seq [{}]",
                 "SHARD_STARTED_FROM_CHECKPOINT"),
        Template("ck.efo_established", "2.9-2.11", "INFO", CK,
                 "{} Enhanced Fan-Out subscription established for shard [{}] (HTTP/2 stream active)", "SUBSCRIPTION_ESTABLISHED"),
    ]
}


def kafka_template(tid: str, version: str) -> Template | None:
    """The wording of ``tid`` in Kafka ``version``, or None when that version does not print it."""
    v = parse_version(version)
    for row in KAFKA_TEMPLATES[tid]:
        if row.covers(v):
            return row
    return None


def fill(text: str, args: tuple) -> str:
    """SLF4J-style positional substitution of ``{}``."""
    parts = text.split("{}")
    if len(parts) - 1 != len(args):
        raise ValueError(f"template {text!r} takes {len(parts) - 1} args, got {len(args)}")
    out = [parts[0]]
    for arg, part in zip(args, parts[1:]):
        out.append(str(arg))
        out.append(part)
    return "".join(out)
