"""The kinesis-checkpoint-migration-loss detector (NIFI-16003): ConsumeKinesis migrates its DynamoDB checkpoint
table, the copy fails and the retry drops the migration table with the checkpoints. Small timelines from
CloudTrail and from the log alone, the shipped sample, the hand-built bundles with their healthy twins, and the
verdicts of its bugs.
"""

from __future__ import annotations

from support.bundles import bundle_tests, nifi_evidence_test
from support.findings import raised
from support.known_bugs import verdict
from support.samples import expected_of
from support.timelines import at, ev, make_timeline, migration_step
from toolkit.detectors import run_detectors

ID = "kinesis-checkpoint-migration-loss"


# --- decision rules on small timelines -----------------------------------------------------------------------------

def _nifi_timeline(spark, copy_ok=False, cloudtrail=True):
    steps = [migration_step("orders", at(0), "CHECKPOINT_TABLE_DELETED", 10), migration_step("orders", at(6), "CHECKPOINT_TABLE_CREATED", 20)]
    if copy_ok:
        steps += [migration_step("orders", at(6.1), "CLOUDTRAIL_PUT_ITEM", 30), migration_step("orders_migration", at(6.2),
                                                                              "MIGRATION_TABLE_DELETED", 40)]
    else:
        steps += [migration_step("orders", at(6.02), "MIGRATION_COPY_FAILED", 30, "ValidationException"),
                  migration_step("orders_migration", at(36), "MIGRATION_TABLE_DELETED", 40)]
    error = ev(21, at(6.05), "ConsumeKinesis[id=5f0c2a1e-0197-1000-9d3e-3b8c5e2f4a11] Failed to properly initialize "
                             "Processor. Failure is due to DynamoDbException: One or more parameter values were "
                             "invalid: Missing the key leaseKey in the item (Service: DynamoDb, Status Code: 400)",
               "PROCESSOR_START_FAILED", host="nifi-0", source="nifi-0/nifi-app.log", product="nifi",
               component_id="5f0c2a1e-0197-1000-9d3e-3b8c5e2f4a11")
    items = [{"host": "h", "source": "scan-orders.json", "table": "orders", "kind": "shard", "stream": "orders",
              "shard_id": f"shardId-00{i}"} for i in range(4)]
    return make_timeline(spark, events=[] if copy_ok else [error], state={"dynamo_items": items},
                         migration_steps=steps if cloudtrail else [])


def test_kinesis_failed_migration_confirmed(spark):
    (finding,) = run_detectors(_nifi_timeline(spark), only=["kinesis-checkpoint-migration-loss"])
    assert (finding.severity, finding.confidence, finding.tasks) == ("critical", "confirmed", ["orders"])
    assert finding.impact.figures["shards"] == 4
    assert "TRIM_HORIZON" in finding.impact.summary and "LATEST" in finding.impact.summary
    assert ("nifi-0/nifi-app.log", 21) in {(e.source, e.line_no) for e in finding.evidence}
    assert {e.kind for e in finding.evidence} == {"log", "aws"}


def test_kinesis_successful_migration_is_quiet(spark):
    assert run_detectors(_nifi_timeline(spark, copy_ok=True), only=["kinesis-checkpoint-migration-loss"]) == []


def test_kinesis_log_only_is_possible_with_missing_evidence(spark):
    (finding,) = run_detectors(_nifi_timeline(spark, cloudtrail=False), only=["kinesis-checkpoint-migration-loss"])
    assert finding.confidence == "possible"
    assert any("CloudTrail" in s or "cloudtrail" in s for s in finding.missing_evidence)


KINESIS_ID = "5f0c2a1e-0197-1000-9d3e-3b8c5e2f4a11"
NOT_FOUND = (f"ConsumeKinesis[id={KINESIS_ID}] Failed to properly initialize Processor. If still scheduled to run, "
             "NiFi will attempt to initialize and run the Processor again after the 'Administrative Yield Duration' "
             "has elapsed. Failure is due to software.amazon.awssdk.services.dynamodb.model.ResourceNotFoundException: "
             "Requested resource not found (Service: DynamoDb, Status Code: 400, Request ID: "
             "J4CN5S1VQ0M2QH8BR1OGFNTL8NVV4KQNSO5AEMVJF66Q9ASUAAJG)")


