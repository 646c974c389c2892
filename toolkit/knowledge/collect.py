"""The evidence-collection guide: what to collect after an incident and what to log next time.

``stream-incident collect-guide [--product kafka-streams|nifi] [--k8s]`` prints the guide (``--k8s`` adds
the pod sections: ``kubectl``/``stern`` for pods that still run, the log platform's export for pods that are gone);
``playbooks/collecting-evidence.md`` is the same text for both products (written by
:func:`write_playbook`, checked by a test so the two never drift).  The logger settings come
from ``loggers.toml`` and are rendered in four syntaxes by :func:`logger_snippet`, so adding a
detector's loggers never needs a second edit in prose.

Nothing here runs a command: the guide is text for a person on the affected host.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Iterable, Mapping, Sequence
from xml.sax.saxutils import escape, quoteattr

PRODUCTS = ("kafka-streams", "nifi")
PRODUCT_NAMES = {"kafka-streams": "Kafka Streams", "nifi": "NiFi"}
LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR")

#: Snippet syntaxes, with the heading the guide gives each.
SYNTAXES: dict[str, str] = {
    "log4j-properties": "log4j 1.x / reload4j properties",
    "log4j2-yaml": "log4j2 YAML",
    "log4j2-xml": "log4j2 XML",
    "logback-xml": "logback XML",
}

#: Where the generated playbook lives, relative to the repository root.
PLAYBOOK_PATH = Path("playbooks") / "collecting-evidence.md"


@dataclass(frozen=True)
class LoggerSpec:
    """One logger to set: its full name, the level, and which lines that level brings back."""

    name: str
    level: str
    why: str = ""

    @property
    def short_name(self) -> str:
        """The class name for a class logger (``ProcessorStateManager``), else the full package name."""
        last = self.name.rsplit(".", 1)[-1]
        return last if last[:1].isupper() else self.name


@dataclass(frozen=True)
class DetectorLogging:
    """What one detector needs logged, and the other evidence steps it points to."""

    detector: str
    product: str
    loggers: tuple[LoggerSpec, ...]
    evidence: tuple[str, ...]


@lru_cache(maxsize=1)
def _logging_data() -> tuple[tuple[DetectorLogging, ...], dict[str, str]]:
    text = resources.files("toolkit.knowledge").joinpath("loggers.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    pointers = {key: str(value["pointer"]) for key, value in data.get("evidence", {}).items()}
    rows = []
    for row in data.get("detector", []):
        where = f"loggers.toml, {row.get('id')}"
        if row.get("product") not in PRODUCTS:
            raise ValueError(f"{where}: unknown product {row.get('product')!r}")
        loggers = []
        for item in row.get("loggers", []):
            level = str(item["level"]).upper()
            if level not in LEVELS:
                raise ValueError(f"{where}: unknown level {item['level']!r}")
            loggers.append(LoggerSpec(name=item["name"], level=level, why=item.get("why", "")))
        for step in row.get("evidence", []):
            if step not in pointers:
                raise ValueError(f"{where}: evidence step {step!r} has no [evidence.{step}] entry")
        rows.append(DetectorLogging(detector=row["id"], product=row["product"], loggers=tuple(loggers),
                                    evidence=tuple(row.get("evidence", []))))
    return tuple(rows), pointers


def detector_logging() -> tuple[DetectorLogging, ...]:
    """Every detector's logging needs, in file order."""
    return _logging_data()[0]


def known_detector_ids() -> list[str]:
    """The detector ids ``loggers.toml`` knows about."""
    return [d.detector for d in detector_logging()]


def _detector(detector_id: str) -> DetectorLogging:
    for row in detector_logging():
        if row.detector == detector_id:
            return row
    raise KeyError(f"no logging entry for detector {detector_id!r}; known: {', '.join(known_detector_ids())}")


def loggers_for(detector_id: str) -> tuple[LoggerSpec, ...]:
    """The loggers ``detector_id`` needs (``KeyError`` for an id not in ``loggers.toml``)."""
    return _detector(detector_id).loggers


def merged_loggers(product: str | None = None) -> list[LoggerSpec]:
    """All loggers of a product's detectors, one per name, at the most verbose level asked for.

    A logger one detector asks for keeps that detector's reason; a logger several ask for says
    which detectors need it (their reasons are in the per-detector section of the guide).
    """
    levels: dict[str, str] = {}
    users: dict[str, list[DetectorLogging]] = {}
    reasons: dict[str, str] = {}
    for row in detector_logging():
        if product and row.product != product:
            continue
        for spec in row.loggers:
            levels[spec.name] = min(levels.get(spec.name, spec.level), spec.level, key=LEVELS.index)
            users.setdefault(spec.name, []).append(row)
            reasons.setdefault(spec.name, spec.why)
    merged = []
    for name, level in levels.items():
        rows = users[name]
        why = reasons[name] if len(rows) == 1 else "for " + ", ".join(r.detector for r in rows)
        merged.append(LoggerSpec(name, level, why))
    return merged


