"""The shipped sample bundles, each a short script, and the large benchmark scenario.

Times in scripts are true UTC. ``(when, host, action, kwargs[, mark])`` - see :mod:`toolkit.samples.render`.
"""

from __future__ import annotations

from .kafka import KafkaApp
from .nifi import NIFI_DEFAULT_LEVELS
from .layouts import iso
from .render import HostSpec, RenderResult, Scenario

PI = "org.apache.kafka.streams.processor.internals"


def _orders_app(version: str = "4.1.2", commit_ms: int = 500) -> KafkaApp:
    return KafkaApp("orders-agg", version, "exactly_once_v2", topics={0: "orders"}, stores={0: "order-totals"},
                    commit_ms=commit_ms, state_updater=True, records_per_sec=4000)


def _restores(host: str, at: str, plan: dict[str, tuple[int | None, int, int]], mark: str = "") -> list[tuple]:
    steps = []
    for k, (task, (ckpt, end, dur)) in enumerate(plan.items()):
        steps.append((at if k == 0 else f"{at[:-3]}{int(at[-3:]) + 4 * k:03d}", host, "restore",
                      dict(thread=1, task=task, checkpoint=ckpt, end=end, duration_ms=dur), f"{mark}{host}:{task}"))
    return steps


# --------------------------------------------------------------------------------------------- KAFKA-20685
def eos_stale_checkpoint(info_only: bool = False, hosts: int = 2, steady_hours: float = 1.0, name: str | None = None,
                         debug_commits: bool = False, tail_minutes: float = 27.0) -> Scenario:
    """EOS v2 on 4.1.2, state updater on: the restoration-time `.checkpoint` survives RUNNING; SIGKILL; restart trusts it."""
    a, b = "orders-agg-0", "orders-agg-1"
    names = [f"orders-agg-{n}" for n in range(hosts)]
    specs = [HostSpec(a, "Europe/Berlin", 0, pid=1, instance_id=a)] + [
        HostSpec(n, "UTC", 1250 if n == b else 0, pid=1, instance_id=n) for n in names[1:]]
    tasks = {n: [f"0_{k}", f"0_{k + hosts}"] for k, n in enumerate(names)}
    app = _orders_app(commit_ms=500)
    app.stores = {0: "order-totals"}
    first = {"0_0": (1187090, 1203322, 1830), f"0_{hosts}": (1190410, 1201007, 1410)}
    script: list[tuple] = []
    for k, n in enumerate(names):
        script.append((f"09:00:00.{k * 97:03d}", n, "start", {}))
    for k, n in enumerate(names):
        script.append((f"09:00:01.{500 + k * 13:03d}", n, "rebalance",
                       dict(generation=12, assign={1: (tasks[n], [])}, leader=(n == a), clients=hosts)))
    for k, n in enumerate(names):
        plan = first if n == a else {t: (1150000 + 7919 * int(t[2:]), 1166000 + 7919 * int(t[2:]), 1500) for t in tasks[n]}
        script += _restores(n, "09:00:05.000", plan)
    for k, n in enumerate(names):
        script.append((f"09:00:07.{400 + k * 11:03d}", n, "running",
                       dict(thread=1, committed={f"orders-{t[2:]}": 5_230_114 + 977 * int(t[2:]) for t in tasks[n]})))
    kill_hms = _hms(10 * 3600 + 7 * 60 + 41.318 + (steady_hours - 1) * 3600)
    cap_hms = _hms(9 * 3600 + 62 * 60 + 13 + (steady_hours - 1) * 3600)
    if not info_only:
        script.append((cap_hms, a, "capture", dict(tasks={t: "data" for t in tasks[a]},
                                                   process_file_ms=_ms("2026-02-18T07:41:09.233Z")), "capture"))
    script.append((kill_hms, a, "crash", {}, "kill"))
    restart = _hms(_secs(kill_hms) + 48.586)
    script.append((restart, a, "start", {}, "restart"))
    script.append(("+0.9s", a, "rebalance", dict(generation=12, assign={1: (tasks[a], [])}, clients=hosts)))
    second = {"0_0": (1203321, 1285054, 12640), f"0_{hosts}": (1201006, 1263371, 9870)}
    script += _restores(a, _hms(_secs(restart) + 4.2), second, mark="re:")
    script.append((_hms(_secs(restart) + 17.5), a, "running",
                   dict(thread=1, committed={f"orders-{t[2:]}": 6_311_870 + 977 * int(t[2:]) for t in tasks[a]})))
    end = _hms(_secs(restart) + tail_minutes * 60)
    script += [(end, n, "log_end", {}) for n in names]

    def expected(r: RenderResult) -> dict:
        em = r.emitters[a]
        per_task = []
        for task, (ckpt, end_off, _) in first.items():
            stale = first[task][1] - 1
            per_task.append({"task": task, "changelog": "orders-agg-order-totals-changelog", "partition": int(task[2:]),
                             "checkpoint_offset": stale, "checkpoint_write_time": iso(r.marks[f"{a}:{task}"]),
                             "end_offset_at_restart": second[task][1],
                             "replayed_records": second[task][1] - (stale + 1)})
        out = {
            "guarantee": "exactly_once_v2",
            "state_updater": True,
            "crashed_host": a,
            "tasks": sorted(first),
            "client_id": em.client_id,
            "stream_thread": em.tname(1),
            "times": {
                "restoration_complete": iso(max(r.marks[f"{a}:{t}"] for t in first)),
                "kill": iso(r.marks["kill"]),
                "last_line_before_crash": iso(r.last_line_ms[a + "@kill"]),
                "restart": iso(r.marks["restart"]),
            },
            "stale_checkpoints": per_task,
            "wipe_line_expected": False,
            "state_capture": None if info_only else {"host": a, "file": f"{a}/state.tar.gz",
                                                     "taken_at": iso(r.marks["capture"])},
        }
        if info_only:
            out["missing_evidence"] = ["state capture (.checkpoint mtime and content)",
                                       "DEBUG ProcessorStateManager (Writing checkpoint at restoration completion)"]
        return out

    return Scenario(
        name=name or ("kafka-eos-stale-checkpoint-info-only" if info_only else "kafka-eos-stale-checkpoint"),
        product="kafka-streams", version="4.1.2", layout="kafka", date="2026-03-07", seed=20685, hosts=specs,
        script=script, app_id="orders-agg", app=app,
        notes="StatefulSet orders-agg (2 pods, static membership); orders-agg-0 was SIGKILLed by a chaos test.",
        log_levels={} if info_only else {f"{PI}.ProcessorStateManager": "DEBUG"} | (
            {f"{PI}.StreamThread": "DEBUG"} if debug_commits else {}),
        detectors=["eos-stale-restore-checkpoint"], readme=README_EOS_INFO if info_only else README_EOS,
        expected=expected)


