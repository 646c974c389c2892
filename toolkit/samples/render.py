"""Scenario model and renderer: a short script of steps -> an incident bundle on disk.

A :class:`Scenario` names the product, version, layout, hosts (zone, clock offset) and a ``script``: a list
of steps ``(when, host, action, kwargs[, mark])``. ``when`` is ``"HH:MM:SS.mmm"`` (true UTC on the scenario's
date) or ``"+12.5s"`` after the previous step; ``action`` is a method of the host's emitter
(:class:`~toolkit.samples.kafka.KafkaHost` or :class:`~toolkit.samples.nifi.NifiHost`); ``mark`` names the
step's time (or the value the action returns) for ``EXPECTED.json``. :func:`render` runs the script,
merges story lines with lazily generated steady-state noise, writes one log file per host in the
scenario's layout (streaming), the state captures, ``bundle.toml``, ``README.md`` and ``EXPECTED.json``,
and returns the evidence manifest: one row per rendered line that carries a canonical event.
"""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from .capture import write_tar_gz
from .layouts import LEVEL_VALUES, LogLine, render as render_line

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
#: Events that are routine chatter rather than part of an incident story (for the noise share).
NOISE_EVENTS = {None, "CONFIG_DUMP", "APP_START", "PROCESSING_SUMMARY", "COMMIT", "STATE_WAL_CHECKPOINT", "FLOW_SAVED",
                "COORDINATOR_FOUND", "OFFSET_POSITIONED"}


@dataclass
class HostSpec:
    """One host (pod, VM) of the bundle; its folder name is ``name``."""

    name: str
    timezone: str = "UTC"
    clock_offset_ms: int = 0  # host clock minus true time
    pid: int = 1
    threads: int = 1
    instance_id: str | None = None
    log_file: str = "app.log"
    layout: str | None = None  # this host's layout when it differs from the scenario's


