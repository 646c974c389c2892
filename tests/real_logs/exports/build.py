#!/usr/bin/env python3
"""Build the log-platform export corpus from the real-log corpus (see README.md).

Every log line in the exports is copied from ``tests/real_logs/<group>/<id>.log`` (line content
without its line terminator). What is invented is what the platforms add around the lines: the
pods/hosts, the platform timestamps (the container runtime writes a line a fraction of a
millisecond to a few ms after the application's printed time; agents ingest it seconds later),
ids, offsets and labels. All of it is derived deterministically from the corpus, so running this
script again reproduces the same bytes.

    python tests/real_logs/exports/build.py

writes every export and its ``<export>.entries.tsv`` next to this file.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import tomllib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent
UTC = timezone.utc

# ---------------------------------------------------------------------------------------------
# The corpus: lines, kinds and printed instants (from the hand-written .expect files)
# ---------------------------------------------------------------------------------------------


@dataclass
class Line:
    file: str          # corpus file id
    no: int            # 1-based physical line number in the corpus file
    text: str          # the line without its terminator (a trailing CR of a CRLF file is dropped)
    kind: str          # S / R / C as in the .expect file
    pod: str = ""
    printed_ns: int | None = None   # the instant the line prints (S lines), from the .expect file
    printed_precision_ns: int = 0   # 10**6 for a millisecond stamp, 10**9 for whole seconds
    cri_ns: int = 0    # when the container runtime wrote the line (epoch ns)
    offset: int = 0    # byte offset of the line in the pod's container log file


def _instant_ns(text: str) -> int:
    """'2024-05-30T13:12:12.666Z' (any precision) -> epoch ns."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z", text)
    base = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    frac = (m.group(2) or "").ljust(9, "0")[:9]
    return int(base.timestamp()) * 10**9 + int(frac)


def load_corpus() -> dict[str, list[Line]]:
    files: dict[str, list[Line]] = {}
    for manifest in sorted(CORPUS.glob("*/manifest.toml")):
        for entry in tomllib.loads(manifest.read_text(encoding="utf-8"))["file"]:
            fid = entry["id"]
            raw = (manifest.parent / f"{fid}.log").read_bytes().decode("utf-8")
            texts = raw.split("\n")
            if texts and texts[-1] == "":
                texts.pop()
            texts = [t[:-1] if t.endswith("\r") else t for t in texts]
            rows = [r.split("\t") for r in (manifest.parent / f"{fid}.expect").read_text(encoding="utf-8").splitlines()
                    if r and not r.startswith("#")][1:]
            assert len(rows) == len(texts), fid
            files[fid] = [Line(fid, int(r[0]), t, r[1]) for r, t in zip(rows, texts)]
            for line, r in zip(files[fid], rows):
                line.printed_ns = _instant_ns(r[2]) if r[1] == "S" else None
                line.printed_precision_ns = (10 ** (9 - len(r[2].split(".")[1][:-1])) if "." in r[2] else 10**9) \
                    if r[1] == "S" else 0
    return files


def h(*parts) -> int:
    """A deterministic 'random' number from any parts."""
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest(), 16)


def rid(alphabet: str, n: int, *parts) -> str:
    x, out = h(*parts), []
    for _ in range(n):
        x, r = divmod(x, len(alphabet))
        out.append(alphabet[r])
        if x < len(alphabet):
            x = h(x, *parts)
    return "".join(out)


HEX = "0123456789abcdef"
B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
LOWER_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"


def uuid(*parts) -> str:
    s = rid(HEX, 32, *parts)
    return f"{s[:8]}-{s[8:12]}-4{s[13:16]}-{'89ab'[h(*parts, 'v') % 4]}{s[17:20]}-{s[20:]}"


# ---------------------------------------------------------------------------------------------
# Pods: which corpus files each one's container printed, in order
# ---------------------------------------------------------------------------------------------

POD_FILES = {
    "orders-agg-0": ["ksw10-c3-540-command-topology-startup-kafka-layout",
                     "ksw11-c3-540-eight-threads-assign-revoke-kafka-layout",
                     "ksw18-c3-540-second-rebalance-heartbeat-revoke-kafka-layout",
                     "ksw25-c3-540-restore-done-threads-running-kafka-layout",
                     "ksw19-c3-540-third-rebalance-eight-threads-kafka-layout"],
    "orders-agg-1": ["ks301-scs-kstreams-binder-sb3-shutdown-client"],
    "orders-agg-2": ["ks308-kafka-layout-thread-ttd-windows-crlf-checkpoint-denied",
                     "ks309-kafka-layout-thread-ttd-close-cleanup"],
    "orders-agg-3": ["ksqldb-playground-production-error-restart"],
    "orders-agg-4": ["gap06-littlehorse-timeonly-marker-eos-commit-timeout-task-corrupted",
                     "gap07-littlehorse-timeonly-marker-stream-task-prefix-producer-fenced",
                     "ks303-littlehorse-timeonly-ansi-standby-restore"],
    "orders-agg-5": ["ks23-kafka7921-jira-quote-kafka-layout"],
    "nifi-0": ["nf13-nifi230-restore-autostart-consumer-config",
               "nf14-nifi230-consumekafka-group-join"],
    "nifi-1": ["nf17-nifi1140-restore-402-flowfiles-autostart",
               "nf18-nifi1140-puthdfs-error-kafka-coordinator-lost-shutdown"],
}