# --------------------------------------------------------------------------------------------- healthy twin
def eos_clean_rolling_restart() -> Scenario:
    a, b = "orders-agg-0", "orders-agg-1"
    specs = [HostSpec(a, "UTC", 0, instance_id=a), HostSpec(b, "UTC", 0, instance_id=b)]
    tasks = {a: ["0_0", "0_2"], b: ["0_1", "0_3"]}
    script: list[tuple] = [("09:00:00.000", a, "start", {}), ("09:00:00.097", b, "start", {})]
    script += [("09:00:01.500", a, "rebalance", dict(generation=12, assign={1: (tasks[a], [])}, leader=True)),
               ("09:00:01.513", b, "rebalance", dict(generation=12, assign={1: (tasks[b], [])}))]
    script += _restores(a, "09:00:05.000", {"0_0": (1187090, 1203322, 1830), "0_2": (1190410, 1201007, 1410)})
    script += _restores(b, "09:00:05.000", {"0_1": (1157919, 1173919, 1500), "0_3": (1173757, 1189757, 1500)})
    script += [("09:00:07.400", a, "running", dict(thread=1)), ("09:00:07.411", b, "running", dict(thread=1))]
    script += [("10:07:41.318", a, "close", dict(offsets={"0_0": 1284913, "0_2": 1263369}), "clean_stop"),
               ("10:08:12.020", a, "start", {}, "restart"),
               ("+0.9s", a, "rebalance", dict(generation=12, assign={1: (tasks[a], [])}))]
    script += _restores(a, "10:08:16.200", {"0_0": (1284913, 1284915, 310), "0_2": (1263369, 1263371, 280)}, mark="re:")
    script += [("10:08:17.100", a, "running", dict(thread=1)), ("10:35:00.000", a, "log_end", {}),
               ("10:35:00.000", b, "log_end", {})]

    def expected(r: RenderResult) -> dict:
        return {"guarantee": "exactly_once_v2", "tasks": ["0_0", "0_2"], "restarted_host": a,
                "times": {"clean_stop": iso(r.marks["clean_stop"]), "restart": iso(r.marks["restart"])},
                "root_cause": None}

    return Scenario(
        name="kafka-eos-clean-rolling-restart", product="kafka-streams", version="4.1.2", layout="kafka",
        date="2026-03-09", seed=20686, hosts=specs, script=script, app_id="orders-agg", app=_orders_app(),
        notes="Rolling restart of orders-agg-0 (kubectl rollout restart); clean close, static membership.",
        detectors=[], readme=README_EOS_CLEAN, expected=expected)