@dataclass
class Scenario:
    """A declarative incident story plus everything needed to render it as a bundle."""

    name: str
    product: str  # kafka-streams | nifi
    version: str
    layout: str
    date: str  # UTC day the script's clock times refer to
    seed: int
    hosts: list[HostSpec]
    script: list[tuple]
    app_id: str | None = None
    notes: str = ""
    log_levels: dict[str, str] = field(default_factory=dict)  # logger prefix -> level; root is INFO
    detectors: list[str] = field(default_factory=list)
    readme: str = ""
    app: object | None = None  # KafkaApp for Kafka scenarios
    expected: Callable[["RenderResult"], dict] | None = None
    extra_files: Callable[["RenderResult"], dict[str, str]] | None = None

    def level_of(self, logger: str) -> int:
        best, best_len = "INFO", -1
        for prefix, level in self.log_levels.items():
            if (logger == prefix or logger.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = level, len(prefix)
        return LEVEL_VALUES[best]


@dataclass
class Evidence:
    """Where a story line landed and what the event classifier should call it."""

    source: str  # path inside the bundle
    line_no: int  # 1-based first physical line of the record
    event: str
    fields: dict
    ts_ms: int = 0  # true UTC time of the record (epoch ms)


@dataclass
class RenderResult:
    scenario: Scenario
    root: Path
    files: list[Path]
    evidence: list[Evidence]
    marks: dict[str, int]  # named true UTC times (epoch ms) from the script
    emitters: dict[str, object]
    last_line_ms: dict[str, int]  # per host, true time of the last rendered record
    line_counts: dict[str, tuple[int, int]]  # source -> (physical lines, lines from story records)


def parse_when(when: str | int, date: str, prev: int) -> int:
    if isinstance(when, int):
        return when
    if when.startswith("+"):
        return prev + round(float(when[1:].rstrip("s")) * 1000)
    day = datetime.fromisoformat(date).replace(tzinfo=timezone.utc)
    hh, mm, rest = when.split(":")
    ss, _, ms = rest.partition(".")
    dt = day + timedelta(hours=int(hh), minutes=int(mm), seconds=int(ss), milliseconds=int(ms or 0))
    return (dt - _EPOCH) // timedelta(milliseconds=1)


def build_emitters(sc: Scenario) -> dict[str, object]:
    from .kafka import KafkaHost
    from .nifi import NifiHost

    out: dict[str, object] = {}
    for h in sc.hosts:
        seed = f"{sc.seed}:{h.name}"
        if sc.product == "kafka-streams":
            out[h.name] = KafkaHost(h.name, sc.app, h.threads, seed, h.instance_id)
        else:
            out[h.name] = NifiHost(h.name, sc.version, seed, pid=h.pid)
    return out


def run_script(sc: Scenario, emitters: dict[str, object]) -> dict[str, int]:
    marks: dict[str, int] = {}
    prev = parse_when("00:00:00.000", sc.date, 0)
    for step in sc.script:
        when, host, action, kwargs = step[:4]
        t = parse_when(when, sc.date, prev)
        result = getattr(emitters[host], action)(t, **kwargs)
        if len(step) > 4:  # restore/migrate return their completion time; every other mark is the step's time
            marks[step[4]] = result if action in ("restore", "migrate") else t
        prev = result if isinstance(result, int) else t  # "+Ns" counts from the end of a multi-line step
    return marks


def render(sc: Scenario, out_dir: Path, evidence: bool = True, noise_scale: int = 1) -> RenderResult:
    """Render ``sc`` into ``out_dir/<sc.name>``; returns files written and the evidence manifest."""
    root = Path(out_dir) / sc.name
    root.mkdir(parents=True, exist_ok=True)
    emitters = build_emitters(sc)
    marks = run_script(sc, emitters)
    files: list[Path] = []
    rows: list[Evidence] = []
    last_line: dict[str, int] = {}
    counts: dict[str, tuple[int, int]] = {}
    for h in sc.hosts:
        em = emitters[h.name]
        host_dir = root / h.name
        host_dir.mkdir(exist_ok=True)
        path = host_dir / h.log_file
        source = f"{h.name}/{h.log_file}"
        story = sorted(em.lines, key=lambda x: x.ts_ms)
        noise = em.noise(debug_commits=sc.level_of("org.apache.kafka.streams.processor.internals.StreamThread")
                         <= LEVEL_VALUES["DEBUG"])
        merged: Iterator[tuple[LogLine, bool]] = heapq.merge(
            ((x, True) for x in story), ((x, False) for x in noise), key=lambda p: p[0].ts_ms)
        line_no, story_lines = 1, 0
        kill = em.facts.get("kill_ms")
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            for line, is_story in merged:
                if LEVEL_VALUES[line.level] < sc.level_of(line.logger):
                    continue
                text = render_line(h.layout or sc.layout, line, h.timezone, h.clock_offset_ms, h.pid)
                n = text.count("\n") + 1
                if evidence and line.event and (is_story or len(rows) < 200_000):
                    rows.append(Evidence(source, line_no, line.event, dict(line.fields), line.ts_ms))
                if is_story and line.event not in NOISE_EVENTS:
                    story_lines += n
                fh.write(text)
                fh.write("\n")
                line_no += n
                last_line[h.name] = line.ts_ms
                if kill is not None and line.ts_ms < kill:
                    last_line[h.name + "@kill"] = line.ts_ms
        counts[source] = (line_no - 1, story_lines)
        files.append(path)
        capture = getattr(em, "capture_entries", None)
        if capture:
            tar = host_dir / "state.tar.gz"
            write_tar_gz(tar, capture)
            files.append(tar)
    result = RenderResult(sc, root, files, rows, marks, emitters, last_line, counts)
    for rel, text in sorted((sc.extra_files(result) if sc.extra_files else {}).items()):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8", newline="\n")
        files.append(p)
    for rel, text in (("bundle.toml", bundle_toml(sc)), ("README.md", sc.readme),
                      ("EXPECTED.json", json.dumps(expected_of(result), indent=2) + "\n")):
        (root / rel).write_text(text, encoding="utf-8", newline="\n")
        files.append(root / rel)
    return result


def expected_of(result: RenderResult) -> dict:
    sc = result.scenario
    base = {
        "bundle": sc.name,
        "product": sc.product,
        "version": sc.version,
        "layout": sc.layout,
        "detectors": list(sc.detectors),
        "hosts": [h.name for h in sc.hosts],
    }
    return base | (sc.expected(result) if sc.expected else {})


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def bundle_toml(sc: Scenario) -> str:
    out = []
    if sc.app_id:
        out.append(f"app_id = {_toml_str(sc.app_id)}")
    out += [f"product = {_toml_str(sc.product)}", f"notes = {_toml_str(sc.notes)}", "", "[defaults]",
            'timezone = "UTC"']
    for h in sc.hosts:
        out += ["", f"[hosts.{h.name}]", f"timezone = {_toml_str(h.timezone)}", f"clock_offset_ms = {h.clock_offset_ms}"]
    return "\n".join(out) + "\n"


def jitter_rng(sc: Scenario, salt: str) -> random.Random:
    return random.Random(f"{sc.seed}:{salt}")


def noise_share(result: RenderResult) -> float:
    """Fraction of physical log lines that do not belong to story records."""
    total = sum(c[0] for c in result.line_counts.values())
    story = sum(c[1] for c in result.line_counts.values())
    return 1 - story / total if total else 0.0


def files_under(root: Path) -> Iterable[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())