# First line of a multi-line record, per pod (Filebeat multiline.pattern, negate: true, match: after;
# the same lines are the ones Splunk's BREAK_ONLY_BEFORE_DATE finds a timestamp at).
RECORD_START = {
    "orders-agg-0": r"^\[\d{4}-\d\d-\d\d ", "orders-agg-2": r"^\[\d{4}-\d\d-\d\d ",
    "orders-agg-3": r"^\[\d{4}-\d\d-\d\d ", "orders-agg-5": r"^\[\d{4}-\d\d-\d\d ",
    "orders-agg-1": r"^\d{4}-\d\d-\d\dT\d\d:", "orders-agg-4": r"^\d\d:\d\d:\d\d ",
    "nifi-0": r"^\d{4}-\d\d-\d\d \d\d:", "nifi-1": r"^\d{4}-\d\d-\d\d \d\d:",
}

POD_META = {  # app label / container / namespace / image (tags from the versions the corpus shows)
    "orders-agg": ("orders", "orders-agg"),
    "nifi": ("nifi", "nifi"),
}
IMAGES = {
    "orders-agg-0": "registry.example.com/orders/orders-agg:5.4.0", "orders-agg-1": "registry.example.com/orders/orders-agg:3.3.1",
    "orders-agg-2": "registry.example.com/orders/orders-agg:3.0.0", "orders-agg-3": "registry.example.com/orders/orders-agg:0.23.1",
    "orders-agg-4": "registry.example.com/orders/orders-agg:3.8.1", "orders-agg-5": "registry.example.com/orders/orders-agg:2.3.0",
    "nifi-0": "docker.io/apache/nifi:2.3.0", "nifi-1": "docker.io/apache/nifi:1.14.0",
}


def app_of(pod: str) -> str:
    return pod.rsplit("-", 1)[0]


def namespace_of(pod: str) -> str:
    return POD_META[app_of(pod)][0]


def container_of(pod: str) -> str:
    return POD_META[app_of(pod)][1]


def assign_container_times(files: dict[str, list[Line]]) -> None:
    """The container runtime's timestamp of every line, and its offset in the pod's log file.

    A record's first line is written a fraction of a millisecond to ~3 ms after the time the
    application printed (up to a second later when the application printed whole seconds);
    the following lines of a multi-line record tens of microseconds apart. The runtime's times
    never go backwards even where the printed ones do (threads racing for stdout)."""
    for pod, fids in POD_FILES.items():
        offset = 0
        for fid in fids:
            prev = None
            first_printed = next(x.printed_ns for x in files[fid] if x.kind == "S")
            for line in files[fid]:
                line.pod = pod
                if prev is None and line.kind != "S":  # the file opens inside a record
                    prev = first_printed - 5_000_000
                if line.kind == "S":
                    step = line.printed_precision_ns
                    jitter = 120_000 + h(fid, line.no, "cri") % (2_900_000 if step < 10**9 else 880_000_000)
                    t = line.printed_ns + jitter
                else:
                    t = prev + 9_000 + h(fid, line.no, "cri") % 55_000
                if prev is not None and t <= prev:
                    t = prev + 7_000 + h(fid, line.no, "mono") % 30_000
                line.cri_ns = prev = t
                line.offset = offset
                offset += len(f"{rfc3339_nano(t)} stdout F {line.text}\n".encode())


# ---------------------------------------------------------------------------------------------
# Time formatting
# ---------------------------------------------------------------------------------------------