def _log_step(table, seconds, step, line_no, detail):
    return {"table": table, "base_table": table.removesuffix("_migration"), "ts": at(seconds), "step": step,
            "origin": "log", "host": "nifi-0", "error_code": None, "detail": detail,
            "source": "nifi-0/nifi-app.log", "line_no": line_no}


def _kinesis_info_logs(spark, *, deleted=True):
    prefix = f"ConsumeKinesis[id={KINESIS_ID}] "
    steps = [
        _log_step("orders", 0, "CHECKPOINT_TABLE_DELETED", 10, prefix + "Initiated deletion of DynamoDB table [orders]"),
        _log_step("orders", 6, "CHECKPOINT_TABLE_ACTIVE", 12, prefix + "DynamoDB checkpoint table [orders] is now ACTIVE"),
        _log_step("orders", 6.01, "MIGRATION_COPY_STARTED", 13,
                  prefix + "Copying checkpoint items from [orders_migration] to [orders]"),
        {**_log_step("orders", 6.04, "PROCESSOR_START_FAILED", 14, NOT_FOUND.split(" (Service")[0]),
         "table": None, "base_table": None, "error_code": "ResourceNotFoundException"},
    ]
    if deleted:
        steps += [_log_step("orders_migration", 36.5, "LINGERING_MIGRATION_DELETED", 30,
                            prefix + "Deleting orphaned migration table [orders_migration]; legacy checkpoint table "
                                     "[orders] retains original data"),
                  _log_step("orders_migration", 36.6, "MIGRATION_TABLE_DELETED", 31,
                            prefix + "Initiated deletion of DynamoDB table [orders_migration]")]
    error = ev(14, at(6.04), NOT_FOUND, "PROCESSOR_START_FAILED", host="nifi-0", source="nifi-0/nifi-app.log",
               product="nifi", component_id=KINESIS_ID, component_type="ConsumeKinesis",
               error_class="software.amazon.awssdk.services.dynamodb.model.ResourceNotFoundException")
    return make_timeline(spark, events=[error], migration_steps=steps,
                         process_runs=[{"host": "nifi-0", "run_id": "nifi-0#1", "run_no": 1, "product": "nifi",
                                        "version": "2.9.0"}])


def test_kinesis_copy_failure_with_another_error_text_is_caught(spark):
    (finding,) = raised(run_detectors(_kinesis_info_logs(spark), only=["kinesis-checkpoint-migration-loss"]),
                        "kinesis-checkpoint-migration-loss")
    assert (finding.confidence, finding.tasks) == ("confirmed", ["orders"])
    assert "administrative yield" in finding.explanation


def test_kinesis_failed_put_item_of_any_error_code_is_a_copy_failure(spark):
    steps = [migration_step("orders", at(0), "CHECKPOINT_TABLE_DELETED", 10), migration_step("orders", at(6), "CHECKPOINT_TABLE_CREATED", 20),
             migration_step("orders", at(6.02), "CLOUDTRAIL_PUT_ITEM", 30, "ResourceNotFoundException"),
             migration_step("orders_migration", at(36), "MIGRATION_TABLE_DELETED", 40)]
    tl = make_timeline(spark, migration_steps=steps)
    (finding,) = raised(run_detectors(tl, only=["kinesis-checkpoint-migration-loss"]), "kinesis-checkpoint-migration-loss")
    assert (finding.confidence, finding.tasks) == ("confirmed", ["orders"])


def test_kinesis_without_the_deletion_expects_it_on_the_retry_after_the_yield(spark):
    (finding,) = raised(run_detectors(_kinesis_info_logs(spark, deleted=False), only=["kinesis-checkpoint-migration-loss"]),
                        "kinesis-checkpoint-migration-loss")
    assert finding.confidence == "likely"
    assert "administrative yield" in finding.explanation and "09:00:36" in finding.explanation
    assert "next start" not in finding.explanation


