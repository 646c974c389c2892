"""Eventful benchmark bundles: a rebalance storm on N pods, with the density of catalogued lines set.

Real incident bundles are eventful: rebalance storms, several stream threads per pod, and the DEBUG
loggers the playbooks ask for (checkpoint writes every commit interval per task). This generator writes
such bundles with the knobs a real bundle varies:

* ``state_share``: the share of lines that are the storm's Kafka Streams state events (state
  transitions, group joins and syncs, revocations, assignments, checkpoint initialisations, restores);
* ``catalogued_share``: the share of lines any catalogue template classifies, state events included: the
  rest up to it are routine catalogued lines (the StreamThread's "Processed N total records" summary,
  or with ``debug_checkpoints`` the DEBUG "Writing checkpoint" and "Committed all active tasks" lines);
* ``hosts`` and ``threads`` (stream threads per pod); ``layouts`` (cycled over the pods: Kafka's log4j
  pattern, Spring Boot 3, logstash JSON lines) and ``wrapper`` (CRI container-log lines on every other
  pod); ``gb`` of log text in all.

The rest of the lines are client chatter (the consumer's DEBUG ``FetchSessionHandler`` lines) and the
application's own INFO lines (its logger, ``com.example.orders...``), which no template matches.

The storm's lines come from the scenario generator's Kafka Streams instances (``toolkit.samples``), so
their wording, prefixes and thread names are those of the chosen Kafka version; the routine lines use the
same template table. Deterministic for a seed; each pod's file is written by its own process.

    python benchmarks/eventful.py --gb 2 --hosts 8 --threads 4 --state-share 0.02 --catalogued-share 0.25
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from toolkit.samples.kafka import KafkaApp, KafkaHost, jlist
from toolkit.samples.layouts import LogLine, render as render_line
from toolkit.samples.templates import fill, kafka_template

DATA_DIR = Path(__file__).resolve().parent / "data"
GB = 10**9
GENERATOR = 1  # bump when the output changes: finished bundles are then written again
#: Average bytes of a physical line, to plan a file's line count before writing it (the writer stops on bytes).
LINE_BYTES_GUESS = 230
#: Lines a pod writes per second of its log: sets the span of time the bundle covers.
LINES_PER_SECOND = 150
APP_LOGGER = "com.example.orders.OrderTotalsProcessor"
START = datetime(2026, 3, 7, 8, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Shape:
    """What one eventful bundle looks like."""

    gb: float = 2.0
    hosts: int = 8
    threads: int = 4
    state_share: float = 0.02
    catalogued_share: float = 0.25
    debug_checkpoints: bool = False
    layouts: tuple[str, ...] = ("kafka",)
    wrapper: str | None = None  # "cri": every other pod's lines as the kubelet's container log files
    version: str = "3.8.0"
    seed: int = 7

    @property
    def name(self) -> str:
        digest = hashlib.sha1(json.dumps([GENERATOR, asdict(self)], sort_keys=True).encode()).hexdigest()[:8]
        return (f"eventful-{self.gb:g}gb-{self.hosts}h{self.threads}t-s{self.state_share:g}-c{self.catalogued_share:g}"
                f"{'-dbg' if self.debug_checkpoints else ''}-{digest}")


@dataclass
class HostPlan:
    shape: Shape
    index: int
    lines: int  # physical lines to write (about)
    bytes: int  # bytes to write (the writer stops there)
    span_ms: int
    rebalances: list[int] = field(default_factory=list)


def _app(shape: Shape) -> KafkaApp:
    return KafkaApp("orders-agg", shape.version, "exactly_once_v2", topics={0: "orders"}, stores={0: "order-totals"},
                    commit_ms=100 if shape.debug_checkpoints else 1000, state_updater=True, records_per_sec=4000)


def _tasks(shape: Shape) -> list[str]:
    return [f"0_{k}" for k in range(shape.hosts * shape.threads * 2)]


def _assignment(shape: Shape, host: int, round_: int) -> dict[int, tuple[list[str], list[str]]]:
    """Round ``round_`` of the storm: every task moves one thread on (tasks of a leaving member go elsewhere)."""
    tasks = _tasks(shape)
    members = shape.hosts * shape.threads
    out: dict[int, tuple[list[str], list[str]]] = {i: ([], []) for i in range(1, shape.threads + 1)}
    for k, task in enumerate(tasks):
        member = (k + round_) % members
        if member // shape.threads == host:
            out[member % shape.threads + 1][0].append(task)
    return out


def story(plan: HostPlan) -> KafkaHost:
    """The storm as this pod's Kafka Streams instance prints it: start, then rebalances with restores."""
    shape = plan.shape
    name = f"orders-agg-{plan.index}"
    host = KafkaHost(name, _app(shape), shape.threads, f"{shape.seed}:{name}", instance_id=name)
    t0 = int(START.timestamp() * 1000) + plan.index * 97
    t = host.start(t0)
    offsets: dict[str, int] = {}
    for round_, at in enumerate(plan.rebalances):
        t = max(t, at + plan.index * 13)
        assign = _assignment(shape, plan.index, round_)
        owned = {i: set(host.owned.get(i, ([], []))[0]) for i in assign}
        t = host.rebalance(t, generation=12 + round_, assign=assign, leader=plan.index == 0,
                           reason="group is already rebalancing" if round_ else None, clients=shape.hosts,
                           total_tasks=len(_tasks(shape)))
        for i, (active, _) in assign.items():
            for task in active:
                if task in owned[i]:
                    continue
                ckpt = offsets.get(task, 1_000_000 + 7919 * int(task[2:]))
                end = ckpt + host.rng.randint(200, 4000)
                t = host.restore(t, i, task, ckpt, end, duration_ms=host.rng.randint(300, 2500))
                offsets[task] = end
            host.running(host.step(t, 1, 20), i)
    host.log_end(t0 + plan.span_ms)
    return host