def dt(ns: int, tz=UTC) -> datetime:
    return datetime.fromtimestamp(ns // 10**9, tz)


def rfc3339_nano(ns: int, tz=UTC) -> str:
    """Go's time.RFC3339Nano (trailing zeros of the fraction dropped), as containerd/logcli print."""
    d = dt(ns, tz)
    frac = f"{ns % 10**9:09d}".rstrip("0")
    off = d.strftime("%z")
    off = "Z" if off == "+0000" and tz is UTC else f"{off[:3]}:{off[3:]}"
    return d.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + off


def iso_ms_z(ns: int) -> str:
    return dt(ns).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ns // 10**6 % 1000:03d}Z"


def proto_timestamp(ns: int) -> str:
    """protobuf JSON Timestamp: Z-normalized with 0, 3, 6 or 9 fractional digits."""
    frac = ns % 10**9
    digits = "" if frac == 0 else f".{frac // 10**6:03d}" if frac % 10**6 == 0 else \
        f".{frac // 1000:06d}" if frac % 1000 == 0 else f".{frac:09d}"
    return dt(ns).strftime("%Y-%m-%dT%H:%M:%S") + digits + "Z"


def epoch_ms(ns: int) -> int:
    return ns // 10**6


# ---------------------------------------------------------------------------------------------
# JSON encoders that write strings the way each producer does
# ---------------------------------------------------------------------------------------------

def _escape(s: str, hex_upper: bool = False, html: bool = False, short=("\b", "\f", "\n", "\r", "\t")) -> str:
    out = []
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in short:
            out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif o < 0x20 or (html and ch in "<>&\u2028\u2029"):
            out.append(f"\\u{o:04X}" if hex_upper else f"\\u{o:04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def json_compact(v, esc=_escape, sort=False) -> str:
    if isinstance(v, dict):
        items = sorted(v.items()) if sort else v.items()
        return "{" + ",".join(f"{esc(k)}:{json_compact(x, esc, sort)}" for k, x in items) + "}"
    if isinstance(v, list):
        return "[" + ",".join(json_compact(x, esc, sort) for x in v) + "]"
    if isinstance(v, RawJSON):
        return v.text
    if isinstance(v, str):
        return esc(v)
    return json.dumps(v)


class RawJSON:
    """JSON text embedded as-is (Elasticsearch returns a document's _source as the bytes indexed)."""

    def __init__(self, text: str):
        self.text = text


def go_escape(s: str) -> str:  # encoding/json: HTML-safe, \n \r \t short, others \u00xx
    return _escape(s, html=True, short=("\n", "\r", "\t"))


def jackson_escape(s: str) -> str:  # Elasticsearch (Jackson): \u00XX upper-case hex
    return _escape(s, hex_upper=True)


def es_pretty(v, indent: int = 0) -> str:
    """Elasticsearch's ?pretty output (Jackson DefaultPrettyPrinter with arrays indented)."""
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(v, dict):
        if not v:
            return "{ }"
        return "{\n" + ",\n".join(f"{inner}{jackson_escape(k)} : {es_pretty(x, indent + 1)}"
                                  for k, x in v.items()) + f"\n{pad}}}"
    if isinstance(v, list):
        if not v:
            return "[ ]"
        return "[\n" + ",\n".join(f"{inner}{es_pretty(x, indent + 1)}" for x in v) + f"\n{pad}]"
    if isinstance(v, RawJSON):
        return es_pretty(json.loads(v.text), indent)
    if isinstance(v, str):
        return jackson_escape(v)
    return json.dumps(v)


# ---------------------------------------------------------------------------------------------
# Entries: what a platform stores for a selection of corpus lines
# ---------------------------------------------------------------------------------------------

@dataclass
class Entry:
    lines: list[Line]

    @property
    def pod(self) -> str:
        return self.lines[0].pod

    @property
    def text(self) -> str:
        return "\n".join(line.text for line in self.lines)

    @property
    def cri_ns(self) -> int:
        return self.lines[0].cri_ns

    @property
    def printed_ns(self) -> int:
        return self.lines[0].printed_ns

    @property
    def origin(self) -> str:
        return f"{self.lines[0].file}:{self.lines[0].no}-{self.lines[-1].no}"

    @property
    def key(self) -> tuple:
        return (self.lines[0].file, self.lines[0].no, self.lines[-1].no)


def select(files, segments, joined: bool) -> list[Entry]:
    """Entries for segments (file id, first line, last line): one per physical line, or one per
    multi-line record (a record starts at a line matching the pod's RECORD_START)."""
    entries: list[Entry] = []
    for fid, first, last in segments:
        lines = files[fid][first - 1:last]
        if not joined:
            entries += [Entry([line]) for line in lines]
            continue
        start = re.compile(RECORD_START[lines[0].pod])
        assert start.match(lines[0].text), f"{fid}:{first} does not start a record"
        after = files[fid][last] if last < len(files[fid]) else None
        assert after is None or start.match(after.text), f"{fid}:{last} ends inside a record"
        for line in lines:
            if start.match(line.text):
                entries.append(Entry([line]))
            else:
                entries[-1].lines.append(line)
    return entries


def by_time(entries: list[Entry], newest_first: bool, key=lambda e: e.cri_ns) -> list[Entry]:
    return sorted(entries, key=key, reverse=newest_first)


def write(name: str, text: str, rows: list[tuple]) -> None:
    (HERE / name).write_bytes(text.encode("utf-8"))
    tsv = "entry\thost\torigin\tduplicate_of\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows)
    (HERE / f"{name}.entries.tsv").write_bytes(tsv.encode("utf-8"))


def rows_for(entries, first_entry_no: int = 1, step_rows=None, duplicates=None):
    """Expectation rows; step_rows(entry) = how many positions the entry takes (default 1)."""
    rows, n = [], first_entry_no
    for e in entries:
        rows.append((n, e.pod, e.origin, (duplicates or {}).get(e.key, "-")))
        n += step_rows(e) if step_rows else 1
    return rows


# ---------------------------------------------------------------------------------------------
# Kubernetes metadata per cluster (one cluster per shipping stack)
# ---------------------------------------------------------------------------------------------

CLUSTER_NODES = {
    "elastic": ["k8s-node-03", "k8s-node-07", "k8s-node-11"],
    "fluentbit": ["worker-b-02", "worker-b-05"],
    "loki": ["node-pool-a-1", "node-pool-a-2", "node-pool-a-4"],
    "eks": ["ip-10-42-17-203.eu-west-1.compute.internal", "ip-10-42-33-58.eu-west-1.compute.internal",
            "ip-10-42-61-9.eu-west-1.compute.internal"],
    "gke": ["gke-prod-eu1-pool-2-5c1f3a0e-k7qd", "gke-prod-eu1-pool-2-5c1f3a0e-x2mb"],
}


def node_of(cluster: str, pod: str) -> str:
    nodes = CLUSTER_NODES[cluster]
    return nodes[h(cluster, pod, "node") % len(nodes)]


def container_id(cluster: str, pod: str) -> str:
    return rid(HEX, 64, cluster, pod, "container")


def pod_uid(cluster: str, pod: str) -> str:
    return uuid(cluster, pod, "uid")


def pod_ip(cluster: str, pod: str) -> str:
    x = h(cluster, pod, "ip")
    return f"10.{100 + x % 50}.{x // 50 % 250}.{2 + x // 12500 % 250}"


def pod_labels(pod: str) -> dict:
    app = app_of(pod)
    return {"app": app, "controller-revision-hash": f"{app}-{rid(HEX[:10] + 'bcdf', 10, app, 'rev')}",
            "statefulset.kubernetes.io/pod-name": pod}


def containers_log_path(cluster: str, pod: str) -> str:
    return f"/var/log/containers/{pod}_{namespace_of(pod)}_{container_of(pod)}-{container_id(cluster, pod)}.log"


def pods_log_path(cluster: str, pod: str) -> str:
    return f"/var/log/pods/{namespace_of(pod)}_{pod}_{pod_uid(cluster, pod)}/{container_of(pod)}/0.log"


# ---------------------------------------------------------------------------------------------
# 1. Elasticsearch: Filebeat 8 (filestream + container parser + add_kubernetes_metadata)
# ---------------------------------------------------------------------------------------------

FILEBEAT_VERSION = "8.13.4"


def filebeat_source(e: Entry) -> dict:
    c, pod = "elastic", e.pod
    node = node_of(c, pod)
    log = {"offset": e.lines[0].offset, "file": {"path": containers_log_path(c, pod)}}
    if len(e.lines) > 1:
        log["flags"] = ["multiline"]
    return {
        "@timestamp": iso_ms_z(e.cri_ns),
        "log": log,
        "stream": "stdout",
        "message": e.text,
        "input": {"type": "filestream"},
        "ecs": {"version": "8.0.0"},
        "host": {"name": node, "hostname": node, "architecture": "x86_64", "containerized": False,
                 "os": {"kernel": "5.15.0-105-generic", "codename": "jammy", "type": "linux",
                        "platform": "ubuntu", "version": "22.04.4 LTS (Jammy Jellyfish)",
                        "family": "debian", "name": "Ubuntu"}},
        "agent": {"name": node, "type": "filebeat", "version": FILEBEAT_VERSION,
                  "ephemeral_id": uuid(c, node, "ephemeral"), "id": uuid(c, node, "agent")},
        "container": {"id": container_id(c, pod), "runtime": "containerd", "image": {"name": IMAGES[pod]}},
        "kubernetes": {
            "pod": {"name": pod, "uid": pod_uid(c, pod), "ip": pod_ip(c, pod)},
            "namespace": namespace_of(pod),
            "namespace_uid": uuid(c, namespace_of(pod), "ns"),
            "statefulset": {"name": app_of(pod)},
            "labels": {k.replace(".", "_"): v for k, v in pod_labels(pod).items()},
            "container": {"name": container_of(pod)},
            "node": {"name": node, "hostname": node, "uid": uuid(c, node, "node"),
                     "labels": {"kubernetes_io/hostname": node, "kubernetes_io/os": "linux",
                                "kubernetes_io/arch": "amd64"}},
        },
    }


def es_hit(index: str, id_: str, source, sort_value) -> dict:
    return {"_index": index, "_id": id_, "_score": None, "_source": source, "sort": [sort_value]}


def filebeat_index(e: Entry) -> str:
    return f".ds-filebeat-{FILEBEAT_VERSION}-{dt(e.cri_ns).strftime('%Y.%m.%d')}-000001"


def search_response(hits: list[dict], took: int, shards: int) -> dict:
    return {"took": took, "timed_out": False,
            "_shards": {"total": shards, "successful": shards, "skipped": 0, "failed": 0},
            "hits": {"total": {"value": len(hits), "relation": "eq"}, "max_score": None, "hits": hits}}


def build_es_filebeat_search(files):
    name = "es-filebeat-search.json"
    entries = by_time(select(files, [("ksw25-c3-540-restore-done-threads-running-kafka-layout", 1, 42),
                                     ("ks301-scs-kstreams-binder-sb3-shutdown-client", 2, 45)], joined=True),
                      newest_first=False)
    hits = [es_hit(filebeat_index(e), rid(B64URL, 20, name, e.key), filebeat_source(e), epoch_ms(e.cri_ns))
            for e in entries]
    write(name, es_pretty(search_response(hits, took=23, shards=2)) + "\n", rows_for(entries))


def build_es_filebeat_ndjson(files):
    name = "es-filebeat-hits.ndjson"
    entries = by_time(select(files, [("ksqldb-playground-production-error-restart", 95, 160),
                                     ("nf17-nifi1140-restore-402-flowfiles-autostart", 112, 145)], joined=True),
                      newest_first=False)
    jq = lambda s: _escape(s, short=("\b", "\f", "\n", "\r", "\t"))  # jq -c: \u00xx lower-case
    lines = [json_compact(es_hit(filebeat_index(e), rid(B64URL, 20, name, e.key), filebeat_source(e),
                                 epoch_ms(e.cri_ns)), jq) for e in entries]
    write(name, "".join(line + "\n" for line in lines), rows_for(entries))


# ---------------------------------------------------------------------------------------------
# 2. Elasticsearch: Fluent Bit (tail + cri multiline parser + kubernetes filter + es output)
# ---------------------------------------------------------------------------------------------

def fluentbit_escape(s: str) -> str:  # flb_utils_write_str: \u00xx lower-case
    return _escape(s, short=("\b", "\f", "\n", "\r", "\t"))


def fluentbit_record(e: Entry, cluster: str, labels: bool = True) -> dict:
    pod = e.pod
    cid = container_id(cluster, pod)
    k8s = {"pod_name": pod, "namespace_name": namespace_of(pod), "pod_id": pod_uid(cluster, pod)}
    if labels:
        k8s["labels"] = pod_labels(pod)
    k8s.update({"host": node_of(cluster, pod), "container_name": container_of(pod), "docker_id": cid,
                "container_hash": IMAGES[pod].rsplit(":", 1)[0] + "@sha256:" + rid(HEX, 64, IMAGES[pod]),
                "container_image": IMAGES[pod]})
    return {"time": rfc3339_nano(e.cri_ns), "stream": "stdout", "_p": "F", "log": e.text, "kubernetes": k8s}


def build_es_fluentbit_search(files):
    name = "es-fluentbit-search.json"
    entries = by_time(select(files, [("ks309-kafka-layout-thread-ttd-close-cleanup", 1, 52),
                                     ("nf14-nifi230-consumekafka-group-join", 30, 45)], joined=False),
                      newest_first=True)
    hits = []
    for e in entries:
        record = {"@timestamp": iso_ms_z(e.cri_ns), **fluentbit_record(e, "fluentbit")}
        source = RawJSON(json_compact(record, fluentbit_escape))
        hits.append(es_hit(f"logstash-{dt(e.cri_ns).strftime('%Y.%m.%d')}", rid(B64URL, 20, name, e.key),
                           source, epoch_ms(e.cri_ns)))
    write(name, json_compact(search_response(hits, took=9, shards=2), jackson_escape), rows_for(entries))


# ---------------------------------------------------------------------------------------------
# 3. Kibana Discover CSV report (data view filebeat-*, columns kubernetes.pod.name, message)
# ---------------------------------------------------------------------------------------------

def kibana_escape(value: str) -> str:
    """createEscapeValue(quoteValues=true, escapeFormulaValues=false): quote anything with a
    non-alphanumeric character, doubling the quotes."""
    return f'"{value.replace(chr(34), chr(34) * 2)}"' if re.search(r"[^a-zA-Z0-9]", value) else value


def kibana_date(ns: int, tz: ZoneInfo) -> str:  # dateFormat 'MMM D, YYYY @ HH:mm:ss.SSS'
    d = dt(ns, tz)
    return f"{d.strftime('%b')} {d.day}, {d.year} @ {d.strftime('%H:%M:%S')}.{ns // 10**6 % 1000:03d}"


def build_kibana_csv(files):
    name = "kibana-discover.csv"
    tz = ZoneInfo("Europe/Berlin")
    entries = by_time(select(files, [("gap06-littlehorse-timeonly-marker-eos-commit-timeout-task-corrupted", 1, 11),
                                     ("gap07-littlehorse-timeonly-marker-stream-task-prefix-producer-fenced", 1, 3),
                                     ("ksqldb-playground-production-error-restart", 1, 94),
                                     ("ksw18-c3-540-second-rebalance-heartbeat-revoke-kafka-layout", 1, 49)],
                             joined=True),
                      newest_first=True)  # sort: @timestamp desc
    out = [",".join(map(kibana_escape, ["@timestamp", "kubernetes.pod.name", "message"]))]
    for e in entries:
        out.append(",".join(map(kibana_escape, [kibana_date(e.cri_ns, tz), e.pod, e.text])))
    write(name, "".join(row + "\n" for row in out), rows_for(entries, first_entry_no=2))


# ---------------------------------------------------------------------------------------------
# 4. Grafana Loki: logcli (jsonl, raw) and Grafana Explore "Download logs" (txt, json)
# ---------------------------------------------------------------------------------------------

def loki_labels(pod: str) -> dict:  # Promtail helm chart kubernetes-pods job + cri stage's stream label
    c = "loki"
    return dict(sorted({"app": app_of(pod), "container": container_of(pod), "filename": pods_log_path(c, pod),
                        "instance": app_of(pod), "job": f"{namespace_of(pod)}/{app_of(pod)}",
                        "namespace": namespace_of(pod), "node_name": node_of(c, pod), "pod": pod,
                        "stream": "stdout"}.items()))


def logcli_jsonl(e: Entry, tz) -> str:
    return json_compact({"labels": loki_labels(e.pod), "line": e.text, "timestamp": rfc3339_nano(e.cri_ns, tz)},
                        go_escape, sort=True)


def build_loki_split(files):
    """Two logcli queries over overlapping time ranges (--from inclusive, --to exclusive)."""
    tz = ZoneInfo("Asia/Kolkata")  # logcli prints in the local zone of the machine that ran it
    pool = select(files, [("ksw19-c3-540-third-rebalance-eight-threads-kafka-layout", 1, 40),
                          ("nf17-nifi1140-restore-402-flowfiles-autostart", 112, 145),
                          ("nf18-nifi1140-puthdfs-error-kafka-coordinator-lost-shutdown", 1, 51)], joined=False)
    ns = lambda s: int(datetime.fromisoformat(s).timestamp()) * 10**9
    parts = {"loki-logcli-part1.jsonl": (ns("2024-05-30T13:10:00+00:00"), ns("2024-06-20T23:05:15+00:00")),
             "loki-logcli-part2.jsonl": (ns("2024-06-20T22:55:25+00:00"), ns("2024-06-20T23:10:00+00:00"))}
    seen: dict[tuple, str] = {}
    for name, (start, end) in parts.items():
        entries = by_time([e for e in pool if start <= e.cri_ns < end], newest_first=True)  # --direction=backward
        write(name, "".join(logcli_jsonl(e, tz) + "\n" for e in entries), rows_for(entries, duplicates=seen))
        for i, e in enumerate(entries, 1):
            seen.setdefault(e.key, f"{name}:{i}")


def build_loki_raw(files):
    name = "loki-logcli-raw-orders-agg-5.txt"
    entries = by_time(select(files, [("ks23-kafka7921-jira-quote-kafka-layout", 2, 65)], joined=False), newest_first=True)
    write(name, "".join(e.text + "\n" for e in entries), rows_for(entries))


def build_grafana_explore(files):
    entries = by_time(select(files, [("gap06-littlehorse-timeonly-marker-eos-commit-timeout-task-corrupted", 1, 11),
                                     ("gap07-littlehorse-timeonly-marker-stream-task-prefix-producer-fenced", 1, 3),
                                     ("ks303-littlehorse-timeonly-ansi-standby-restore", 1, 6)], joined=False),
                      newest_first=True)  # Explore's default "Newest first"
    labels = loki_labels(entries[0].pod)
    common = {k: v for k, v in labels.items() if all(loki_labels(e.pod).get(k) == v for e in entries)}
    total_bytes = sum(len(e.text.encode()) for e in entries)
    meta = [("Common labels", json.dumps(common, separators=(",", ":"), ensure_ascii=False)),
            ("Line limit", json.dumps(f"1000 ({len(entries)} returned)")),
            ("Total bytes processed", json.dumps(f"{total_bytes / 1000:.2f}  kB"))]
    head = "".join(f"{k}: {v}\n" for k, v in meta) + "\n\n"
    body = "".join(f"{e.cri_ns // 10**6}\t{iso_ms_z(e.cri_ns)}\t{e.text}\n" for e in entries)
    first_line = head.count("\n") + 1
    write("grafana-explore-logs.txt", head + body,
          rows_for(entries, first_entry_no=first_line, step_rows=lambda e: e.text.count("\n") + 1))
    js = lambda s: _escape(s)  # JSON.stringify
    doc = [{"line": e.text, "timestamp": str(e.cri_ns), "date": iso_ms_z(e.cri_ns), "fields": loki_labels(e.pod)}
           for e in entries]
    write("grafana-explore-logs.json", json_compact(doc, js), rows_for(entries))


# ---------------------------------------------------------------------------------------------
# 5. AWS CloudWatch Logs: Container Insights Fluent Bit -> filter-log-events, get-log-events,
#    Logs Insights CSV
# ---------------------------------------------------------------------------------------------

ACCOUNT, EKS_CLUSTER = "418273645091", "orders-prod"
LOG_GROUP = f"/aws/containerinsights/{EKS_CLUSTER}/application"


def cw_stream(pod: str) -> str:  # log_stream_prefix ${HOST_NAME}- + tag application.var.log.containers.<file>
    return f"{node_of('eks', pod)}-application" + containers_log_path("eks", pod).replace("/", ".")


def cw_message(e: Entry) -> str:
    return json_compact(fluentbit_record(e, "eks", labels=False), fluentbit_escape)


def cw_ingestion_ms(e: Entry) -> int:
    """Fluent Bit flushes every 5 s: a stream's events of one flush share the PutLogEvents call."""
    flush = e.cri_ns // 5_000_000_000 + 1
    return flush * 5000 + 40 + h(e.pod, flush, "ingest") % 700


def cw_event_id(e: Entry) -> str:
    return str(h(e.key, "eventid"))[:56].rjust(56, "3")


def aws_cli_json(doc: dict) -> str:  # awscli JSONFormatter: json.dump(indent=4, ensure_ascii=False) + "\n"
    return json.dumps(doc, indent=4, ensure_ascii=False) + "\n"


def build_cloudwatch_filter(files):
    name = "cloudwatch-filter-log-events.json"
    entries = by_time(select(files, [("ks301-scs-kstreams-binder-sb3-shutdown-client", 2, 45),
                                     ("nf13-nifi230-restore-autostart-consumer-config", 1, 30)], joined=False),
                      newest_first=False, key=lambda e: (epoch_ms(e.cri_ns), cw_ingestion_ms(e), e.cri_ns))
    events = [{"logStreamName": cw_stream(e.pod), "timestamp": epoch_ms(e.cri_ns), "message": cw_message(e),
               "ingestionTime": cw_ingestion_ms(e), "eventId": cw_event_id(e)} for e in entries]
    write(name, aws_cli_json({"events": events, "searchedLogStreams": []}), rows_for(entries))


def build_cloudwatch_get(files):
    name = "cloudwatch-get-log-events.json"
    entries = by_time(select(files, [("ks23-kafka7921-jira-quote-kafka-layout", 2, 40)], joined=False),
                      newest_first=False)
    events = [{"timestamp": epoch_ms(e.cri_ns), "message": cw_message(e), "ingestionTime": cw_ingestion_ms(e)}
              for e in entries]
    token = lambda p, e: f"{p}/{str(h(e.key, p, 'token'))[:56].rjust(56, '3')}"
    doc = {"events": events, "nextForwardToken": token("f", entries[-1]), "nextBackwardToken": token("b", entries[0])}
    write(name, aws_cli_json(doc), rows_for(entries))


def csv_minimal(rows: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def build_cloudwatch_insights(files):
    name = "cloudwatch-insights.csv"
    entries = by_time(select(files, [("ks308-kafka-layout-thread-ttd-windows-crlf-checkpoint-denied", 1, 30),
                                     ("nf18-nifi1140-puthdfs-error-kafka-coordinator-lost-shutdown", 39, 51)],
                             joined=False),
                      newest_first=True)  # sort @timestamp desc
    rows = [["@timestamp", "@message", "@logStream", "@log"]]
    for e in entries:
        ms = epoch_ms(e.cri_ns)
        stamp = dt(e.cri_ns).strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"
        rows.append([stamp, cw_message(e), cw_stream(e.pod), f"{ACCOUNT}:{LOG_GROUP}"])
    write(name, csv_minimal(rows), rows_for(entries, first_entry_no=2))


# ---------------------------------------------------------------------------------------------
# 6. Google Cloud Logging: GKE container logs read with gcloud logging read --format=json
# ---------------------------------------------------------------------------------------------

PROJECT = "acme-orders-prod"


def gke_entry(e: Entry) -> dict:
    pod = e.pod
    labels = {"compute.googleapis.com/resource_name": node_of("gke", pod)}
    labels.update({f"k8s-pod/{k.replace('.', '_')}": v for k, v in pod_labels(pod).items()})
    return {
        "insertId": rid(LOWER_ALNUM, 16, e.key, "insert"),
        "labels": labels,
        "logName": f"projects/{PROJECT}/logs/stdout",
        "receiveTimestamp": proto_timestamp(e.cri_ns + 700_000_000 + h(e.key, "recv") % 3_800_000_000),
        "resource": {"labels": {"cluster_name": "prod-eu1", "container_name": container_of(pod),
                                "location": "europe-west1", "namespace_name": namespace_of(pod),
                                "pod_name": pod, "project_id": PROJECT},
                     "type": "k8s_container"},
        "severity": "INFO",
        "textPayload": e.text,
        "timestamp": proto_timestamp(e.cri_ns),
    }


def gcloud_json(records: list[dict]) -> str:
    """googlecloudsdk JsonPrinter: '[', each record json.dumps(indent=2, sort_keys) indented by 2, ']'."""
    out, delim = [], "[\n"
    for r in records:
        text = json.dumps(r, ensure_ascii=False, indent=2, separators=(",", ": "), sort_keys=True)
        d = delim + "  "
        for line in text.split("\n"):
            out.append(d + line)
            d = "\n  "
        delim = ",\n"
    return "".join(out) + "\n]\n" if records else "[]\n"


def build_gcloud(files):
    name = "gcloud-logging-read.json"
    entries = by_time(select(files, [("ksqldb-playground-production-error-restart", 95, 125),
                                     ("nf14-nifi230-consumekafka-group-join", 28, 45)], joined=False),
                      newest_first=True)  # gcloud logging read --order=desc (default)
    write(name, gcloud_json([gke_entry(e) for e in entries]), rows_for(entries))


# ---------------------------------------------------------------------------------------------
# 7. Splunk: Universal Forwarder on the hosts; REST export (output_mode=json) and Web CSV export
# ---------------------------------------------------------------------------------------------

SPLUNK_TZ = ZoneInfo("America/New_York")  # the searching user's time zone preference
SPLUNK_SOURCE = {"orders-agg": ("/var/log/orders-agg/orders-agg.log", "kafka:streams"),
                 "nifi": ("/opt/nifi/nifi-current/logs/nifi-app.log", "nifi:app")}


def splunk_time_ns(e: Entry) -> int:
    """_time is the timestamp Splunk extracted from the event's first line (milliseconds)."""
    return e.printed_ns


def splunk_lines(e: Entry) -> list[str]:
    """LINE_BREAKER ([\\r\\n]+) swallows empty lines; SHOULD_LINEMERGE joins the rest with \\n."""
    return [line.text for line in e.lines if line.text != ""]


def splunk_result(e: Entry, serial: int) -> dict:
    source, sourcetype = SPLUNK_SOURCE[app_of(e.pod)]
    t = splunk_time_ns(e)
    d = dt(t, SPLUNK_TZ)
    off = d.strftime("%z")
    indextime = (e.cri_ns + 1_500_000_000 + h(e.key, "idx") % 4_500_000_000) // 10**9
    bucket = 40 + h(e.pod, "bucket") % 30
    return dict(sorted({
        "_bkt": f"main~{bucket}~{uuid('splunk', 'bucket').upper()}",
        "_cd": f"{bucket}:{h(e.key, 'cd') % 9_000_000 + 100_000}",
        "_indextime": str(indextime),
        "_raw": "\n".join(splunk_lines(e)),
        "_serial": str(serial),
        "_si": ["splunk-idx-01", "main"],
        "_sourcetype": sourcetype,
        "_subsecond": f".{t // 10**6 % 1000:03d}",
        "_time": d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t // 10**6 % 1000:03d}{off[:3]}:{off[3:]}",
        "host": e.pod,
        "index": "main",
        "linecount": str(len(splunk_lines(e))),
        "source": source,
        "sourcetype": sourcetype,
        "splunk_server": "splunk-idx-01",
    }.items()))


def build_splunk_export(files):
    name = "splunk-export.json"
    entries = by_time(select(files, [("ksw11-c3-540-eight-threads-assign-revoke-kafka-layout", 1, 90),
                                     ("nf18-nifi1140-puthdfs-error-kafka-coordinator-lost-shutdown", 1, 51)],
                             joined=True),
                      newest_first=True, key=lambda e: (splunk_time_ns(e), e.cri_ns))  # events come newest first
    lines = []
    for i, e in enumerate(entries):
        head = {"preview": False, "offset": i}
        if i == len(entries) - 1:
            head["lastrow"] = True
        lines.append(json_compact({**head, "result": splunk_result(e, i)}))
    write(name, "".join(line + "\n" for line in lines), rows_for(entries))


def splunk_csv_value(v: str) -> str:
    return f'"{v.replace(chr(34), chr(34) * 2)}"' if re.search(r"[^A-Za-z0-9]", v) else v


def build_splunk_csv(files):
    name = "splunk-export.csv"
    entries = by_time(select(files, [("ks301-scs-kstreams-binder-sb3-shutdown-client", 2, 45),
                                     ("ks309-kafka-layout-thread-ttd-close-cleanup", 51, 99)], joined=True),
                      newest_first=True, key=lambda e: (splunk_time_ns(e), e.cri_ns))
    header = ["_serial", "_time", "source", "sourcetype", "host", "index", "splunk_server", "_raw"]
    out = [",".join(map(splunk_csv_value, header))]
    for i, e in enumerate(entries):
        r = splunk_result(e, i)
        t = dt(splunk_time_ns(e), SPLUNK_TZ)
        r["_time"] = t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{splunk_time_ns(e) // 10**6 % 1000:03d}" + t.strftime("%z")
        out.append(",".join(splunk_csv_value(r[k]) for k in header))
    write(name, "".join(row + "\n" for row in out), rows_for(entries, first_entry_no=2))


# ---------------------------------------------------------------------------------------------
# 8. Datadog Log Explorer "Download as CSV" (Agent tailing the log files on the hosts)
# ---------------------------------------------------------------------------------------------

def build_datadog_csv(files):
    name = "datadog-log-explorer.csv"
    entries = select(files, [("ksqldb-playground-production-error-restart", 95, 125),
                             ("nf13-nifi230-restore-autostart-consumer-config", 1, 21)], joined=False)
    # the Agent stamps a log when it reads it from the file (no date remapper for these services):
    # it reads what was appended since its last pass, a few hundred ms apart
    collected = {}
    for e in entries:
        tick = e.cri_ns // 300_000_000 + 1
        collected[e.key] = tick * 300_000_000 + 2_000_000 + h(e.pod, tick, "dd") % 60_000_000
    entries = by_time(entries, newest_first=True, key=lambda e: (collected[e.key], e.cri_ns))
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(["Date", "Host", "Service", "Content"])
    for e in entries:
        w.writerow([iso_ms_z(collected[e.key]), e.pod, app_of(e.pod), e.text])
    write(name, buf.getvalue(), rows_for(entries, first_entry_no=2))


def main() -> None:
    files = load_corpus()
    assign_container_times(files)
    for build in (build_es_filebeat_search, build_es_fluentbit_search, build_es_filebeat_ndjson, build_kibana_csv,
                  build_loki_split, build_loki_raw, build_grafana_explore, build_cloudwatch_filter,
                  build_cloudwatch_get, build_cloudwatch_insights, build_gcloud, build_splunk_export,
                  build_splunk_csv, build_datadog_csv):
        build(files)


if __name__ == "__main__":
    main()