# --------------------------------------------------------------------------------------------- KAFKA-8187
def standby_lock_cleaner() -> Scenario:
    l0, l1, l2 = "ledger-0", "ledger-1", "ledger-2"
    app = KafkaApp("ledger", "2.0.1", "at_least_once", topics={0: "ledger-postings", 1: "ledger-balances-by-account-repartition"},
                   stores={1: "balances"}, commit_ms=30_000, standbys=1, records_per_sec=300)
    specs = [HostSpec(l0, "Europe/Berlin", 0, pid=4242, threads=2), HostSpec(l1, "Europe/Berlin", 0, pid=3117),
             HostSpec(l2, "Europe/Berlin", 0, pid=2890)]
    cl = "ledger-balances-changelog"
    s: list[tuple] = [
        ("10:00:00.000", l1, "start", {}), ("10:00:00.210", l0, "start", {}),
        # generation 41: ledger-0 StreamThread-1 holds standby 1_0
        ("10:00:01.200", l0, "rebalance", dict(generation=41, assign={1: (["0_1"], ["1_0"]), 2: (["0_0"], ["1_1"])},
                                               leader=True)),
        ("10:00:01.230", l1, "rebalance", dict(generation=41, assign={1: (["1_0", "1_1"], [])})),
        ("10:00:04.600", l0, "lock", dict(thread=1, task="1_0")),
        ("10:00:04.650", l0, "lock", dict(thread=2, task="1_1")),
        ("10:00:04.700", l0, "running", dict(thread=1)), ("10:00:04.720", l0, "running", dict(thread=2)),
        ("10:00:04.800", l1, "restore", dict(thread=1, task="1_0", checkpoint=41017, end=41090, duration_ms=240)),
        ("10:00:04.810", l1, "restore", dict(thread=1, task="1_1", checkpoint=39554, end=39601, duration_ms=210)),
        ("10:00:05.300", l1, "running", dict(thread=1)),
        ("10:19:58.114", l0, "write_checkpoint", dict(thread=1, task="1_0", offsets={f"{cl}-0": 48211}, standby=True)),
        # ledger-1 is redeployed: generation 42
        ("10:19:59.020", l1, "close", dict(offsets={"1_0": 48213, "1_1": 46890})),
        ("10:20:00.000", l0, "rebalance", dict(generation=42, heartbeat_notice=True, leader=True,
                                               assign={1: (["0_1"], []), 2: (["0_0"], ["1_0", "1_1"])})),
        ("10:20:02.900", l1, "start", {}),
        ("+0.2s", l1, "rebalance", dict(generation=42, assign={1: (["1_0", "1_1"], [])})),
        ("10:20:03.450", l0, "standby_lock_failed", dict(thread=2, task="1_0"), "lock_failed"),
        ("10:20:03.480", l0, "running", dict(thread=2), "b_running"),
        ("10:20:03.900", l0, "write_checkpoint", dict(thread=1, task="1_0", offsets={f"{cl}-0": 48213}, standby=True),
         "holder_close"),
        ("10:20:03.905", l0, "lock", dict(thread=1, task="1_0", action="released")),
        ("10:20:03.950", l0, "running", dict(thread=1)),
        ("10:20:06.100", l1, "restore", dict(thread=1, task="1_0", checkpoint=48213, end=48213, duration_ms=120)),
        ("10:20:06.110", l1, "restore", dict(thread=1, task="1_1", checkpoint=46890, end=46890, duration_ms=110)),
        ("10:20:06.400", l1, "running", dict(thread=1)),
        ("10:40:00.211", l0, "cleaner", dict(task="1_0"), "cleaner"),
        # ledger-2 joins: generation 43; the never-initialised standby 1_0 on StreamThread-2 writes back its stale offset
        ("10:52:00.000", l2, "start", {}),
        ("+0.3s", l2, "rebalance", dict(generation=43, assign={1: ([], ["1_0"])})),
        ("10:52:00.400", l0, "rebalance", dict(generation=43, heartbeat_notice=True, leader=True,
                                               assign={1: (["0_1"], []), 2: (["0_0"], ["1_1"])})),
        ("10:52:00.420", l1, "rebalance", dict(generation=43, heartbeat_notice=True, assign={1: (["1_0", "1_1"], [])})),
        ("10:52:00.460", l0, "write_checkpoint", dict(thread=2, task="1_0", offsets={f"{cl}-0": 48211}, standby=True),
         "writeback"),
        ("10:52:04.200", l0, "running", dict(thread=1)), ("10:52:04.230", l0, "running", dict(thread=2)),
        ("10:52:04.300", l1, "running", dict(thread=1)), ("10:52:04.500", l2, "lock", dict(thread=1, task="1_0")),
        ("10:52:04.600", l2, "running", dict(thread=1)),
        ("10:54:31.000", l0, "write_checkpoint", dict(thread=2, task="1_1", offsets={f"{cl}-1": 59817}, standby=True)),
        ("10:55:00.000", l0, "capture", dict(tasks={"0_0": "empty", "0_1": "empty", "1_0": "checkpoint-only", "1_1": "data"},
                                             process_file_ms=_ms("2026-02-10T10:00:04.650Z")), "capture"),
        # ledger-1 is OOM-killed; after the session timeout generation 44 gives ledger-0 the active 1_0
        ("11:00:55.370", l1, "crash", {}, "peer_kill"),
        ("11:01:05.600", l0, "rebalance", dict(generation=44, heartbeat_notice=True, leader=True,
                                               assign={1: (["0_1", "1_0"], []), 2: (["0_0", "1_1"], [])})),
        ("11:01:05.620", l2, "rebalance", dict(generation=44, heartbeat_notice=True, assign={1: ([], ["1_0", "1_1"])})),
        ("11:01:09.000", l0, "lock", dict(thread=1, task="1_0")),
        ("11:01:09.010", l0, "restore", dict(thread=1, task="1_0", checkpoint=48211, end=61877, duration_ms=6400),
         "active_restore_done"),
        ("11:01:09.030", l0, "restore", dict(thread=2, task="1_1", checkpoint=59817, end=60302, duration_ms=180)),
        ("11:01:15.800", l0, "running", dict(thread=1)), ("11:01:15.820", l0, "running", dict(thread=2)),
        ("11:01:16.000", l2, "running", dict(thread=1)),
        ("11:20:00.000", l0, "log_end", {}), ("11:20:00.000", l2, "log_end", {}),
    ]

    def expected(r: RenderResult) -> dict:
        e0 = r.emitters[l0]
        return {
            "guarantee": "at_least_once",
            "host": l0,
            "tasks": ["1_0"],
            "lock_holder_thread": e0.tname(1),
            "lock_failed_thread": e0.tname(2),
            "times": {
                "lock_failed": iso(r.marks["lock_failed"]),
                "failed_thread_running": iso(r.marks["b_running"]),
                "holder_closed_standby": iso(r.marks["holder_close"]),
                "cleaner_deletion": iso(r.marks["cleaner"]),
                "checkpoint_writeback": iso(r.marks["writeback"]),
                "peer_kill": iso(r.marks["peer_kill"]),
                "active_restore_done": iso(r.marks["active_restore_done"]),
            },
            "stale_checkpoint": {"task": "1_0", "changelog": cl, "partition": 0, "offset": 48211,
                                 "end_offset_at_restore": 61877},
            "state_capture": {"host": l0, "file": f"{l0}/state.tar.gz", "taken_at": iso(r.marks["capture"]),
                              "task_dir_without_rocksdb": "1_0"},
        }

    return Scenario(
        name="kafka-standby-lock-cleaner", product="kafka-streams", version="2.0.1", layout="logback-springboot3",
        date="2026-02-10", seed=8187, hosts=specs, script=s, app_id="ledger", app=app,
        notes="Spring Boot service 'ledger' (Kafka Streams 2.0.1, 2 stream threads on ledger-0). TRACE was enabled for "
              "AssignedStandbyTasks and ProcessorStateManager, DEBUG for the rest of processor.internals.",
        log_levels={PI: "DEBUG", f"{PI}.AssignedStandbyTasks": "TRACE", f"{PI}.ProcessorStateManager": "TRACE"},
        detectors=["standby-lock-stale-checkpoint"], readme=README_STANDBY, expected=expected)