# --- snippets --------------------------------------------------------------------------------


def _as_spec(item: LoggerSpec | Mapping[str, str]) -> LoggerSpec:
    if isinstance(item, LoggerSpec):
        return item
    return LoggerSpec(name=item["name"], level=str(item["level"]).upper(), why=item.get("why", ""))


def _xml_comment(text: str) -> str:
    # "--" is not allowed inside an XML comment; a reason quoting a range would break the file.
    return text.replace("--", "\u2013").rstrip("-")


def _yaml_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def logger_snippet(loggers: Iterable[LoggerSpec | Mapping[str, str]], syntax: str, *, comments: bool = True) -> str:
    """Render logger settings as a configuration fragment that parses on its own.

    ``syntax`` is one of :data:`SYNTAXES`:

    * ``log4j-properties`` — ``log4j.logger.<name>=<LEVEL>`` lines (Kafka ≤3.9 ``config/log4j.properties``);
    * ``log4j2-yaml`` — ``Configuration: Loggers: Logger: [...]`` (Kafka 4.x ``config/log4j2.yaml``);
    * ``log4j2-xml`` — ``<Configuration><Loggers><Logger name=.. level=../>``;
    * ``logback-xml`` — ``<configuration><logger name=.. level=../>`` (NiFi ``conf/logback.xml``).

    Merge the inner lines into the existing file rather than replacing it.  ``comments`` adds
    each logger's reason as a comment.
    """
    specs = [_as_spec(item) for item in loggers]
    for spec in specs:
        if spec.level not in LEVELS:
            raise ValueError(f"unknown level {spec.level!r} for {spec.name}")
    if syntax == "log4j-properties":
        lines = []
        for spec in specs:
            if comments and spec.why:
                lines.append(f"# {spec.why}")
            lines.append(f"log4j.logger.{spec.name}={spec.level}")
        return "\n".join(lines) + "\n"
    if syntax == "log4j2-yaml":
        lines = ["Configuration:", "  Loggers:", "    Logger:"]
        for spec in specs:
            if comments and spec.why:
                lines.append(f"      # {spec.why}")
            lines.append(f"      - name: {_yaml_quote(spec.name)}")
            lines.append(f"        level: {spec.level}")
        return "\n".join(lines) + "\n"
    if syntax == "log4j2-xml":
        lines = ["<Configuration>", "  <Loggers>"]
        for spec in specs:
            if comments and spec.why:
                lines.append(f"    <!-- {escape(_xml_comment(spec.why))} -->")
            lines.append(f"    <Logger name={quoteattr(spec.name)} level={quoteattr(spec.level)}/>")
        lines += ["  </Loggers>", "</Configuration>"]
        return "\n".join(lines) + "\n"
    if syntax == "logback-xml":
        lines = ['<configuration scan="true" scanPeriod="30 seconds">']
        for spec in specs:
            if comments and spec.why:
                lines.append(f"  <!-- {escape(_xml_comment(spec.why))} -->")
            lines.append(f"  <logger name={quoteattr(spec.name)} level={quoteattr(spec.level)}/>")
        lines.append("</configuration>")
        return "\n".join(lines) + "\n"
    raise ValueError(f"unknown snippet syntax {syntax!r}; use one of {', '.join(SYNTAXES)}")


def _syntaxes_for(product: str) -> list[str]:
    # NiFi ships logback only; Kafka Streams runs inside whatever the application ships.
    return ["logback-xml"] if product == "nifi" else list(SYNTAXES)


# --- missing-evidence pointers ----------------------------------------------------------------


