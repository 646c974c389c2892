"""A Kafka Streams instance (one JVM) that prints what a given Kafka version prints.

Each public method is one step a scenario script can name (``start``, ``rebalance``, ``restore``,
``running``, ``crash``, ``close``, ``cleaner`` ...). Methods append story lines; steady-state noise
(processing summaries, DEBUG commit lines) is produced lazily afterwards from the RUNNING intervals.
Prefixes, thread names and wording follow the version (see ``templates.py`` for the ranges).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from . import configs
from .layouts import LogLine
from .templates import fill, kafka_template, parse_version

SUMMARY_INTERVAL_MS = 120_000


def rng_uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:32]}"


def jlist(items) -> str:
    """Java ``Collection#toString``."""
    return "[" + ", ".join(str(i) for i in items) + "]"


@dataclass
class Run:
    """One uninterrupted RUNNING interval of a StreamThread with the tasks it owned."""

    thread: int
    start: int
    end: int | None
    active: list[str]
    standby: list[str]
    #: The process id of the client the thread belonged to (a restarted client prints a new one).
    process_id: str = ""


@dataclass
class KafkaApp:
    """What every instance of one Streams application shares."""

    app_id: str
    version: str
    guarantee: str  # at_least_once | exactly_once | exactly_once_v2
    topics: dict[int, str]  # subtopology -> input topic
    stores: dict[int, str]  # subtopology -> logged persistent store
    commit_ms: int = 30_000
    standbys: int = 0
    state_dir: str = "/var/lib/kafka-streams"
    records_per_sec: int = 800
    state_updater: bool = False
    fetch_responses_per_sec: float = 0.0  # DEBUG FetchSessionHandler lines per thread (benchmark noise)

    def changelog(self, task: str) -> tuple[str, int]:
        sub, part = (int(x) for x in task.split("_"))
        return f"{self.app_id}-{self.stores[sub]}-changelog", part

    def input_partition(self, task: str) -> str:
        sub, part = (int(x) for x in task.split("_"))
        return f"{self.topics[sub]}-{part}"