# --------------------------------------------------------------------------------------------- KAFKA-7672
def restore_skipped() -> Scenario:
    a0, a1 = "audit-0", "audit-1"
    app = KafkaApp("audit-trail", "2.1.0", "exactly_once", topics={0: "audit-events", 1: "audit-trail-store1-repartition"},
                   stores={1: "store1"}, commit_ms=100, records_per_sec=500)
    specs = [HostSpec(a0, "UTC", 0, threads=2), HostSpec(a1, "UTC", 0)]
    s: list[tuple] = [
        ("08:00:00.000", a0, "start", {}),
        ("+0.4s", a0, "rebalance", dict(generation=321, assign={1: (["0_1", "1_1"], []), 2: (["0_0", "1_0"], [])},
                                        leader=True)),
        ("+0.2s", a0, "restore", dict(thread=1, task="1_1", checkpoint=None, end=734112, duration_ms=41_300),
         "first_restore_done"),
        ("+0.01s", a0, "restore", dict(thread=2, task="1_0", checkpoint=None, end=702554, duration_ms=39_800)),
        ("08:00:47.000", a0, "running", dict(thread=1)), ("08:00:47.020", a0, "running", dict(thread=2)),
        # audit-1 joins: 1_1 moves to StreamThread-2 of audit-0, which restores it in full (a real restore)
        ("08:31:10.000", a1, "start", {}),
        ("+0.3s", a1, "rebalance", dict(generation=322, assign={1: (["1_0"], [])})),
        ("08:31:10.310", a0, "rebalance", dict(generation=322, heartbeat_notice=True, leader=True,
                                               assign={1: (["0_1"], []), 2: (["0_0", "1_1"], [])})),
        ("+0.3s", a0, "restore", dict(thread=2, task="1_1", checkpoint=None, end=761930, duration_ms=43_100)),
        ("+0.1s", a1, "restore", dict(thread=1, task="1_0", checkpoint=None, end=730115, duration_ms=40_600)),
        ("08:31:14.200", a0, "running", dict(thread=1)),
        ("08:31:58.400", a0, "running", dict(thread=2)), ("08:31:56.000", a1, "running", dict(thread=1)),
        # audit-1 stops; after the session timeout generation 323 hands 1_1 back to StreamThread-1
        ("09:12:28.000", a1, "close", dict(offsets={"1_0": 771002})),
        ("09:12:38.900", a0, "rebalance", dict(generation=323, heartbeat_notice=True, leader=True,
                                               assign={1: (["0_1", "1_1"], []), 2: (["0_0", "1_0"], [])}), "gen323"),
        ("+0.7s", a0, "restore", dict(thread=1, task="1_1", checkpoint=None, end=802377, duration_ms=296, skipped=True),
         "skip_done"),
        ("+0.01s", a0, "restore", dict(thread=2, task="1_0", checkpoint=771002, end=771002, duration_ms=150)),
        ("+0.02s", a0, "running", dict(thread=2)),
        ("+0.01s", a0, "running", dict(thread=1), "t1_running"),
        ("09:40:00.000", a0, "log_end", {}),
    ]

    def expected(r: RenderResult) -> dict:
        e0 = r.emitters[a0]
        return {
            "guarantee": "exactly_once",
            "host": a0,
            "tasks": ["1_1"],
            "stream_thread": e0.tname(1),
            "generation": 323,
            "changelog": "audit-trail-store1-changelog", "partition": 1,
            "changelog_end_offset": 802377,
            "times": {"first_restore_done": iso(r.marks["first_restore_done"]),
                      "rebalance_323": iso(r.marks["gen323"]),
                      "skipped_restore_running": iso(r.marks["t1_running"])},
        }

    return Scenario(
        name="kafka-restore-skipped", product="kafka-streams", version="2.1.0", layout="kafka", date="2026-01-14",
        seed=7672, hosts=specs, script=s, app_id="audit-trail", app=app,
        notes="audit-trail batch consumers (Kafka Streams 2.1.0, EOS). DEBUG on for StoreChangelogReader.",
        log_levels={f"{PI}.StoreChangelogReader": "DEBUG"},
        detectors=["restore-skipped-after-reassignment"], readme=README_SKIPPED, expected=expected)