def _noise(plan: HostPlan, host: KafkaHost, catalogued: float, chatter: float) -> Iterator[LogLine]:
    """Routine lines in time order: catalogued ones at ``catalogued`` of them, fetch chatter at ``chatter``,
    the application's own lines for the rest. Endless: the writer stops on bytes."""
    shape = plan.shape
    rng = random.Random(f"{shape.seed}:noise:{plan.index}")
    summary = kafka_template("thread.summary", shape.version)
    commit = kafka_template("thread.committed_debug", shape.version)
    checkpoint = kafka_template("psm.writing_checkpoint", shape.version)
    fetch = kafka_template("fetch_session.incremental", shape.version)
    app_id = host.app.app_id
    names = {i: host.tname(i) for i in range(1, shape.threads + 1)}
    gap_ms = max(plan.span_ms / max(plan.lines, 1), 0.01)
    t = float(int(START.timestamp() * 1000) + 500)
    sessions = [rng.randint(10**8, 2**31 - 1) for _ in range(3)]
    order = 100_000 + plan.index * 1_000_000
    while True:
        t += rng.expovariate(1 / gap_ms)
        ms = int(t)
        i = rng.randint(1, shape.threads)
        tn = names[i]
        roll = rng.random()
        if roll < catalogued:
            if shape.debug_checkpoints:
                task = f"0_{(i - 1) * 2 + rng.randint(0, 1)}"
                if rng.random() < 0.5:
                    cl = f"{app_id}-order-totals-changelog-{task[2:]}"
                    yield LogLine(ms, checkpoint.level, tn, checkpoint.logger,
                                  f"stream-thread [{tn}] stream-task [{task}] " + fill(
                                      checkpoint.text, (f"{{{cl}={rng.randint(10**6, 10**7)}}}", task)))
                else:
                    yield LogLine(ms, commit.level, tn, commit.logger, f"stream-thread [{tn}] " + fill(
                        commit.text, (jlist([task]), jlist([]), rng.randint(1, 9))))
            else:
                args = (rng.randint(10**5, 10**7), 0, rng.randint(1000, 2500), rng.randint(50, 900), 120_000 + rng.randint(0, 9))
                args = args if summary.text.count("{}") == 5 else (args[0], args[1], args[3])
                yield LogLine(ms, summary.level, tn, summary.logger, f"stream-thread [{tn}] " + fill(summary.text, args))
        elif roll < catalogued + chatter:
            node = rng.randrange(3)
            answered = rng.randint(0, 8)
            tail = f", {8 - answered} implied partition(s)" if answered < 8 else ""
            yield LogLine(ms, fetch.level, tn, fetch.logger,
                          f"[Consumer instanceId=orders-agg-{plan.index}-{i}, clientId={tn}-consumer, groupId={app_id}] "
                          + fill(fetch.text, (node, 0, sessions[node], answered, tail)))
        else:
            order += 1
            yield LogLine(ms, "INFO", tn, APP_LOGGER,
                          f"Order {order} for customer C-{rng.randint(1000, 99999)} added to total of store "
                          f"{rng.randint(1, 400):03d}: {rng.randint(100, 99999) / 100:.2f} EUR")