def _join_names(names: list[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


@dataclass(frozen=True)
class LoggingStep:
    """One pointer of a detector's missing evidence that asks for loggers at a level."""

    #: the loggers as the pointer names them (:attr:`LoggerSpec.short_name`: a class name, or a package)
    names: tuple[str, ...]
    level: str
    text: str


def logging_steps(detector_id: str) -> list[LoggingStep]:
    """One step per log level ``detector_id``'s loggers need (``Raise ProcessorStateManager and StateDirectory
    to DEBUG (see collect-guide §logging)``). ``KeyError`` for a detector id that ``loggers.toml`` does not list."""
    row = _detector(detector_id)
    steps = []
    for level in LEVELS:
        names = [spec.short_name for spec in row.loggers if spec.level == level]
        if not names:
            continue
        # INFO is already the default for Kafka loggers, but not for NiFi processors (WARN).
        verb = "Raise" if level in ("TRACE", "DEBUG") or row.product == "nifi" else "Keep"
        where = "at" if verb == "Keep" else "to"
        file_hint = " in conf/logback.xml" if row.product == "nifi" else ""
        steps.append(LoggingStep(tuple(names), level,
                                 f"{verb} {_join_names(names)} {where} {level}{file_hint} (see collect-guide §logging)"))
    return steps


def evidence_pointer(key: str) -> str:
    """The text of one evidence step of ``loggers.toml`` (``[evidence.KEY] pointer``); ``KeyError`` if unknown."""
    return _logging_data()[1][key]


def missing_evidence_steps(detector_id: str) -> list[str]:
    """Short pointers a finding of ``detector_id`` can put in its ``missing_evidence``.

    First one line per log level to raise (:func:`logging_steps`), then the other evidence steps.
    ``KeyError`` for a detector id that ``loggers.toml`` does not list.
    """
    row = _detector(detector_id)
    pointers = _logging_data()[1]
    return [step.text for step in logging_steps(detector_id)] + [pointers[step] for step in row.evidence]


# --- the guide -----------------------------------------------------------------------------------


def _fence(body: str, lang: str = "sh") -> str:
    return f"```{lang}\n{body.rstrip()}\n```\n"


def _intro(product: str | None, k8s: bool) -> str:
    scope = PRODUCT_NAMES[product] if product else "Kafka Streams and NiFi"
    return (
        f"# Collecting evidence for a state or checkpoint incident ({scope})\n\n"
        "Collect **before** restarting, redeploying or cleaning anything, from **every** host or pod of the\n"
        "application (not only the one that failed), for the same time window. Keep timestamps on every\n"
        "log line and keep file modification times (copy with `tar`, not with tools that reset them).\n"
        "Put each host's files in a folder named after the host; a `bundle.toml` at the top can give\n"
        "each host's time zone and clock offset.\n\n"
        f"Sections: {', '.join(_section_names(product, k8s))}.\n"
    )


def _section_names(product: str | None, k8s: bool) -> list[str]:
    names = ["§logs (the logs you already have)"]
    if k8s:
        names += ["§kubernetes (pods)", "§log-platform (pods that are gone)"]
    if product in (None, "kafka-streams"):
        names.append("§state (state-directory captures)")
    if product in (None, "nifi"):
        names += ["§dynamodb and §cloudtrail (ConsumeKinesis checkpoints)", "§nifi (NiFi's own records)"]
    return names + ["§logging (what to log next time)", "§per-detector (what each finding needs)"]


def _logs_section(product: str | None) -> str:
    nifi_logs = product in (None, "nifi")
    kafka_logs = product in (None, "kafka-streams")
    out = ["## §logs — the logs you already have\n"]
    out.append("**systemd services.** Export the unit's journal with ISO timestamps (add `-precise` for\n"
               "microseconds); widen `--since`/`--until` to cover the hours before the incident:\n")
    out.append(_fence('journalctl -u <unit> -o short-iso --since "2026-01-01 00:00" --until "2026-01-02 00:00" '
                      '> journal-<unit>-$(hostname).log\n'
                      'journalctl -u <unit> -o short-iso-precise --since "-6h" > journal-<unit>-$(hostname).log'))
    out.append("**Docker.** `-t` prefixes each line with the daemon's receive time; `2>&1` keeps stderr,\n"
               "where many images send their logs:\n")
    out.append(_fence("docker logs -t <container> > docker-<container>.log 2>&1"))
    out.append("**Log files, including rotated ones.** Copy the whole log folder with `tar` so rotated and\n"
               "compressed files (`*.log.1`, `*.gz`, dated names) come along with their modification times:\n")
    examples = []
    if kafka_logs:
        examples.append("tar -czf logs-$(hostname).tar.gz -C /var/log my-streams-app    # the application's log folder")
    if nifi_logs:
        examples.append("tar -czf nifi-logs-$(hostname).tar.gz -C /opt/nifi logs        # nifi-app*.log, nifi-bootstrap*.log, nifi-request*.log")
    out.append(_fence("\n".join(examples)))
    if kafka_logs:
        out.append("Kafka Streams logs its configuration once per start (`StreamsConfig values:`; from 4.0 under the\n"
                   "`AbstractConfig` logger) and its version (`Kafka Streams version:`, 2.4+; `Kafka version:`).\n"
                   "Keep the log from the **start** of each process, not only the last hour: those lines give\n"
                   "`processing.guarantee`, `state.dir`, `num.standby.replicas` and the version.\n")
    return "\n".join(out)


def _kubernetes_section(product: str | None) -> str:
    out = ["## §kubernetes — pods\n"]
    out.append("The current container and, after a crash or OOM kill, the **previous** one (its last lines are\n"
               "the only record of how it stopped):\n")
    out.append(_fence(
        "kubectl -n <ns> logs <pod> -c <container> --timestamps > <pod>.log\n"
        "kubectl -n <ns> logs <pod> -c <container> --previous --timestamps > <pod>.previous.log"))
    out.append("All pods of the application at once: `--prefix` tags each line with its pod and container;\n"
               "with a label selector kubectl keeps only the last 10 lines per pod unless you pass `--tail=-1`:\n")
    out.append(_fence(
        "kubectl -n <ns> logs -l app=<label> --all-containers --timestamps --prefix --tail=-1 \\\n"
        "  --max-log-requests 20 > all-pods.log\n"
        "# or with stern (one stream, pod name on each line):\n"
        "stern -n <ns> '<pod-prefix>.*' --timestamps --since 24h --no-follow > all-pods.stern.log"))
    out.append("Why pods restarted (exit code 137 / `OOMKilled` means the process was killed, not closed):\n")
    out.append(_fence(
        "kubectl -n <ns> describe pod <pod> > <pod>.describe.txt\n"
        "kubectl -n <ns> get events --sort-by=.lastTimestamp -o wide > events.txt"))
    if product in (None, "kafka-streams"):
        out.append("State capture inside a pod (the image needs `python3`, and `tar` for `kubectl cp`; otherwise use\n"
                   "the shell-only capture from `playbooks/capturing-state.md` through `kubectl exec ... sh -c`):\n")
        out.append(_fence(
            "kubectl -n <ns> cp capture.py <pod>:/tmp/capture.py -c <container>\n"
            "kubectl -n <ns> exec <pod> -c <container> -- python3 /tmp/capture.py /var/lib/kafka-streams "
            "--out /tmp/state-<pod>.tar.gz\n"
            "kubectl -n <ns> cp <pod>:/tmp/state-<pod>.tar.gz ./state-<pod>.tar.gz -c <container>"))
    return "\n".join(out)


#: The log platforms of §log-platform, in the order the guide gives them (each a ``### `` heading).
LOG_PLATFORMS: dict[str, str] = {
    "elasticsearch": "Elasticsearch / OpenSearch (Kibana, OpenSearch Dashboards)",
    "loki": "Grafana Loki",
    "cloudwatch": "AWS CloudWatch Logs",
    "gcloud": "Google Cloud Logging",
    "splunk": "Splunk",
    "datadog": "Datadog",
}

#: The window every example of §log-platform uses: from before the last clean start to after the crash.
_FROM, _TO = "2026-03-07T08:00:00Z", "2026-03-07T12:00:00Z"


def _start_marker(product: str | None) -> str:
    markers = {"kafka-streams": "`StreamsConfig values:`", "nifi": "`NiFi has started`"}
    if product:
        return markers[product]
    return " or ".join(markers.values())


def _log_platform_section(product: str | None) -> str:
    out = ["## §log-platform — pods that are gone: their logs from the log platform\n"]
    out.append(
        "`kubectl logs` reads only pods that still exist, and `--previous` only their last restart. A pod that was\n"
        "deleted, evicted or rescheduled is left only in the log platform the cluster ships to: export its lines\n"
        "from there and put the files in the bundle (at the top, or in any folder). Each export is recognised by\n"
        "its content, whatever its name, and each line goes to the pod the platform's labels name.\n")
    out.append(
        "**What to export.** Every pod of the application, not only the one that failed, over one time range on\n"
        f"every platform: from **before the last clean start** of each pod (its {_start_marker(product)} line)\n"
        "to **after the crash** (a few minutes past the last restart). Keep three things per line: the **raw\n"
        "message** as the application printed it, the platform's **timestamp**, and the **label that names the\n"
        "pod**. Files may be newest first, split by time and overlap: a line found twice is read once. The\n"
        f"examples take the window `{_FROM}` to `{_TO}`: put yours in its place, in UTC (`Z`).\n")

    out.append(f"### {LOG_PLATFORMS['elasticsearch']}\n")
    out.append(
        "Pod label: `kubernetes.pod.name` (Filebeat, Elastic Agent), `kubernetes.pod_name` (Fluent Bit, Fluentd),\n"
        "else `host.name`/`host`; message: `message` (Filebeat, Logstash) or `log` (Fluent Bit). A `_search` response\n"
        "keeps them; `size` stops at 10,000 hits (`index.max_result_window`): split the window, or page on with\n"
        "`\"search_after\": [<sort value of the last hit>]` into further files:\n")
    out.append(_fence(
        "curl -s -u \"$ES_USER\" -H 'Content-Type: application/json' \\\n"
        "  'https://<es-host>:9200/<index-pattern>/_search' -d '{\n"
        '  "size": 10000,\n'
        '  "sort": [{"@timestamp": "asc"}],\n'
        '  "_source": ["@timestamp", "message", "log", "kubernetes.pod.name", "kubernetes.pod_name", "host.name"],\n'
        '  "query": {"bool": {"filter": [\n'
        f'    {{"range": {{"@timestamp": {{"gte": "{_FROM}", "lte": "{_TO}"}}}}}},\n'
        '    {"term": {"kubernetes.namespace": "<ns>"}},\n'
        '    {"prefix": {"kubernetes.pod.name": "<pod-prefix>"}}]}}}\' > es-<pod-prefix>.json\n'
        "# a large result as one hit per line (NDJSON, read as a stream):\n"
        "jq -c '.hits.hits[]' es-<pod-prefix>.json > es-<pod-prefix>.ndjson"))
    out.append(
        "Under Fluent Bit's names filter on `kubernetes.namespace_name` and `kubernetes.pod_name` (`.keyword` with\n"
        "dynamic mappings). **Kibana / OpenSearch Dashboards Discover:** set the absolute time range, query\n"
        "`kubernetes.namespace : \"<ns>\" and kubernetes.pod.name : <pod-prefix>*`, add the columns `message` (or\n"
        "`log`) and `kubernetes.pod.name`, then Kibana **Share → Export → CSV** (older: *CSV Reports → Generate\n"
        "CSV*; the file is in *Stack Management → Reporting*), OpenSearch Dashboards **Reporting → Download CSV**\n"
        "(10,000 rows by default). Kibana writes `@timestamp` in the browser's zone (advanced setting\n"
        "`dateFormat:tz`) without naming it; it fills in only for lines without their own stamp, read in the host's\n"
        "zone from `bundle.toml`.\n")

    out.append(f"### {LOG_PLATFORMS['loki']}\n")
    out.append(
        "Pod label: `pod` (Promtail, Grafana Alloy), `pod_name` (Fluent Bit's Loki output), `k8s_pod_name` (OTLP),\n"
        "else `instance` or `host`; `logcli series '{namespace=\"<ns>\"}' --analyze-labels --from=... --to=...` shows\n"
        "which your streams carry. `--output=jsonl` keeps the labels, the line and Loki's timestamp; `--forward`\n"
        "reads oldest first; `--limit` defaults to 30 lines (`--limit=0` is all, in `--batch` sized requests):\n")
    out.append(_fence(
        "logcli query '{namespace=\"<ns>\", pod=~\"<pod-prefix>.*\"}' \\\n"
        f"  --from=\"{_FROM}\" --to=\"{_TO}\" --timezone=UTC \\\n"
        "  --forward --limit=0 --batch=5000 --output=jsonl --quiet > loki-<pod-prefix>.jsonl\n"
        "# --output=raw keeps only the lines: one query per pod, the file named after the pod\n"
        "logcli query '{namespace=\"<ns>\", pod=\"<pod>\"}' \\\n"
        f"  --from=\"{_FROM}\" --to=\"{_TO}\" --forward --limit=0 --output=raw --quiet > <pod>.log"))
    out.append(
        "Without `logcli`, **Grafana Explore**: the same query over the absolute range, the query option *Line\n"
        "limit* raised above the window's line count (1000 by default), then the logs panel's **Download → json**\n"
        "(it keeps the labels; `txt` drops them).\n")

    out.append(f"### {LOG_PLATFORMS['cloudwatch']}\n")
    out.append(
        "Container Insights' Fluent Bit writes to `/aws/containerinsights/<cluster>/application`, one stream per\n"
        "container named after the node and the container's log file; each event's message is Fluent Bit's record,\n"
        "whose `kubernetes.pod_name` names the pod (else the `logStreamName`, else the file name). The CLI reads\n"
        "every page and writes one JSON document; times are epoch **milliseconds**:\n")
    out.append(_fence(
        "aws logs filter-log-events --log-group-name /aws/containerinsights/<cluster>/application \\\n"
        f"  --start-time \"$(date -d {_FROM} +%s000)\" --end-time \"$(date -d {_TO} +%s000)\" \\\n"
        "  --filter-pattern '{ $.kubernetes.namespace_name = \"<ns>\" && $.kubernetes.pod_name = \"<pod-prefix>*\" }' \\\n"
        "  --output json > cloudwatch-<pod-prefix>.json\n"
        "# only some streams: add --log-stream-names <stream> ..."))
    out.append(
        "`aws logs get-log-events` (one stream) is read too, but the CLI returns only its first page (1 MB or\n"
        "10,000 events; `--next-token` for the next), and its events carry no stream name: name the file after\n"
        "the pod. **Logs Insights** (console): run the query below over the window, then **Export results →\n"
        "Download table (CSV)**. A query returns at most 10,000 rows: split the window if it is reached.\n")
    out.append(_fence(
        "fields @timestamp, @message, @logStream, kubernetes.pod_name\n"
        "| filter kubernetes.namespace_name = \"<ns>\" and kubernetes.pod_name like /^<pod-prefix>/\n"
        "| sort @timestamp asc\n"
        "| limit 10000", "text"))

    out.append(f"### {LOG_PLATFORMS['gcloud']}\n")
    out.append(
        "GKE container logs (`resource.type=\"k8s_container\"`) name the pod in `resource.labels.pod_name`; the\n"
        "line is `textPayload`, or `jsonPayload.message` for JSON lines. Bound the window in the filter: without\n"
        "`timestamp` bounds `gcloud logging read` returns only what `--freshness` allows (1 day by default), newest\n"
        "first, and a pod gone for longer needs `--freshness=7d`:\n")
    out.append(_fence(
        "gcloud logging read 'resource.type=\"k8s_container\" AND resource.labels.namespace_name=\"<ns>\"\n"
        "  AND resource.labels.pod_name:\"<pod-prefix>\"\n"
        f"  AND timestamp>=\"{_FROM}\" AND timestamp<=\"{_TO}\"' \\\n"
        "  --project=<project> --order=asc --format=json > gcloud-<pod-prefix>.json\n"
        "# or without timestamp bounds: newest first (--order=desc, the default) and --freshness=7d\n"
        "# a large result as one entry per line (read as a stream):\n"
        "jq -c '.[]' gcloud-<pod-prefix>.json > gcloud-<pod-prefix>.jsonl"))

    out.append(f"### {LOG_PLATFORMS['splunk']}\n")
    out.append(
        "The line is `_raw`, the time `_time`; the pod is `k8s.pod.name` (Splunk OpenTelemetry Collector) or `pod`\n"
        "(Splunk Connect for Kubernetes), else `host`. The export endpoint streams one JSON result per line\n"
        "(`/services/search/jobs/export` before Splunk 9.0.1; Splunk Cloud needs the REST API enabled); times are\n"
        "epoch seconds:\n")
    out.append(_fence(
        "curl -sk -u \"$SPLUNK_USER\" https://<splunk-host>:8089/services/search/v2/jobs/export \\\n"
        "  --data-urlencode 'search=search index=<index> (k8s.pod.name=\"<pod-prefix>*\" OR pod=\"<pod-prefix>*\")\n"
        "    | fields _time host source k8s.pod.name pod _raw' \\\n"
        f"  -d earliest_time=\"$(date -d {_FROM} +%s)\" -d latest_time=\"$(date -d {_TO} +%s)\" \\\n"
        "  -d output_mode=json > splunk-<pod-prefix>.json"))
    out.append(
        "In Splunk Web: the same search ending in `| table _time host k8s.pod.name pod _raw`, then **Export → CSV**\n"
        "with *Number of results* unlimited.\n")

    out.append(f"### {LOG_PLATFORMS['datadog']}\n")
    out.append(
        "In the **Log Explorer**: the query `kube_namespace:<ns> pod_name:<pod-prefix>*` over the absolute window,\n"
        "the columns *Date*, *Host*, the message (*Content*) and `pod_name` (a log's tag → *Add column*), then\n"
        "**Download as CSV** with a row count that covers the window (split the window if the cap is reached). On\n"
        "Kubernetes *Host* is the node, not the pod: keep the `pod_name` column.\n")
    return "\n".join(out)


def _state_section() -> str:
    out = ["## §state — Kafka Streams state directory\n"]
    out.append("Logs rarely date a `.checkpoint` write (those lines are DEBUG); the files and their modification\n"
               "times are the evidence. Capture `state.dir` on every host **before** a restart, and under\n"
               "exactly-once a second time a few commit intervals later while the application runs: a\n"
               "`.checkpoint` whose mtime does not move during RUNNING is the KAFKA-20685 signature.\n")
    out.append(_fence(
        "stream-incident capture-state /var/lib/kafka-streams --out state-$(hostname).tar.gz\n"
        "# or, with only Python 3 on the host, copy toolkit/state/capture.py there and run\n"
        "python3 capture.py /var/lib/kafka-streams --out state-$(hostname).tar.gz"))
    out.append("The capture takes no locks and copies only small metadata files (`.checkpoint`, `*.position`,\n"
               "`kafka-streams-process-metadata`, RocksDB `OPTIONS-*`/`CURRENT`/`IDENTITY`) plus a full listing\n"
               "with nanosecond mtimes; store data is copied only with `--include-store-data`. Without Python,\n"
               "the `find -printf` + `tar` recipe in `playbooks/capturing-state.md` produces a listing the\n"
               "toolkit reads the same way.\n")
    return "\n".join(out)


def _dynamodb_section() -> str:
    out = ["## §dynamodb — ConsumeKinesis checkpoint tables\n"]
    out.append("Every ConsumeKinesis keeps its checkpoints in the DynamoDB table named by its *Application Name*\n"
               "(`<table>` below); during the 2.9 migration there is also `<table>_migration`. Dump both, keep the\n"
               "file names (a scan does not name its table) and keep error output — `ResourceNotFoundException`\n"
               "is itself evidence that a table is gone:\n")
    out.append(_fence(
        "for t in <table> <table>_migration; do\n"
        '  aws dynamodb describe-table --table-name "$t" --output json > "dynamodb-describe-$t.json" 2>&1\n'
        '  aws dynamodb scan --table-name "$t" --output json > "dynamodb-scan-$t.json" 2>&1\n'
        "done"))
    return "\n".join(out)


def _cloudtrail_section() -> str:
    out = ["## §cloudtrail — who created and deleted the tables\n"]
    out.append("`CreateTable`/`DeleteTable`/`DescribeTable` are management events, recorded by default and\n"
               "searchable for 90 days; run the lookup for the table and for the migration table, around the\n"
               "incident window:\n")
    out.append(_fence(
        "for t in <table> <table>_migration; do\n"
        "  aws cloudtrail lookup-events --lookup-attributes AttributeKey=ResourceName,AttributeValue=\"$t\" \\\n"
        '    --start-time 2026-01-01T00:00:00Z --end-time 2026-01-02T00:00:00Z --output json > "cloudtrail-$t.json"\n'
        "done"))
    out.append("Item-level calls (`PutItem`, `UpdateItem`, `Scan`) are **data events**: they are logged only if a\n"
               "trail was configured to record DynamoDB data events *before* the incident, and `lookup-events`\n"
               "never returns them. If such a trail exists, copy its files (`{\"Records\": [...]}`) for the window\n"
               "from its S3 bucket; a `PutItem` failing with `ValidationException` is the failed migration copy.\n")
    return "\n".join(out)


def _nifi_section() -> str:
    out = ["## §nifi — NiFi's own records\n"]
    out.append("Diagnostics of the running node (threads, processors, repositories; `--verbose` adds detail):\n")
    out.append(_fence("./bin/nifi.sh diagnostics --verbose diagnostics-$(hostname).txt"))
    out.append("The flow definition and its archived versions (each processor's properties and whether it was\n"
               "RUNNING); `tar` keeps the archive files' mtimes, which date each flow change:\n")
    out.append(_fence("tar -czf nifi-conf-$(hostname).tar.gz -C /opt/nifi conf/flow.json.gz conf/archive conf/logback.xml"))
    out.append("Who started, stopped or reconfigured the processor (flow history; bulletins live only 5 minutes and\n"
               "are lost on restart, so save them at once):\n")
    out.append(_fence(
        'curl -s -H "Authorization: Bearer $TOKEN" '
        '"https://<nifi-host>:8443/nifi-api/flow/history?offset=0&count=1000&sourceId=<processor-id>" > nifi-history-<processor-id>.json\n'
        'curl -s -H "Authorization: Bearer $TOKEN" '
        '"https://<nifi-host>:8443/nifi-api/flow/bulletin-board?sourceId=<processor-id>" > nifi-bulletins-<processor-id>.json'))
    out.append("Component state and the FlowFile repository as they are on disk, before the node restarts (a restart\n"
               "rewrites both write-ahead logs; content and provenance are never read, FlowFile records never copied;\n"
               "see playbooks/capturing-state.md):\n")
    out.append(_fence("stream-incident capture-state /opt/nifi/nifi-current --product nifi --out nifi-state-$(hostname).tar.gz"))
    return "\n".join(out)


def _logging_section(product: str | None) -> str:
    out = ["## §logging — what to log next time\n"]
    if product in (None, "kafka-streams"):
        out.append(
            "**Kafka Streams** logs through SLF4J into whatever backend the application ships. Kafka's own\n"
            "scripts use log4j 1.x (`config/log4j.properties`, reload4j in 3.2–3.9) and log4j2\n"
            "(`config/log4j2.yaml`) from 4.0; Spring Boot applications usually use logback. Checkpoint writes,\n"
            "lock hand-offs and restore start offsets are DEBUG or TRACE: raise the loggers below for the\n"
            "incident window, then put them back (StreamThread and TaskManager at DEBUG are chatty).\n")
        specs = merged_loggers("kafka-streams")
        out.append(_logger_table(specs))
        for syntax in _syntaxes_for("kafka-streams"):
            out.append(f"**{SYNTAXES[syntax]}**\n")
            out.append(_fence(logger_snippet(specs, syntax), _fence_lang(syntax)))
    if product in (None, "nifi"):
        out.append(
            "**NiFi** uses logback: edit `conf/logback.xml` on every node. The shipped file has\n"
            "`scan=\"true\" scanPeriod=\"30 seconds\"`, so the change applies within 30 seconds without a\n"
            "restart. The default keeps `org.apache.nifi.processors` at WARN, which hides almost everything\n"
            "ConsumeKinesis says about its checkpoint table. Add inside the existing `<configuration>`:\n")
        specs = merged_loggers("nifi")
        out.append(_logger_table(specs))
        out.append(_fence(logger_snippet(specs, "logback-xml"), "xml"))
    return "\n".join(out)


def _fence_lang(syntax: str) -> str:
    return {"log4j-properties": "properties", "log4j2-yaml": "yaml"}.get(syntax, "xml")


def _logger_table(specs: Sequence[LoggerSpec]) -> str:
    rows = ["| logger | level | what it brings back |", "| --- | --- | --- |"]
    rows += [f"| `{s.name}` | {s.level} | {s.why.replace('|', '/')} |" for s in specs]
    return "\n".join(rows) + "\n"


def _per_detector_section(product: str | None) -> str:
    from toolkit.knowledge.known_bugs import bugs_for_detector  # local: keeps the import graph one-way

    out = ["## §per-detector — what each finding needs\n"]
    out.append("Each finding lists these steps under *missing evidence* when its confidence is not `confirmed`.\n")
    for row in detector_logging():
        if product and row.product != product:
            continue
        bugs = [b.id for b in bugs_for_detector(row.detector) if b.kind == "bug"]
        related = f" — related upstream issues: {', '.join(bugs)}" if bugs else ""
        out.append(f"### `{row.detector}` ({PRODUCT_NAMES[row.product]}){related}\n")
        out.append("\n".join(f"- {step}" for step in missing_evidence_steps(row.detector)) + "\n")
        out.append(_logger_table(row.loggers))
    return "\n".join(out)


def render_guide(product: str | None, k8s: bool) -> str:
    """The collection guide as Markdown.

    ``product`` is ``kafka-streams``, ``nifi`` or ``None`` for both; ``k8s`` adds the
    ``kubectl``/``stern`` commands (§kubernetes) for applications that run in pods, and the exports of
    the log platform for pods that are gone (§log-platform, one subsection per :data:`LOG_PLATFORMS`).
    """
    if product is not None and product not in PRODUCTS:
        raise ValueError(f"unknown product {product!r}; use one of {', '.join(PRODUCTS)}")
    parts = [_intro(product, k8s), _logs_section(product)]
    if k8s:
        parts += [_kubernetes_section(product), _log_platform_section(product)]
    if product in (None, "kafka-streams"):
        parts.append(_state_section())
    if product in (None, "nifi"):
        parts += [_dynamodb_section(), _cloudtrail_section(), _nifi_section()]
    parts += [_logging_section(product), _per_detector_section(product)]
    return "\n".join(part.rstrip() + "\n" for part in parts)


PLAYBOOK_HEADER = (
    "<!-- Generated from toolkit/knowledge/ (collect.py, loggers.toml, known_bugs.toml); do not edit by hand.\n"
    "     Regenerate: python -c \"from toolkit.knowledge.collect import write_playbook; "
    "write_playbook('playbooks/collecting-evidence.md')\" -->\n"
)


def render_playbook() -> str:
    """The text of ``playbooks/collecting-evidence.md``: the guide for both products, with pods."""
    return PLAYBOOK_HEADER + "\n" + render_guide(None, k8s=True)


def write_playbook(path: str | Path) -> Path:
    """Write :func:`render_playbook` to ``path`` and return the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_playbook(), encoding="utf-8")
    return target


# --- command line -------------------------------------------------------------------------------


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The ``collect-guide`` arguments; pass a subparser to add them to a larger CLI."""
    p = parser or argparse.ArgumentParser(
        prog="stream-incident collect-guide",
        description="Print what to collect after a state/checkpoint incident and what to log next time.")
    p.add_argument("--product", choices=PRODUCTS, help="only this product (default: both)")
    p.add_argument("--k8s", action="store_true",
                   help="add the kubectl/stern commands for pods, and the log platform's exports for pods that are gone")
    p.add_argument("--detector", help="print only the missing-evidence steps of this detector id")
    p.add_argument("--snippet", choices=tuple(SYNTAXES),
                   help="print only the logger snippet in this syntax (for --product, or --detector)")
    p.add_argument("--out", help="write to this file instead of standard output")
    return p


def run(args: argparse.Namespace) -> int:
    """Execute parsed ``collect-guide`` arguments; returns the exit code."""
    try:
        if args.snippet:
            specs = loggers_for(args.detector) if args.detector else merged_loggers(args.product)
            text = logger_snippet(specs, args.snippet)
        elif args.detector:
            text = "\n".join(f"- {step}" for step in missing_evidence_steps(args.detector)) + "\n"
        else:
            text = render_guide(args.product, args.k8s)
    except KeyError as exc:
        print(f"stream-incident collect-guide: {exc.args[0]}", file=sys.stderr)
        return 2
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``stream-incident collect-guide [--product kafka-streams|nifi] [--k8s]``."""
    return run(build_parser().parse_args(argv))