# --------------------------------------------------------------------------------------------- ALOS crash
def alos_crash() -> Scenario:
    r0, r1 = "reservations-0", "reservations-1"
    app = KafkaApp("reservations", "3.8.1", "at_least_once", topics={0: "reservation-requests"},
                   stores={0: "reservations-store"}, commit_ms=30_000, records_per_sec=350, state_updater=True)
    specs = [HostSpec(r0, "America/New_York", 0, pid=1), HostSpec(r1, "America/New_York", 0, pid=1)]
    cl = "reservations-reservations-store-changelog"
    s: list[tuple] = [
        ("06:00:00.000", r0, "start", {}), ("06:00:00.310", r1, "start", {}),
        ("06:00:01.200", r0, "rebalance", dict(generation=7, assign={1: (["0_0", "0_2"], [])}, leader=True)),
        ("06:00:01.240", r1, "rebalance", dict(generation=7, assign={1: (["0_1", "0_3"], [])})),
        ("06:00:04.600", r0, "restore", dict(thread=1, task="0_0", checkpoint=5_402_117, end=5_402_118, duration_ms=210)),
        ("06:00:04.610", r0, "restore", dict(thread=1, task="0_2", checkpoint=5_377_030, end=5_377_031, duration_ms=190)),
        ("06:00:04.620", r1, "restore", dict(thread=1, task="0_1", checkpoint=5_388_941, end=5_388_942, duration_ms=230)),
        ("06:00:04.630", r1, "restore", dict(thread=1, task="0_3", checkpoint=5_411_206, end=5_411_207, duration_ms=200)),
        ("06:00:05.200", r0, "running", dict(thread=1, committed={"reservation-requests-0": 91_204_117,
                                                                  "reservation-requests-2": 91_188_030})),
        ("06:00:05.230", r1, "running", dict(thread=1, committed={"reservation-requests-1": 91_193_941,
                                                                  "reservation-requests-3": 91_216_206}), "r1_running"),
        ("06:46:40.118", r1, "write_checkpoint", dict(thread=1, task="0_1", offsets={f"{cl}-1": 5_521_093})),
        ("06:46:52.530", r1, "write_checkpoint", dict(thread=1, task="0_3", offsets={f"{cl}-3": 5_544_012})),
        ("06:47:13.482", r1, "crash", {}, "kill"),
        ("06:47:41.190", r1, "start", {}, "restart"),
        ("+0.5s", r1, "rebalance", dict(generation=8, rejoin_delay_ms=14_000, assign={1: (["0_1", "0_3"], [])},
                                        reason="need to re-join with the given member-id: "
                                               "reservations-0b7d2a55-1f9e-4c47-a2b6-3cfd2e0d9a41-StreamThread-1-consumer-"
                                               "9c1e2f6a-5b3d-4e8f-a7c9-0d2b4f6e8a10")),
        ("06:47:45.020", r0, "rebalance", dict(generation=8, reason="group is already rebalancing", leader=True,
                                               rejoin_delay_ms=12_000, assign={1: (["0_0", "0_2"], [])})),
        ("06:48:00.300", r1, "restore", dict(thread=1, task="0_1", checkpoint=5_521_093, end=5_529_110, duration_ms=2100),
         "restore_done_0_1"),
        ("06:48:00.310", r1, "restore", dict(thread=1, task="0_3", checkpoint=5_544_012, end=5_550_981, duration_ms=1900)),
        ("06:48:02.700", r1, "running", dict(thread=1, committed={"reservation-requests-1": 92_180_077,
                                                                  "reservation-requests-3": 92_203_551}), "r1_rerunning"),
        ("06:48:00.000", r0, "running", dict(thread=1)),
        ("07:15:00.000", r0, "log_end", {}), ("07:15:00.000", r1, "log_end", {}),
    ]

    def expected(r: RenderResult) -> dict:
        e1 = r.emitters[r1]
        kill = r.marks["kill"]
        last = [x for x in r.evidence if x.source.startswith(r1 + "/") and x.event == "PROCESSING_SUMMARY"
                and x.ts_ms < kill][-1]
        return {
            "guarantee": "at_least_once",
            "crashed_host": r1,
            "tasks": ["0_1", "0_3"],
            "stream_thread": e1.tname(1),
            "commit_interval_ms": 30_000,
            "times": {"kill": iso(kill), "last_line_before_crash": iso(r.last_line_ms[r1 + "@kill"]),
                      "restart": iso(r.marks["restart"]), "running_again": iso(r.marks["r1_rerunning"])},
            "last_summary_before_crash": {"source": last.source, "line_no": last.line_no, "time": iso(last.ts_ms),
                                          "records_per_2min": last.fields["records"]},
            "restored_from_checkpoint": [
                {"task": "0_1", "checkpoint_offset": 5_521_093, "end_offset": 5_529_110, "restored_records": 8016},
                {"task": "0_3", "checkpoint_offset": 5_544_012, "end_offset": 5_550_981, "restored_records": 6968}],
            "reprocessing_window_ms_max": 30_000,
            "wipe_line_expected": False,
        }

    return Scenario(
        name="kafka-alos-crash-reprocessing", product="kafka-streams", version="3.8.1", layout="jsonl",
        date="2026-01-20", seed=3811, hosts=specs, script=s, app_id="reservations", app=app,
        notes="reservations service, JSON logs (logstash-logback-encoder); reservations-1 was OOM-killed.",
        detectors=["alos-crash-reprocessing"], readme=README_ALOS, expected=expected)