def _cri(text: str, ms: int) -> str:
    stamp = datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"
    return "\n".join(f"{stamp} stdout F {part}" for part in text.split("\n"))


def write_host(plan: HostPlan, root: str) -> dict:
    """Write one pod's log; returns its byte, line and story-line counts."""
    shape = plan.shape
    host = story(plan)
    story_lines = sorted(host.lines, key=lambda x: x.ts_ms)
    story_physical = sum(x.message.count("\n") + 1 for x in story_lines)
    # The routine lines fill what the storm leaves of the catalogued share; fetch chatter takes half the rest.
    routine = max(plan.lines - story_physical, 1)
    catalogued = max(shape.catalogued_share * plan.lines - story_physical, 0) / routine
    chatter = (1 - catalogued) / 2
    layout = shape.layouts[plan.index % len(shape.layouts)]
    wrapped = shape.wrapper == "cri" and plan.index % 2 == 1
    path = Path(root) / f"orders-agg-{plan.index}" / ("app.log" if not wrapped else "0.log")
    path.parent.mkdir(parents=True, exist_ok=True)
    written = lines = 0
    merged = heapq.merge(((x, True) for x in story_lines), ((x, False) for x in _noise(plan, host, catalogued, chatter)),
                         key=lambda p: p[0].ts_ms)
    kept_story = 0
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for line, is_story in merged:
            if line.level == "DEBUG" and line.logger.endswith(("StateDirectory",)) and not shape.debug_checkpoints:
                continue
            text = render_line(layout, line, "UTC", 0, pid=1)
            if wrapped:
                text = _cri(text, line.ts_ms)
            fh.write(text)
            fh.write("\n")
            n = text.count("\n") + 1
            lines += n
            written += len(text.encode()) + 1
            kept_story += n if is_story else 0
            if written >= plan.bytes:
                break
    return {"host": plan.index, "bytes": written, "lines": lines, "story_lines": kept_story,
            "rebalances": len(plan.rebalances)}


def _story_lines_per_rebalance(shape: Shape) -> float:
    """Physical lines one rebalance adds to one pod's log (measured on a small storm of this shape)."""
    probe = HostPlan(shape, 0, 0, 0, 3_600_000, rebalances=[])
    base = story(probe)
    base_lines = sum(x.message.count("\n") + 1 for x in base.lines)
    probe.rebalances = [60_000 * (k + 1) + int(START.timestamp() * 1000) for k in range(4)]
    stormy = story(probe)
    return (sum(x.message.count("\n") + 1 for x in stormy.lines) - base_lines) / 4


