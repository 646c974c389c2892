"""Trainee stories for the shipped bundles. The first paragraph says what happened operationally and
never names the root cause or the detector; the answer comes at the end."""

README_EOS = """# orders-agg: a chaos-test kill during steady processing

The `orders-agg` Kafka Streams service (Kafka Streams 4.1.2, `exactly_once_v2`, two pods of a StatefulSet with
persistent volumes and static membership) was started at 09:00 UTC after a deploy, restored its stores and ran for
about an hour at roughly 16k records/s. At 10:07 UTC a chaos test sent SIGKILL to `orders-agg-0`; Kubernetes
restarted the pod 48 seconds later and it was back to RUNNING within about 20 seconds. Downstream teams later
reported duplicated and missing aggregates for orders keyed to partitions 0 and 2.

## What is in the bundle

- `orders-agg-0/app.log` (pod clock in `Europe/Berlin`, printed without offset) and `orders-agg-1/app.log` (UTC,
  clock 1.25 s fast); see `bundle.toml`. Layout: Kafka's `[%d] %p %m (%c)%n`.
- DEBUG was on for `org.apache.kafka.streams.processor.internals.ProcessorStateManager` only.
- `orders-agg-0/state.tar.gz`: a copy of the state directory taken by the on-call engineer during RUNNING,
  before the kill (`tar tvzf` shows the mtimes).

## What to look for

1. How did `orders-agg-0` stop the first time? Is there a `Shutdown complete` or `Closed clean` before the restart?
2. On the restart, how is each store initialised: `initialized from checkpoint with offset …` or the
   `did not find checkpoint offsets while stores are not empty …` warning? Under exactly-once, which one
   should an unclean stop produce?
3. Where did the checkpoint that the restart trusted come from? Compare the `.checkpoint` mtime and offset in the
   capture with the restoration lines at 09:00 and the DEBUG `Writing checkpoint` lines.
4. How many changelog records were replayed on top of the old store contents?

## Answer

KAFKA-20685: with the state updater (default since 3.8) the updater writes `.checkpoint` when restoration
completes, under EOS too, and nothing deletes it when the task starts RUNNING. The SIGKILL therefore left a
restore-time checkpoint behind; the restart trusted it instead of wiping the stores, and replayed the changelog
tail on top of a store that may hold uncommitted writes. Detector: `eos-stale-restore-checkpoint`.
"""

README_EOS_INFO = """# orders-agg: a chaos-test kill during steady processing (INFO logs only)

Same incident as `kafka-eos-stale-checkpoint`: `orders-agg` (Kafka Streams 4.1.2, exactly-once v2, static
membership) ran for an hour, `orders-agg-0` was SIGKILLed at 10:07 UTC and came back within a minute. This time
the team only had the default INFO logs and nobody copied the state directory before the pod restarted.

## What to look for

- The same questions as in the full bundle: how did the first run end, and how did the restart initialise its
  stores?
- What can you prove from INFO lines alone, and what would you ask the team to collect next time (state
  directory capture with mtimes, DEBUG for `ProcessorStateManager`)?

## Answer

KAFKA-20685 again (`eos-stale-restore-checkpoint`), but only as a likely finding: the logs show a crash
followed by `initialized from checkpoint` under EOS with no wipe, while the proof that the checkpoint was written
at restoration completion (its mtime and content, or the DEBUG write line) is missing.
"""

README_EOS_CLEAN = """# orders-agg: a rolling restart

`orders-agg-0` (Kafka Streams 4.1.2, exactly-once v2, static membership) was restarted with
`kubectl rollout restart` at 10:07 UTC: a normal, graceful close followed by a start on the same persistent
volume. Use this bundle as the healthy counterpart of `kafka-eos-stale-checkpoint`.

## What to look for

- The close: `Shutting down clean`, `Suspended from RUNNING`, `Closed clean`, `Shutdown complete`,
  `Streams client stopped completely …`.
- The restart: each store is `initialized from checkpoint with offset …` and restores only a handful of records.

## Answer

Nothing is wrong: under EOS a checkpoint written by a clean close is exactly what the next start should trust.
No detector should report a root cause here.
"""

README_STANDBY = """# ledger: balances that forgot their history

`ledger` is a Spring Boot service running Kafka Streams 2.0.1 with one standby replica. `ledger-0` runs two
stream threads, `ledger-1` and `ledger-2` one each. On 2026-02-10 `ledger-1` was redeployed at 10:20 UTC,
`ledger-2` joined at 10:52, and `ledger-1` was OOM-killed at 11:00. After the last rebalance account balances
served from `ledger-0` were missing every posting older than about an hour; the team had turned on DEBUG for
`org.apache.kafka.streams.processor.internals` (TRACE for `AssignedStandbyTasks` and `ProcessorStateManager`)
while chasing a different problem. Host clocks are in `Europe/Berlin`; the layout is Spring Boot 3's console pattern.

## What to look for

1. Follow standby task `1_0` on `ledger-0` through generations 41-44: which thread holds its state-directory
   lock, which one fails to get it (`Failed to lock the state directory for task 1_0`), and which thread reaches
   RUNNING first?
2. What does `ledger-0-…-CleanupThread` delete, and when, relative to the last write into `1_0`?
3. Who writes `1_0/.checkpoint` again at 10:52, and with which offset? Compare with `state.tar.gz`
   (captured 10:55): what is in `1_0/`?
4. From which offset does the active `1_0` restore at 11:01, and into what?

## Answer

KAFKA-8187: StreamThread-2 created standby 1_0 (reading its checkpoint) while StreamThread-1 still held the lock,
never retried, the cleaner later deleted the unlocked directory, and the next rebalance wrote the stale offset
back, so the active task restored only the tail of the changelog into an empty store.
Detector: `standby-lock-stale-checkpoint`.
"""