# --------------------------------------------------------------------------------------------- NIFI-16003
_PROCS = [
    dict(pid="5f0c2a1e-0197-1000-9d3e-3b8c5e2f4a11", table="orders-consumer", stream="orders", shards=4,
         thread="Timer-Driven Process Thread-3"),
    dict(pid="7a41d9b0-0197-1000-b1f2-6c0e8d4a2f37", table="payments-consumer", stream="payments", shards=2,
         thread="Timer-Driven Process Thread-7"),
    dict(pid="0c93e7f4-0197-1000-8e5a-91d2b7c4f608", table="clicks-consumer", stream="clicks", shards=4,
         thread="Timer-Driven Process Thread-1"),
]


def nifi_migration(loss: bool) -> Scenario:
    n = "nifi-0"
    procs = _PROCS if loss else _PROCS[2:] + [dict(_PROCS[0], thread="Timer-Driven Process Thread-5")]
    gaps = {"orders-consumer": 18, "payments-consumer": 24, "clicks-consumer": 71} if loss else \
        {"orders-consumer": 88, "clicks-consumer": 64}
    items = {"orders-consumer": 4, "payments-consumer": 2, "clicks-consumer": 4}
    s: list[tuple] = [("13:12:00.000", n, "start", dict(processors=procs))]
    for k, p in enumerate(procs):
        s.append((f"13:12:{31 + k}.{(k * 137) % 1000:03d}", n, "migrate",
                  dict(processor=p["pid"], put_gap_ms=gaps[p["table"]], legacy_items=items[p["table"]]), p["table"]))
    s.append(("14:30:00.000", n, "stop_noise", {}))
    capture_ms = _ms("2026-04-08T14:25:00.000Z")

    def extra(r: RenderResult) -> dict[str, str]:
        em = r.emitters[n]
        out = {"cloudtrail-dynamodb-2026-04-08.json": em.cloudtrail()}
        for p in procs:
            out[f"dynamodb-describe-{p['table']}.json"] = em.describe_table(p["table"])
            out[f"dynamodb-scan-{p['table']}.json"] = em.scan(p["table"], capture_ms)
        return out

    def expected(r: RenderResult) -> dict:
        f = r.emitters[n].facts
        rows = []
        for p in procs:
            t = p["table"]
            failed = t in f.get("copy_failed", {})
            rows.append({
                "component_id": p["pid"], "table": t, "migration_table": t + "_migration", "stream": p["stream"],
                "outcome": "checkpoints_lost" if failed else "migrated",
                "legacy_table_deleted": iso(f["legacy_deleted"][t]),
                "table_recreated_active": iso(f["recreated_active"][t]),
                "copy_failed": iso(f["copy_failed"][t]) if failed else None,
                "migration_table_deleted": iso(f["migration_deleted"][t]),
                "consuming_since": iso(f["consuming"][t][0]),
            })
        return {"host": n, "nifi_version": "2.9.0", "processors": rows,
                "failed_tables": [x["table"] for x in rows if x["outcome"] != "migrated"],
                "captures": {"taken_at": iso(capture_ms), "cloudtrail": "cloudtrail-dynamodb-2026-04-08.json"},
                "log_levels": "default" if loss else "org.apache.nifi.processors.aws.kinesis=INFO"}

    return Scenario(
        name="nifi-kinesis-migration-loss" if loss else "nifi-kinesis-migration-ok", product="nifi", version="2.9.0",
        layout="nifi", date="2026-04-08", seed=16003 if loss else 16004,
        hosts=[HostSpec(n, "America/New_York", 0, pid=2817, log_file="nifi-app.log")], script=s,
        app_id=None, notes="Standalone NiFi upgraded from 2.8.0 to 2.9.0; AWS captures at the bundle root.",
        log_levels=dict(NIFI_DEFAULT_LEVELS) | ({} if loss else {"org.apache.nifi.processors.aws.kinesis": "INFO"}),
        detectors=["kinesis-checkpoint-migration-loss"] if loss else [],
        readme=README_NIFI_LOSS if loss else README_NIFI_OK, expected=expected, extra_files=extra)