@dataclass
class KafkaHost:
    """One KafkaStreams client (JVM) on one host."""

    name: str
    app: KafkaApp
    threads: int
    seed: str
    instance_id: str | None = None  # group.instance.id (static membership)
    lines: list[LogLine] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    facts: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.v = parse_version(self.app.version)
        self.rng = random.Random(self.seed)
        self.process_id = rng_uuid(self.rng)
        self.owned: dict[int, tuple[list[str], list[str]]] = {}
        self.thread_state: dict[int, str] = {}
        self.client_state = "NOT_RUNNING"
        self.member: dict[int, str] = {}
        self.generation = 0
        self.checkpoints: list[dict] = []

    # ---------------------------------------------------------------- names and prefixes
    @property
    def client_id(self) -> str:
        return f"{self.app.app_id}-{self.process_id}"

    def tname(self, i: int, process_id: str | None = None) -> str:
        """Thread ``i``'s name, in the current client or in the client of ``process_id``."""
        client = f"{self.app.app_id}-{process_id}" if process_id else self.client_id
        return f"{client}-StreamThread-{i}"

    def uname(self, i: int) -> str:
        return f"{self.client_id}-StateUpdater-{i}"

    def p_thread(self, i: int, process_id: str | None = None) -> str:
        return f"stream-thread [{self.tname(i, process_id)}] "

    def p_task(self, i: int, task: str) -> str:
        # Task prefix without the thread before 2.4 (reference §7.1, §10.1).
        return f"task [{task}] " if self.v < (2, 4) else f"{self.p_thread(i)}task [{task}] "

    def p_state_manager(self, i: int, task: str) -> str:
        # Active-task state managers print `stream-task [..]` from 3.5.
        return f"{self.p_thread(i)}stream-task [{task}] " if self.v >= (3, 5) else self.p_task(i, task)

    def p_standby(self, i: int, task: str) -> str:
        return f"standby-task [{task}] " if self.v < (2, 4) else f"{self.p_thread(i)}standby-task [{task}] "

    def p_consumer(self, i: int, process_id: str | None = None) -> str:
        inst = f"instanceId={self.instance_id}-{i}, " if self.instance_id and self.v >= (2, 3) else ""
        return f"[Consumer {inst}clientId={self.tname(i, process_id)}-consumer, groupId={self.app.app_id}] "

    def updater_on_thread(self, i: int) -> bool:
        return self.app.state_updater and self.v >= (3, 4)

    def p_restore(self, i: int) -> str:
        # From 4.0 the restore lines carry the state-updater prefix (reference §13.2).
        if self.updater_on_thread(i) and self.v >= (4, 0):
            return f"state-updater [{self.uname(i)}] "
        return self.p_thread(i)

    def p_restore_consumer(self, i: int) -> str:
        if self.updater_on_thread(i) and self.v >= (4, 0):
            return f"[Consumer clientId={self.uname(i)}-restore-consumer, groupId=null] "
        group = "" if self.v < (2, 2) else "null"
        return f"[Consumer clientId={self.tname(i)}-restore-consumer, groupId={group}] "

    def restore_thread(self, i: int) -> str:
        return self.uname(i) if self.updater_on_thread(i) else self.tname(i)

    def gen_arg(self, i: int) -> str:
        if self.v < (2, 7):
            return str(self.generation)
        return f"Generation{{generationId={self.generation}, memberId='{self.member[i]}', protocol='stream'}}"

    def plist(self, parts: list[str]) -> str:
        # Rebalance callback lines: `[a, b]` in 4.x, comma-joined without brackets in 2.4-3.x (§13.4).
        return jlist(parts) if self.v >= (4, 0) else ", ".join(parts)

    # ---------------------------------------------------------------- emission
    def emit(self, t: int, tid: str, thread: str, prefix: str, *args, suffix: str = "", stack: tuple[str, ...] = (),
             **fields) -> bool:
        tpl = kafka_template(tid, self.app.version)
        if tpl is None:
            return False
        msg = prefix + fill(tpl.text, args) + suffix
        self.lines.append(LogLine(t, tpl.level, thread, tpl.logger, msg, stack, tpl.event, fields))
        return True

    def step(self, t: int, lo: int = 1, hi: int = 12) -> int:
        return t + self.rng.randint(lo, hi)

    def _thread_state(self, t: int, i: int, to: str) -> None:
        self.emit(t, "thread.state", self.tname(i), self.p_thread(i), self.thread_state[i], to,
                  stream_thread=self.tname(i), from_state=self.thread_state[i], to_state=to)
        self.thread_state[i] = to

    def _client_state(self, t: int, to: str, thread: str) -> None:
        self.emit(t, "client.state", thread, f"stream-client [{self.client_id}] ", self.client_state, to,
                  from_state=self.client_state, to_state=to)
        self.client_state = to

    def _appinfo(self, t: int, thread: str) -> int:
        t = self.step(t, 0, 2)
        self.emit(t, "appinfo.version", thread, "", self.app.version.split("-")[0])
        self.emit(t, "appinfo.commit", thread, "", _commit_id(self.app.version))
        self.emit(t, "appinfo.start", thread, "", t)
        return t

    # ---------------------------------------------------------------- steps
    def start(self, t: int, process_file: str = "read") -> int:
        """Process start: config dumps, clients, threads (reference §6.1). ``process_file``: read | new."""
        v, app, main = self.v, self.app, "main"
        if v < (2, 8) or process_file == "new":
            self.process_id = rng_uuid(self.rng)  # random per start before 2.8 (§7.2)
        self.thread_state = {i: "CREATED" for i in range(1, self.threads + 1)}
        self.owned = {i: ([], []) for i in self.thread_state}
        self.client_state = "CREATED"
        self.facts.setdefault("starts", []).append(t)
        eos = app.guarantee.startswith("exactly_once")
        self.emit(t, "config.streams", main, "", suffix=configs.streams_config(
            app.version, app.app_id, app.guarantee, app.state_dir, self.threads, app.standbys, app.commit_ms,
            self.instance_id))
        t = self.step(t, 20, 60)
        if process_file == "read":
            self.emit(t, "sd.process_read", main, "", self.process_id)
        else:
            self.emit(t, "sd.process_new", main, "", self.process_id)
        t = self.step(t, 2, 9)
        self.emit(t, "streams.version", main, "", app.version)
        self.emit(t, "streams.commit", main, "", _commit_id(app.version))
        t = self.step(t, 3, 15)
        self.emit(t, "config.admin", main, "", suffix=configs.admin_config(app.version, f"{self.client_id}-admin"))
        t = self._appinfo(t, main)
        for i in self.thread_state:
            t = self.step(t, 2, 10)
            self.emit(t, "thread.create_restore_consumer", main, self.p_thread(i))
            rc = f"{self.uname(i) if self.updater_on_thread(i) and v >= (4, 0) else self.tname(i)}-restore-consumer"
            self.emit(t, "config.consumer", main, "", suffix=configs.consumer_config(
                app.version, rc, None, "read_committed" if eos else "read_uncommitted", None, True))
            t = self._appinfo(t, main)
            if app.guarantee != "exactly_once":
                t = self.step(t, 2, 8)
                self.emit(t, "thread.create_shared_producer", main, self.p_thread(i))
                txn = f"{app.app_id}-{self.process_id}-{i}" if eos else None
                self.emit(t, "config.producer", main, "", suffix=configs.producer_config(
                    app.version, f"{self.tname(i)}-producer", txn))
                t = self._appinfo(t, main)
            t = self.step(t, 2, 8)
            self.emit(t, "thread.create_consumer", main, self.p_thread(i))
            self.emit(t, "config.consumer", main, "", suffix=configs.consumer_config(
                app.version, f"{self.tname(i)}-consumer", app.app_id, "read_committed" if eos else "read_uncommitted",
                f"{self.instance_id}-{i}" if self.instance_id else None, False))
            t = self._appinfo(t, main)
        t = self.step(t, 5, 20)
        self._client_state(t, "RUNNING" if v < (2, 2) else "REBALANCING", main)
        for i in self.thread_state:
            t = self.step(t, 0, 3)
            self.emit(t, "thread.starting", self.tname(i), self.p_thread(i), stream_thread=self.tname(i))
            self._thread_state(t, i, "RUNNING" if v < (2, 4) else "STARTING")
            if self.updater_on_thread(i):
                self.emit(self.step(t, 0, 2), "dsu.started", self.uname(i), f"state-updater [{self.uname(i)}] ")
        t = self.step(t, 1, 4)
        self.emit(t, "streams.started", main, f"stream-client [{self.client_id}] ")
        self.emit(t, "streams.started_threads", main, f"stream-client [{self.client_id}] ", self.threads)
        for i in self.thread_state:
            t = self.step(t, 40, 160)
            self.emit(t, "coord.discovered", self.tname(i), self.p_consumer(i),
                      "kafka-1.kafka:9092 (id: 2147483646 rack: null" + (" isFenced: false)" if v >= (4, 0) else ")"))
        return t

    def rebalance(self, t: int, generation: int, assign: dict[int, tuple[list[str], list[str]]], leader: bool = False,
                  reason: str | None = None, heartbeat_notice: bool = False, clients: int = 2,
                  total_tasks: int | None = None, rejoin_delay_ms: int = 0) -> int:
        """One consumer-group rebalance as seen by every thread of this client; returns its end time."""
        self.generation = generation
        for i in self.thread_state:
            if i not in self.member or self.thread_state[i] in ("CREATED", "STARTING"):
                self.member[i] = f"{self.instance_id + '-' + str(i) if self.instance_id else self.tname(i) + '-consumer'}" \
                                 f"-{rng_uuid(self.rng)}"
        self._close_runs(t)
        if self.v < (2, 6):
            return self._rebalance_eager(t, assign, leader, heartbeat_notice, clients, rejoin_delay_ms)
        return self._rebalance_cooperative(t, assign, leader, reason, clients, total_tasks, rejoin_delay_ms)

    def _rebalance_eager(self, t, assign, leader, heartbeat_notice, clients, rejoin_delay_ms) -> int:
        """Eager protocol, 1.1-2.3: revoke everything, rejoin, `partition assignment took` summary."""
        for i in self.thread_state:
            tn, active, standby = self.tname(i), *self.owned[i]
            t = self.step(t, 1, 30)
            if heartbeat_notice:
                self.emit(t, "coord.heartbeat_rebalancing", tn, self.p_consumer(i))
                t = self.step(t, 0, 3)
            parts = [self.app.input_partition(x) for x in active]
            self.emit(t, "coord.revoking_all", tn, self.p_consumer(i), jlist(parts))
            self.emit(t, "thread.revoked_debug", tn, self.p_thread(i), self.thread_state[i], jlist(parts), jlist(active),
                      jlist(standby))
            self._thread_state(t, i, "PARTITIONS_REVOKED")
            if self.client_state == "RUNNING":
                self._client_state(t, "REBALANCING", tn)
            t = self.step(t, 0, 4)
            self.emit(t, "thread.revocation_took", tn, self.p_thread(i), self.rng.randint(0, 9), jlist(active),
                      jlist(standby), stream_thread=tn)
            self.emit(self.step(t, 0, 2), "coord.joining", tn, self.p_consumer(i))
        t = self.step(t, 2500, 3200) + rejoin_delay_ms
        if leader:
            state = ", ".join(
                f"{rng_uuid(self.rng) if n else self.process_id}=[activeTasks: ({jlist(self._all(n, 0))}) standbyTasks: "
                f"({jlist(self._all(n, 1))}) assignedTasks: ({jlist(self._all(n, 0) + self._all(n, 1))}) prevActiveTasks: "
                f"([]) prevStandbyTasks: ([]) prevAssignedTasks: ([]) capacity: {self.threads}]"
                for n in range(1 if clients < 2 else 1))
            self.emit(t, "spa.assigned_clients", self.tname(1), f"stream-thread [{self.tname(1)}-consumer] ", "{" + state + "}")
        for i in self.thread_state:
            tn = self.tname(i)
            active, standby = assign.get(i, ([], []))
            prev_active = self.owned[i][0]
            t = self.step(t, 1, 20)
            self.emit(t, "coord.joined", tn, self.p_consumer(i), self.gen_arg(i), generation=self.generation)
            self.emit(t, "coord.setting_assigned", tn, self.p_consumer(i),
                      jlist([self.app.input_partition(x) for x in active]))
            self._thread_state(t, i, "PARTITIONS_ASSIGNED")
            self.emit(t, "thread.assigned_debug", tn, self.p_thread(i), "PARTITIONS_ASSIGNED",
                      jlist([self.app.input_partition(x) for x in active]), jlist(prev_active), jlist(self.owned[i][1]))
            if self.app.guarantee == "exactly_once":
                for task in active:
                    t = self.step(t, 1, 5)
                    self.emit(t, "thread.create_task_producer", tn, self.p_thread(i), task)
                    self.emit(t, "config.producer", tn, "", suffix=configs.producer_config(
                        self.app.version, f"{tn}-{task}-producer", f"{self.app.app_id}-{task}"))
                    t = self._appinfo(t, tn)
            took = self.rng.randint(12, 480)
            t += took
            self.emit(t, "thread.assignment_took", tn, self.p_thread(i), took, jlist(active), jlist(standby),
                      jlist(prev_active), stream_thread=tn)
            self.owned[i] = (list(active), list(standby))
        return t

    def _all(self, n: int, k: int) -> list[str]:
        return sorted(x for i in self.owned for x in self.owned[i][k]) if n == 0 else []

    def _rebalance_cooperative(self, t, assign, leader, reason, clients, total_tasks, rejoin_delay_ms) -> int:
        """Classic protocol with cooperative rebalancing, 2.6-4.3 (reference §1.1)."""
        for i in self.thread_state:
            tn = self.tname(i)
            new_active, new_standby = assign.get(i, ([], []))
            revoked = [self.app.input_partition(x) for x in self.owned[i][0] if x not in new_active]
            t = self.step(t, 1, 25)
            if reason:
                self.emit(t, "coord.request_join", tn, self.p_consumer(i), reason)
            self.emit(self.step(t, 0, 2), "coord.joining", tn, self.p_consumer(i))
            if revoked:
                t = self.step(t, 1, 5)
                self.emit(t, "coord.revoke", tn, self.p_consumer(i), self.plist(revoked))
                self._thread_state(t, i, "PARTITIONS_REVOKED")
                self.emit(self.step(t, 1, 30), "thread.revocation_took", tn, self.p_thread(i), self.rng.randint(1, 40),
                          stream_thread=tn)
        t = self.step(t, 300, 3000) + rejoin_delay_ms
        for i in self.thread_state:
            tn = self.tname(i)
            active, standby = assign.get(i, ([], []))
            parts = sorted(self.app.input_partition(x) for x in active)
            owned = sorted(self.app.input_partition(x) for x in self.owned[i][0])
            t = self.step(t, 1, 15)
            self.emit(t, "coord.joined", tn, self.p_consumer(i), self.gen_arg(i), generation=self.generation)
            if leader and i == 1:
                t = self.step(t, 5, 40)
                n_tasks = total_tasks or len(active) * clients
                self.emit(t, "spa.assigned_total", tn, f"stream-thread [{tn}-consumer] ", n_tasks, n_tasks, clients)
                self.emit(t, "spa.stable", tn, f"stream-thread [{tn}-consumer] ")
            t = self.step(t, 3, 40)
            self.emit(t, "coord.synced", tn, self.p_consumer(i), self.gen_arg(i), generation=self.generation)
            added = [p for p in parts if p not in owned]
            removed = [p for p in owned if p not in parts]
            t = self.step(t, 0, 2)
            self.emit(t, "coord.updating", tn, self.p_consumer(i), jlist(parts), jlist(owned), jlist(added), jlist(removed))
            self.emit(t, "coord.notifying", tn, self.p_consumer(i),
                      f"Assignment(partitions={jlist(parts)}, userDataSize={self.rng.randint(90, 160)})")
            t = self.step(t, 0, 3)
            self.emit(t, "tm.handle_assignment", tn, self.p_thread(i), jlist(sorted(active)), jlist(sorted(standby)),
                      jlist(sorted(self.owned[i][0])), jlist(sorted(self.owned[i][1])), stream_thread=tn)
            t = self.step(t, 0, 3)
            self.emit(t, "coord.adding_assigned", tn, self.p_consumer(i), self.plist(added))
            self._thread_state(t, i, "PARTITIONS_ASSIGNED")
            if self.client_state != "REBALANCING":
                self._client_state(t, "REBALANCING", tn)
            self.owned[i] = (list(active), list(standby))
        return t

    def restore(self, t: int, thread: int, task: str, checkpoint: int | None, end: int, duration_ms: int = 1500,
                skipped: bool = False) -> int:
        """Initialise one stateful active task and restore its changelog from ``checkpoint`` to ``end``.

        ``skipped`` (1.1-2.1, KAFKA-7672): the thread believes the changelog was already restored and
        goes straight on, so no restore line follows the rewind.

        Returns the restoration-completion time. With the state updater on (3.8-4.2) the updater writes
        `.checkpoint` at that moment, under EOS too, with no INFO line (reference §13.1).
        """
        i, app, v = thread, self.app, self.v
        tn, rt = self.tname(i), self.restore_thread(i)
        store = app.stores[int(task.split("_")[0])]
        topic, part = app.changelog(task)
        cl = f"{topic}-{part}"
        records = end - (checkpoint + 1 if v >= (2, 6) else checkpoint) if checkpoint is not None else end
        f = dict(stream_thread=tn, task_id=task, store=store, topic=topic, partition=part)
        self.facts.setdefault("opened", []).append((t, task))
        if v >= (2, 6):
            t = self.step(t, 2, 20)
            if checkpoint is not None:
                self.emit(t, "psm.initialized_from_checkpoint", tn, self.p_state_manager(i, task), store, checkpoint, cl,
                          offset=checkpoint, **f)
            else:
                self.emit(t, "psm.no_checkpoint", tn, self.p_state_manager(i, task), store, cl, **f)
            self.emit(self.step(t, 0, 3), "task.initialized", tn, self.p_task(i, task), stream_thread=tn, task_id=task)
            if self.updater_on_thread(i):
                t = self.step(t, 1, 6)
                self.emit(t, "dsu.added", rt, f"state-updater [{self.uname(i)}] ", task, stream_thread=tn, task_id=task)
            t = self.step(t, 2, 12)
            self.emit(t, "consumer.assigned_to", rt, self.p_restore_consumer(i), cl)
            if checkpoint is not None:
                self.emit(t, "consumer.seeking", rt, self.p_restore_consumer(i), checkpoint + 1, cl)
            t = self.step(t, 5, 60)
            self.emit(t, "scr.end_offset", rt, self.p_restore(i), cl, end, offset=end, **f)
            start, pos = t, checkpoint or 0
            while t + 10_000 < start + duration_ms:
                t += 10_000 + self.rng.randint(0, 40)
                pos = (checkpoint or 0) + (end - (checkpoint or 0)) * (t - start) // duration_ms
                self.emit(t, "scr.in_progress", rt, self.p_restore(i), 1,
                          f"{{{cl}: position={pos}, end={end}, totalRestored={pos - (checkpoint or 0)}}}", **f)
            t = start + duration_ms
            self.emit(t, "scr.finished_changelog", rt, self.p_restore(i), cl, store, records, records=records, **f)
            if self.updater_on_thread(i):
                t = self.step(t, 0, 3)
                self.emit(t, "dsu.completed", rt, f"state-updater [{self.uname(i)}] ", task, stream_thread=tn, task_id=task)
                if (3, 8) <= v <= (4, 2):
                    # The updater checkpoints on restoration completion (KAFKA-20685): no INFO line, DEBUG only.
                    self.write_checkpoint(t, i, task, {cl: end - 1}, thread_name=rt)
            self.emit(self.step(t, 1, 15), "task.restored", tn, self.p_task(i, task), stream_thread=tn, task_id=task)
            return t
        # 1.1-2.5: restoration on the StreamThread; INFO only for from-scratch restores (2.1+).
        self.emit(t, "task.to_restoring", tn, self.p_thread(i), "stream task", task, stream_thread=tn, task_id=task)
        t = self.step(t, 1, 8)
        self.emit(t, "scr.start_restoring", tn, self.p_thread(i), jlist([cl]), **f)
        if checkpoint is None and app.guarantee.startswith("exactly_once"):
            # 2.0.1-2.5 under EOS: wipe and rewind instead of the ALOS "from beginning" line (StoreChangelogReader).
            t = self.no_checkpoint_eos(self.step(t, 1, 4), i, task)
        elif checkpoint is None:
            self.emit(t, "scr.restoring_from_beginning", tn, self.p_thread(i), task, store, cl, **f)
            self.emit(self.step(t, 1, 4), "fetcher.reset", tn, self.p_restore_consumer(i), cl, 0, offset=0, **f)
        if not skipped:
            self.emit(self.step(t, 1, 9), "scr.restoring_partition", tn, self.p_thread(i), cl, checkpoint or 0, end,
                      offset=checkpoint or 0, **f)
        t += duration_ms
        self.emit(t, "task.to_running", tn, self.p_thread(i), "stream task", task, stream_thread=tn, task_id=task)
        return t

    def running(self, t: int, thread: int, committed: dict[str, int] | None = None) -> None:
        """Thread PARTITIONS_ASSIGNED -> RUNNING; the client follows once every thread runs."""
        i, tn = thread, self.tname(thread)
        self._thread_state(t, i, "RUNNING")
        self.runs.append(Run(i, t, None, *[list(x) for x in self.owned[i]], process_id=self.process_id))
        if all(s == "RUNNING" for s in self.thread_state.values()) and self.client_state == "REBALANCING":
            self._client_state(self.step(t, 0, 2), "RUNNING", tn)
        for part, off in (committed or {}).items():
            t = self.step(t, 1, 6)
            self.emit(t, "coord.committed_offset", tn, "", part,
                      f"FetchPosition{{offset={off}, offsetEpoch=Optional[{self.generation % 7 + 3}], currentLeader="
                      f"LeaderAndEpoch{{leader=Optional[kafka-2.kafka:9092 (id: 2 rack: null"
                      f"{' isFenced: false' if self.v >= (4, 0) else ''})], epoch={self.generation % 7 + 3}}}}}")

    def _close_runs(self, t: int) -> None:
        for r in self.runs:
            if r.end is None:
                r.end = t

    def crash(self, t: int) -> None:
        """SIGKILL / OOM kill: the log simply stops (reference §6.4)."""
        self._close_runs(t)
        self.facts["kill_ms"] = t

    def close(self, t: int, offsets: dict[str, int] | None = None) -> int:
        """Clean KafkaStreams#close(): tasks closed clean, checkpoints written, client NOT_RUNNING.

        ``offsets``: task -> last changelog offset written into `.checkpoint` at close.
        """
        v = self.v
        self.facts["close_offsets"] = offsets or {}
        self._close_runs(t)
        main = "main"
        close_thread = f"{self.client_id}-CloseThread" if v >= (3, 2) else "kafka-streams-close-thread"
        self._client_state(t, "PENDING_SHUTDOWN", main)
        t = self.step(t, 0, 3)
        self.emit(t, "streams.shutting_down_threads", close_thread, f"stream-client [{self.client_id}] ", self.threads)
        for i in self.thread_state:
            tn = self.tname(i)
            t = self.step(t, 0, 4)
            self.emit(t, "thread.informed", tn, self.p_thread(i), stream_thread=tn)
            self._thread_state(t, i, "PENDING_SHUTDOWN")
            t = self.step(t, 1, 20)
            # `Shutting down` became `Shutting down clean|unclean` in 3.4.
            self.emit(t, "thread.shutting_down", tn, self.p_thread(i), *(("clean",) if v >= (3, 4) else ()), stream_thread=tn)
            for task in self.owned[i][0]:
                t = self.step(t, 2, 30)
                self.emit(t, "task.suspended", tn, self.p_task(i, task), "RUNNING", stream_thread=tn, task_id=task)
                topic, part = self.app.changelog(task)
                self.write_checkpoint(self.step(t, 1, 5), i, task, {f"{topic}-{part}": self.facts.get(
                    "close_offsets", {}).get(task, 0)})
                self.emit(self.step(t, 1, 8), "task.closed_clean", tn, self.p_task(i, task), stream_thread=tn, task_id=task)
            if self.updater_on_thread(i):
                t = self.step(t, 1, 10)
                self.emit(t, "dsu.shutting_down", self.uname(i), f"state-updater [{self.uname(i)}] ")
                self.emit(self.step(t, 1, 20), "dsu.stopped", self.uname(i), f"state-updater [{self.uname(i)}] ")
            t = self.step(t, 20, 120)
            self._thread_state(t, i, "DEAD")
            self.emit(t, "thread.shutdown_complete", tn, self.p_thread(i), stream_thread=tn)
        t = self.step(t, 1, 10)
        self.emit(t, "streams.shutdown_threads_complete", close_thread, f"stream-client [{self.client_id}] ", self.threads)
        self._client_state(t, "NOT_RUNNING", close_thread)
        self.emit(t, "streams.stopped", main, f"stream-client [{self.client_id}] ", *(("NOT_RUNNING",) if v >= (4, 1) else ()))
        self.facts["clean_stop_ms"] = t
        return t

    def log_end(self, t: int) -> None:
        """The log was copied at ``t``: steady-state noise stops here."""
        self._close_runs(t)

    def write_checkpoint(self, t: int, thread: int, task: str, offsets: dict[str, int], standby: bool = False,
                         thread_name: str | None = None) -> None:
        """`.checkpoint` written (DEBUG/TRACE line only); recorded for the state capture in any case."""
        i = thread
        prefix = self.p_standby(i, task) if standby else self.p_state_manager(i, task)
        arg = "{" + ", ".join(f"{k}={o}" for k, o in offsets.items()) + "}"
        args = (arg, task) if self.v >= (3, 5) else (arg,)
        topic, _, part = next(iter(offsets)).rpartition("-")
        self.emit(t, "psm.writing_checkpoint", thread_name or self.tname(i), prefix, *args, stream_thread=self.tname(i),
                  task_id=task, topic=topic, partition=int(part), offset=next(iter(offsets.values())))
        self.checkpoints.append({"ts_ms": t, "task": task, "offsets": dict(offsets)})

    def lock(self, t: int, thread: int, task: str, action: str = "acquired") -> None:
        """StateDirectory DEBUG lock lines (the per-task `.lock` file, 1.1-2.8)."""
        tid = "sd.acquired" if action == "acquired" else "sd.released"
        self.emit(t, tid, self.tname(thread), "", f"stream-thread [{self.tname(thread)}]", task,
                  stream_thread=self.tname(thread), task_id=task)

    def standby_lock_failed(self, t: int, thread: int, task: str) -> None:
        """2.0-2.3: creating the standby failed on the task lock; retried only at TRACE (reference §13.10)."""
        tn = self.tname(thread)
        self.emit(t, "standby.initializing", tn, self.p_thread(thread), "standby task", jlist([task]),
                  stream_thread=tn, task_id=task)
        self.emit(t, "standby.could_not_create", tn, self.p_thread(thread), "standby task", task,
                  f"{self.p_standby(thread, task)}Failed to lock the state directory for task {task}",
                  stream_thread=tn, task_id=task)

    def cleaner(self, t: int, task: str, age_ms: int | None = None, delay_ms: int = 600_000) -> None:
        """The state-dir cleaner deletes an unlocked task directory older than state.cleanup.delay.ms.

        ``age_ms`` defaults to the time since the directory was last modified (its last checkpoint write).
        """
        ct = f"{self.client_id}-CleanupThread"
        if age_ms is None:
            age_ms = t - max(c["ts_ms"] for c in self.checkpoints if c["task"] == task)
        self.emit(t, "sd.cleaned", ct, "", f"stream-thread [{ct}]", task, task, age_ms, delay_ms, task_id=task)
        self.facts.setdefault("cleaned", []).append((t, task))

    def no_checkpoint_eos(self, t: int, thread: int, task: str) -> int:
        """2.0.1-2.5: EOS task without checkpoint is wiped and its restore consumer rewinds to 0 (KAFKA-7672)."""
        tn = self.tname(thread)
        store = self.app.stores[int(task.split("_")[0])]
        topic, part = self.app.changelog(task)
        f = dict(stream_thread=tn, task_id=task, store=store, topic=topic, partition=part)
        self.emit(t, "scr.no_checkpoint_eos", tn, self.p_thread(thread), task, store, f"{topic}-{part}", **f)
        t = self.step(t, 0, 2)
        self.emit(t, "fetcher.reset", tn, self.p_restore_consumer(thread), f"{topic}-{part}", 0, offset=0, **f)
        return t

    def capture(self, t: int, tasks: dict[str, str], process_file_ms: int) -> None:
        """Operator copies the state directory at ``t`` (written as ``state.tar.gz``)."""
        opened = {task: ts for ts, task in sorted(self.facts.get("opened", [])) if ts <= t}
        self.capture_entries = kafka_capture(self, t, tasks, opened, process_file_ms)
        self.facts["capture_ms"] = t

    # ---------------------------------------------------------------- steady-state noise
    def noise(self, debug_commits: bool) -> Iterator[LogLine]:
        """Processing summaries (2.8+) and DEBUG commit lines for every RUNNING interval, in time order."""
        import heapq

        runs = [r for r in self.runs if r.end is not None and r.end > r.start]
        gens = [self._run_noise(r, debug_commits) for r in runs]
        if debug_commits and self.app.fetch_responses_per_sec > 0:
            gens += [self._run_fetches(r) for r in runs]
        return heapq.merge(*gens, key=lambda x: x.ts_ms)

    def _run_fetches(self, run: Run) -> Iterator[LogLine]:
        """DEBUG fetch-session lines of the main consumer (three brokers answering polls in turn)."""
        fetch = kafka_template("fetch_session.incremental", self.app.version)
        if fetch is None:
            return
        rng = random.Random(f"{self.seed}:fetch:{run.thread}:{run.start}")
        sessions = {node: rng.randint(10**8, 2**31 - 1) for node in range(3)}
        in_session = max(len(run.active), 1)
        prefix = self.p_consumer(run.thread, run.process_id)
        t = run.start + 50 + rng.randint(0, 20)
        while t < run.end:
            node = rng.randrange(3)
            answered = rng.randint(0, in_session)
            implied = in_session - answered
            tail = f", {implied} implied partition(s)" if implied else ""
            yield LogLine(t, fetch.level, self.tname(run.thread, run.process_id), fetch.logger,
                          prefix + fill(fetch.text, (node, 0, sessions[node], answered, tail)))
            t += max(1, round(rng.expovariate(self.app.fetch_responses_per_sec) * 1000))

    def _run_noise(self, run: Run, debug_commits: bool) -> Iterator[LogLine]:
        rng = random.Random(f"{self.seed}:{run.thread}:{run.start}")
        tn = self.tname(run.thread, run.process_id)
        prefix = self.p_thread(run.thread, run.process_id)
        summary = kafka_template("thread.summary", self.app.version)
        commit = kafka_template("thread.committed_debug", self.app.version)
        next_summary = run.start + SUMMARY_INTERVAL_MS + rng.randint(0, 30)
        next_commit = run.start + self.app.commit_ms + rng.randint(0, 15) if debug_commits else None
        commits = 0
        rate = self.app.records_per_sec * max(len(run.active), 1)
        while True:
            t = min(x for x in (next_summary, next_commit) if x is not None) if summary or debug_commits else run.end
            if t >= run.end:
                return
            if t == next_summary:
                if summary is not None:
                    records = int(rate * SUMMARY_INTERVAL_MS / 1000 * rng.uniform(0.9, 1.1))
                    tasks = max(commits, SUMMARY_INTERVAL_MS // self.app.commit_ms) * len(run.active)
                    args = (records, 0, rng.randint(1150, 1250), tasks, SUMMARY_INTERVAL_MS + rng.randint(0, 9)) \
                        if parse_version(self.app.version) >= (3, 9) else (records, 0, tasks)
                    yield LogLine(t, summary.level, tn, summary.logger, prefix + fill(summary.text, args),
                                  (), summary.event, {"stream_thread": tn, "records": records})
                commits = 0
                next_summary = t + SUMMARY_INTERVAL_MS + rng.randint(0, 25)
            else:
                commits += 1
                yield LogLine(t, commit.level, tn, commit.logger, prefix + fill(
                    commit.text, (jlist(run.active), jlist(run.standby), rng.randint(1, 9))), (), commit.event,
                    {"stream_thread": tn})
                next_commit = t + self.app.commit_ms + rng.randint(0, 15)


def _commit_id(version: str) -> str:
    """A stable 16-hex build id per version string (the line is a version fingerprint only)."""
    import hashlib

    return hashlib.sha1(version.encode()).hexdigest()[:16]


def _rocksdb_files(rng: random.Random, opened: int, last_write: int) -> list[tuple[str, int, bytes]]:
    """Tiny placeholders with RocksDB's file names (the toolkit only looks at names, sizes and mtimes)."""
    manifest = rng.randint(5, 40)
    sst = manifest + rng.randint(3, 30)
    return [
        ("CURRENT", opened, f"MANIFEST-{manifest:06d}\n".encode()),
        ("IDENTITY", opened, (rng_uuid(rng) + "\n").encode()),
        ("LOCK", opened, b""),
        (f"MANIFEST-{manifest:06d}", last_write, b"\x00" * 8),
        (f"OPTIONS-{manifest - 2:06d}", opened, b"[Version]\n"),
        (f"{sst:06d}.sst", last_write - rng.randint(20_000, 90_000), b"\x00" * 16),
        (f"{sst + 1:06d}.log", last_write, b"\x00" * 12),
    ]


def kafka_capture(host: KafkaHost, t: int, tasks: dict[str, str], opened: dict[str, int],
                  process_file_ms: int) -> list[tuple[str, int, bytes | None]]:
    """Entries of a state-dir capture taken at ``t``.

    ``tasks`` maps task id -> "data" (RocksDB files), "empty" (stateless task dir) or "checkpoint-only"; ``opened`` gives when each
    task's store was opened. `.checkpoint` content is the latest write recorded before ``t`` (§9.2 format).
    """
    from .capture import checkpoint_bytes

    rng = random.Random(f"{host.seed}:capture:{t}")
    base = f"kafka-streams/{host.app.app_id}"
    out: list[tuple[str, int, bytes | None]] = [(base + "/", process_file_ms, None)]
    if host.v >= (2, 8):
        out.append((f"{base}/.lock", host.facts["starts"][-1], b""))
        out.append((f"{base}/kafka-streams-process-metadata", process_file_ms,
                    ('{"processId":"' + host.process_id + '"}').encode()))
    for task, kind in sorted(tasks.items()):
        writes = [c for c in host.checkpoints if c["task"] == task and c["ts_ms"] <= t]
        dir_mtime = max([opened.get(task, process_file_ms)] + [c["ts_ms"] for c in writes])
        out.append((f"{base}/{task}/", dir_mtime, None))
        if writes:
            last = writes[-1]
            offs = {(k.rpartition("-")[0], int(k.rpartition("-")[2])): o for k, o in last["offsets"].items()}
            out.append((f"{base}/{task}/.checkpoint", last["ts_ms"], checkpoint_bytes(offs)))
        if host.v <= (2, 8) and kind != "checkpoint-only":  # per-task .lock files exist up to 2.8
            out.append((f"{base}/{task}/.lock", opened.get(task, process_file_ms), b""))
        if kind == "data":
            store = host.app.stores[int(task.split("_")[0])]
            last_write = t - rng.randint(200, 4000)
            for name, mtime, data in _rocksdb_files(rng, opened.get(task, process_file_ms), last_write):
                out.append((f"{base}/{task}/rocksdb/{store}/{name}", mtime, data))
            out.append((f"{base}/{task}/rocksdb/{store}/", last_write, None))
            out.append((f"{base}/{task}/rocksdb/", opened.get(task, process_file_ms), None))
    return out