def plans(shape: Shape) -> list[HostPlan]:
    per_host_bytes = int(shape.gb * GB / shape.hosts)
    per_host_lines = per_host_bytes // LINE_BYTES_GUESS
    span_ms = max(600_000, per_host_lines * 1000 // LINES_PER_SECOND)
    per_rebalance = _story_lines_per_rebalance(shape)
    count = max(1, round(shape.state_share * per_host_lines / per_rebalance)) if shape.state_share > 0 else 0
    t0 = int(START.timestamp() * 1000)
    # The storm is spread evenly after a quiet first minute; a round takes a few seconds.
    step = max((span_ms - 120_000) // max(count, 1), 8_000)
    times = [t0 + 60_000 + k * step for k in range(count)]
    return [HostPlan(shape, h, per_host_lines, per_host_bytes, span_ms, times) for h in range(shape.hosts)]


def ensure(shape: Shape, data_dir: Path = DATA_DIR, say=print) -> tuple[Path, dict]:
    """The bundle for ``shape``: reused when already complete, otherwise written. Returns (path, facts)."""
    root = data_dir / shape.name
    marker = data_dir / f"{shape.name}.done"
    if root.is_dir() and marker.exists():
        return root, json.loads(marker.read_text())
    import shutil

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    say(f"writing {shape.name} ({shape.gb:g} GB, {shape.hosts} pods x {shape.threads} threads) ...")
    t0 = time.perf_counter()
    todo = plans(shape)
    with ProcessPoolExecutor(max_workers=min(os.cpu_count() or 1, len(todo))) as pool:
        done = list(pool.map(write_host, todo, [str(root)] * len(todo)))
    facts = {"shape": asdict(shape), "bytes": sum(d["bytes"] for d in done), "lines": sum(d["lines"] for d in done),
             "story_lines": sum(d["story_lines"] for d in done), "rebalances": done[0]["rebalances"] if done else 0,
             "seconds": round(time.perf_counter() - t0, 1)}
    (root / "bundle.toml").write_text('app_id = "orders-agg"\n[defaults]\ntimezone = "UTC"\n', encoding="utf-8")
    marker.write_text(json.dumps(facts, indent=2))
    say(f"  {facts['bytes'] / GB:.3f} GB, {facts['lines']:,} lines ({facts['story_lines'] / max(facts['lines'], 1):.2%} "
        f"storm lines, {facts['rebalances']} rebalances) in {facts['seconds']:.0f} s")
    return root, facts


def shape_from_args(args: argparse.Namespace) -> Shape:
    return Shape(gb=args.gb, hosts=args.hosts, threads=args.threads, state_share=args.state_share,
                 catalogued_share=args.catalogued_share, debug_checkpoints=args.debug_checkpoints,
                 layouts=tuple(args.layouts.split(",")), wrapper=args.wrapper, version=args.version, seed=args.seed)


def add_shape_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gb", type=float, default=2.0, help="GB (10^9 bytes) of log text in all")
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--threads", type=int, default=4, help="stream threads per pod")
    parser.add_argument("--state-share", type=float, default=0.02, help="share of lines that are the storm's state events")
    parser.add_argument("--catalogued-share", type=float, default=0.25, help="share of lines any template classifies")
    parser.add_argument("--debug-checkpoints", action="store_true",
                        help="routine catalogued lines are DEBUG checkpoint writes and commits (else processing summaries)")
    parser.add_argument("--layouts", default="kafka", help="comma-separated, cycled over the pods: "
                        "kafka, logback-springboot3, jsonl")
    parser.add_argument("--wrapper", choices=("cri",), help="every other pod's lines as CRI container-log lines")
    parser.add_argument("--version", default="3.8.0", help="Kafka Streams version the pods print")
    parser.add_argument("--seed", type=int, default=7)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_arguments(parser)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    path, facts = ensure(shape_from_args(args), args.data_dir)
    print(path)
    print(json.dumps(facts, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