# --------------------------------------------------------------------------------------------- helpers
def _ms(iso_text: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(iso_text.replace("Z", "+00:00")).timestamp() * 1000)


def _secs(hms: str) -> float:
    h, m, s = hms.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def _hms(secs: float) -> str:
    ms = round(secs * 1000)
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"


SHIPPED = {
    "kafka-eos-stale-checkpoint": lambda: eos_stale_checkpoint(False),
    "kafka-eos-stale-checkpoint-info-only": lambda: eos_stale_checkpoint(True),
    "kafka-eos-clean-rolling-restart": eos_clean_rolling_restart,
    "kafka-standby-lock-cleaner": standby_lock_cleaner,
    "kafka-restore-skipped": restore_skipped,
    "kafka-alos-crash-reprocessing": alos_crash,
    "nifi-kinesis-migration-loss": lambda: nifi_migration(True),
    "nifi-kinesis-migration-ok": lambda: nifi_migration(False),
}


def scale_scenario(scale: int, seed: int = 7, fetch_responses_per_sec: float = 40.0) -> Scenario:
    """KAFKA-20685 on 8 pods in mixed layouts with DEBUG commit and fetch-session noise (benchmark input).

    The story takes about 12 minutes; ``scale`` adds minutes of steady state. At the default fetch rate
    that is about 12 MB per minute and ~2.5 % of the lines are catalogued events.
    """
    sc = eos_stale_checkpoint(False, hosts=8, steady_hours=scale / 60, name=f"scale-{scale}", debug_commits=True,
                              tail_minutes=2.0)
    sc.seed = seed
    sc.app.commit_ms = 1000
    sc.app.fetch_responses_per_sec = fetch_responses_per_sec
    sc.date = "2026-03-07"
    # Consumer DEBUG as raised for a fetch investigation: most lines are then noise no template matches.
    sc.log_levels["org.apache.kafka.clients.FetchSessionHandler"] = "DEBUG"
    # Real fleets mix logging set-ups (sidecars, Spring Boot apps, JSON shippers): the parser meets all three.
    mixed = ("kafka", "logback-springboot3", "jsonl")
    for k, host in enumerate(sc.hosts[1:], 1):
        host.layout = mixed[k % len(mixed)]
    return sc


from .readmes import (  # noqa: E402  (long texts live in their own module)
    README_ALOS, README_EOS, README_EOS_CLEAN, README_EOS_INFO, README_NIFI_LOSS, README_NIFI_OK, README_SKIPPED,
    README_STANDBY)