def test_kinesis_management_trail_and_default_logging_one_finding_per_node(spark):
    """Only DeleteTable/CreateTable in CloudTrail and the ERROR lines: the retry's deletion one administrative
    yield after each start failure ties the failure to its table; a table dropped right after its copy migrated."""
    def error(line_no, seconds, component):
        message = NOT_FOUND.replace(KINESIS_ID, component).replace(
            "ResourceNotFoundException: Requested resource not found",
            "DynamoDbException: One or more parameter values were invalid: Missing the key leaseKey in the item")
        return ev(line_no, at(seconds), message, "PROCESSOR_START_FAILED", host="nifi-1", source="nifi-1/nifi-app.log",
                  product="nifi", component_id=component, component_type="ConsumeKinesis")

    steps, events = [], []
    for n, (table, created, failed_at) in enumerate((("orders", 10.0, 16.1), ("payments", 11.0, 17.3),
                                                     ("clicks", 12.0, None))):
        steps += [migration_step(table, at(created - 5), "CHECKPOINT_TABLE_DELETED", 100 + n),
                  migration_step(table, at(created), "CHECKPOINT_TABLE_CREATED", 200 + n),
                  migration_step(f"{table}_migration", at(failed_at + 30.1 if failed_at else created + 5.2),
                        "MIGRATION_TABLE_DELETED", 300 + n)]
        if failed_at:
            events.append(error(10 + n, failed_at, f"5f0c2a1e-0197-1000-9d3e-3b8c5e2f4a1{n}"))
    tl = make_timeline(spark, events=events, migration_steps=steps,
                       process_runs=[{"host": "nifi-1", "run_id": "nifi-1#1", "run_no": 1, "product": "nifi",
                                      "version": "2.9.0"}])
    (finding,) = raised(run_detectors(tl, only=["kinesis-checkpoint-migration-loss"]), "kinesis-checkpoint-migration-loss")
    assert (finding.hosts, finding.tasks) == (["nifi-1"], ["orders", "payments"])


def test_kinesis_failures_pair_with_the_host_of_the_tables_caller():
    """CloudTrail times are whole seconds: two tables of one node and one of another, all failing within a
    second. Timing alone pairs table b with the other node's failure; the caller (source IP) keeps each
    node's tables on that node."""
    from types import SimpleNamespace as N

    from toolkit.detectors.kinesis_checkpoint_migration_loss import _consistent_pairs

    def table(name, actor):
        return N(base_table=name, actor=actor)

    def failure(host, line):
        return N(host=host, source=f"{host}/nifi-app.log", line_no=line)

    a, b, c = table("a", "10.0.0.1"), table("b", "10.0.0.1"), table("c", "10.0.0.2")
    n1a, n1b, n2c = failure("n1", 10), failure("n1", 11), failure("n2", 12)
    candidates = [(0.2, a, None, n1a), (0.9, a, None, n1b), (0.8, b, None, n1a), (0.7, b, None, n1b),
                  (0.1, b, None, n2c), (0.3, c, None, n2c), (0.95, c, None, n1b)]
    pairs = {(c_.base_table, e.host, e.line_no) for _, c_, _, e in _consistent_pairs(candidates)}
    assert pairs == {("a", "n1", 10), ("b", "n1", 11), ("c", "n2", 12)}


# --- shipped samples -----------------------------------------------------------------------------------------------

def test_kinesis_migration_loss_per_table(detected):
    expected = expected_of("nifi-kinesis-migration-loss")
    _, findings = detected("nifi-kinesis-migration-loss")
    found = raised(findings, "kinesis-checkpoint-migration-loss")
    assert sorted(t for f in found for t in f.tasks) == sorted(expected["failed_tables"])
    assert all(f.confidence == "confirmed" and f.impact.figures["shards"] for f in found)


# --- hand-built bundles and their healthy twins --------------------------------------------------------------------

(test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
 test_no_more_than_a_few_unexpected_warnings) = bundle_tests(ID)


test_findings_match_expected = nifi_evidence_test(ID)


# --- NIFI-16003 and NIFI-16066 verdicts ----------------------------------------------------------------------------

def test_nifi_16003_seed_versions():
    assert verdict("NIFI-16003", "2.9.0").status == "affected"
    assert verdict("NIFI-16003", "2.10.0").status == "fixed"
    assert verdict("NIFI-16003", "2.11.0").status == "fixed"
    not_affected = verdict("NIFI-16003", "2.8.0")
    assert not_affected.status == "not_affected" and "2.9.0" in not_affected.sentence
    assert verdict("NIFI-16066", "2.10.0").status == "affected"
    # 2.x never reads 1.x local state (the NIFI-14392 migration was not merged): every 2.x release, no fix
    assert verdict("NIFI-14392", "2.0.0").status == "affected"
    assert verdict("NIFI-14392", "2.11.0").status == "affected"
    assert verdict("NIFI-14392", "1.28.1").status == "not_affected"