README_SKIPPED = """# audit-trail: a task that came back to its old thread

`audit-trail` runs Kafka Streams 2.1.0 with exactly-once (`processing.guarantee=exactly_once`). `audit-0` has
two stream threads; a second instance `audit-1` joined at 08:31 UTC and was stopped at 09:12. After generation
323 the audit store for partition 1 was missing almost all of its history, although nobody deleted data.
DEBUG was on for `StoreChangelogReader`.

## What to look for

1. Track task `1_1` through generations 321, 322 and 323: which thread owns it, and what each owner logs
   between `partition assignment took …` and `State transition from PARTITIONS_ASSIGNED to RUNNING`.
2. Each time a thread finds `No checkpoint found for task 1_1 …`, is it followed by a restore of the changelog
   (`Restoring partition … from offset … to endOffset …`) and how long does it take?
3. What does the restore consumer do (`Resetting offset for partition … to offset 0.`)?

## Answer

KAFKA-7672: StreamThread-1 had restored that changelog once before and still counted it as completed, so after
the EOS wipe it went straight to RUNNING with an empty store. Detector: `restore-skipped-after-reassignment`.
"""

README_ALOS = """# reservations: an OOM kill under at-least-once

The `reservations` service (Kafka Streams 3.8.1, `at_least_once`, commit every 30 s, JSON logs from
logstash-logback-encoder, clocks in `America/New_York`) processed about 700 records/s per pod. At 06:47 UTC
`reservations-1` was OOM-killed; the new pod rejoined 28 s later and took its two tasks back. Customers then saw a
few reservations answered twice with different results.

## What to look for

1. The processing summaries (`Processed … total records …`) before the kill: what rate was the pod running at?
2. How did the pod stop, and how did the restart initialise its stores (`initialized from checkpoint with
   offset …`, `End offset … initialized as …`, `Finished restoring changelog …`)?
3. Which input records were processed after the last commit and will be processed again?

## Answer

At-least-once reprocessing after a crash: changelog writes made after the last commit survive in the changelog
and are restored, while the input offsets are replayed from the last commit, so up to one commit interval of
records is processed a second time against state that already contains their effects.
Detector: `alos-crash-reprocessing`.
"""

README_NIFI_LOSS = """# nifi-0: Kinesis consumers after the 2.9.0 upgrade

A standalone NiFi node was upgraded from 2.8.0 to 2.9.0 on 2026-04-08 and restarted at 09:12 local time
(`America/New_York`). Three ConsumeKinesis processors (streams `orders`, `payments`, `clicks`) auto-started.
Two of them logged one ERROR each and then kept running; a day later the `orders` and `payments` consumers'
downstream systems reported a flood of day-old duplicates. NiFi ran with its default `logback.xml`.

## What is in the bundle

- `nifi-0/nifi-app.log` in NiFi's layout (local time, no offset).
- At the bundle root: `dynamodb-describe-<table>.json` and `dynamodb-scan-<table>.json` for the three checkpoint
  tables (captured 14:25 UTC) and `cloudtrail-dynamodb-2026-04-08.json` (DynamoDB management and data events).

## What to look for

1. What does nifi-app.log show per processor (`Starting ConsumeKinesis[id=…]`, `Failed to properly initialize
   Processor …`)? Which lines would you expect that are not there, and why?
2. In CloudTrail, order the `CreateTable`/`DeleteTable`/`PutItem` calls per table. Which `_migration` table was
   deleted, how long after the failed `PutItem`, and did any copy succeed before?
3. In the scans, compare `sequenceNumber` values of the failed and the healthy stream.

## Answer

NIFI-16003: the first copy `PutItem` into the re-created table hit DynamoDB's stale key schema
(`Missing the key leaseKey in the item`), the start failed, and the 30-second retry deleted the lingering
`_migration` table without copying it: every shard of `orders` and `payments` restarted from `TRIM_HORIZON`.
Detector: `kinesis-checkpoint-migration-loss`.
"""

README_NIFI_OK = """# nifi-0: a clean ConsumeKinesis migration

The healthy counterpart of `nifi-kinesis-migration-loss`: the same 2.9.0 upgrade on a node where the operator had
set `org.apache.nifi.processors.aws.kinesis` to INFO, so the whole migration of two ConsumeKinesis processors is
visible. Both copies succeed and every shard resumes from its migrated checkpoint.

## What to look for

- Per processor: `Legacy checkpoint table detected …`, `Legacy checkpoint migration complete …`,
  `Initiated deletion of DynamoDB table […]`, `Copying checkpoint items …`, `Copied N checkpoint item(s) …`,
  `Using checkpoint table …`, then one `Creating Enhanced Fan-Out subscription … type [AFTER_SEQUENCE_NUMBER]` per shard.
- The gap between `DynamoDB checkpoint table [<app>] is now ACTIVE` and the first copy.

## Answer

No incident: no detector should report a root cause.
"""
