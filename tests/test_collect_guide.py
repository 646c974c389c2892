"""The collect-guide: logger snippets that parse, pointers for every detector, the generated playbook."""

from __future__ import annotations

import configparser
import json
import re
import shlex
import xml.etree.ElementTree as ET

import pytest

from support import REPO
from toolkit.knowledge import logger_snippet, missing_evidence_steps, render_guide
from toolkit.knowledge.collect import (
    LOG_PLATFORMS,
    PLAYBOOK_PATH,
    SYNTAXES,
    LoggerSpec,
    detector_logging,
    known_detector_ids,
    loggers_for,
    main,
    merged_loggers,
    render_playbook,
    write_playbook,
)


REQUIRED_DETECTORS = {"eos-stale-restore-checkpoint", "standby-lock-stale-checkpoint",
                      "restore-skipped-after-reassignment", "alos-crash-reprocessing",
                      "kinesis-checkpoint-migration-loss"}

# Every set of loggers the guide renders: each detector alone, and the merged set per product.
LOGGER_SETS = [(row.detector, row.loggers) for row in detector_logging()] + [
    ("all-kafka-streams", tuple(merged_loggers("kafka-streams"))),
    ("all-nifi", tuple(merged_loggers("nifi"))),
]


def expected(loggers) -> dict[str, str]:
    return {spec.name: spec.level for spec in loggers}


# --- parsers used only by the tests --------------------------------------------------------------


def parse_log4j_properties(text: str) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",), comment_prefixes=("#",))
    parser.optionxform = str  # logger names are case-sensitive
    parser.read_string("[snippet]\n" + text)
    found = {}
    for key, value in parser["snippet"].items():
        assert key.startswith("log4j.logger."), key
        found[key.removeprefix("log4j.logger.")] = value.strip()
    # and the plain-line view: every non-comment line is log4j.logger.<name>=<LEVEL>
    for line in text.splitlines():
        if line and not line.startswith("#"):
            assert re.fullmatch(r"log4j\.logger\.[\w.$]+=(TRACE|DEBUG|INFO|WARN|ERROR)", line), line
    return found


def parse_log4j2_yaml_shape(text: str) -> dict[str, str]:
    """A tiny parser for exactly the shape the snippet promises (no PyYAML needed)."""
    lines = [line for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert lines[:3] == ["Configuration:", "  Loggers:", "    Logger:"]
    found, rest = {}, lines[3:]
    assert len(rest) % 2 == 0
    for name_line, level_line in zip(rest[::2], rest[1::2]):
        name = re.fullmatch(r'      - name: "([\w.$]+)"', name_line)
        level = re.fullmatch(r"        level: (TRACE|DEBUG|INFO|WARN|ERROR)", level_line)
        assert name and level, (name_line, level_line)
        found[name.group(1)] = level.group(1)
    return found


def parse_log4j2_xml(text: str) -> dict[str, str]:
    root = ET.fromstring(text)
    assert root.tag == "Configuration"
    (loggers,) = list(root)
    assert loggers.tag == "Loggers"
    assert all(child.tag == "Logger" for child in loggers)
    return {child.attrib["name"]: child.attrib["level"] for child in loggers}


def parse_logback_xml(text: str) -> dict[str, str]:
    root = ET.fromstring(text)
    assert root.tag == "configuration"
    assert root.attrib.get("scan") == "true"
    assert all(child.tag == "logger" for child in root)
    return {child.attrib["name"]: child.attrib["level"] for child in root}


# --- snippets --------------------------------------------------------------------------------------


@pytest.mark.parametrize("label,loggers", LOGGER_SETS, ids=[label for label, _ in LOGGER_SETS])
def test_log4j_properties_snippet_parses(label, loggers):
    assert parse_log4j_properties(logger_snippet(loggers, "log4j-properties")) == expected(loggers)


@pytest.mark.parametrize("label,loggers", LOGGER_SETS, ids=[label for label, _ in LOGGER_SETS])
def test_log4j2_yaml_snippet_has_the_promised_shape(label, loggers):
    assert parse_log4j2_yaml_shape(logger_snippet(loggers, "log4j2-yaml")) == expected(loggers)


@pytest.mark.parametrize("label,loggers", LOGGER_SETS, ids=[label for label, _ in LOGGER_SETS])
def test_log4j2_yaml_snippet_parses_with_pyyaml(label, loggers):
    yaml = pytest.importorskip("yaml")
    data = yaml.safe_load(logger_snippet(loggers, "log4j2-yaml"))
    entries = data["Configuration"]["Loggers"]["Logger"]
    assert {e["name"]: e["level"] for e in entries} == expected(loggers)


@pytest.mark.parametrize("label,loggers", LOGGER_SETS, ids=[label for label, _ in LOGGER_SETS])
def test_log4j2_xml_snippet_parses(label, loggers):
    assert parse_log4j2_xml(logger_snippet(loggers, "log4j2-xml")) == expected(loggers)


@pytest.mark.parametrize("label,loggers", LOGGER_SETS, ids=[label for label, _ in LOGGER_SETS])
def test_logback_xml_snippet_parses(label, loggers):
    assert parse_logback_xml(logger_snippet(loggers, "logback-xml")) == expected(loggers)


def test_the_loggers_each_detector_needs():
    eos = expected(loggers_for("eos-stale-restore-checkpoint"))
    assert eos["org.apache.kafka.streams.processor.internals.ProcessorStateManager"] == "DEBUG"
    assert eos["org.apache.kafka.streams.processor.internals.StateDirectory"] == "DEBUG"
    standby = expected(loggers_for("standby-lock-stale-checkpoint"))
    assert standby["org.apache.kafka.streams.processor.internals.StandbyTask"] == "DEBUG"
    assert expected(loggers_for("kinesis-checkpoint-migration-loss")) == {"org.apache.nifi.processors.aws.kinesis": "INFO"}


def test_merged_set_keeps_the_most_verbose_level():
    merged = expected(merged_loggers("kafka-streams"))
    # TRACE for 2.x standby checkpoints wins over DEBUG asked by the others
    assert merged["org.apache.kafka.streams.processor.internals.ProcessorStateManager"] == "TRACE"
    assert "org.apache.nifi.processors.aws.kinesis" not in merged


def test_reasons_cannot_break_xml_comments_and_dicts_are_accepted():
    tricky = [{"name": "a.b.C", "level": "debug", "why": "ranges like 2.6--3.6 and <tags> & such -"}]
    for syntax in ("log4j2-xml", "logback-xml"):
        ET.fromstring(logger_snippet(tricky, syntax))
    assert "log4j.logger.a.b.C=DEBUG" in logger_snippet(tricky, "log4j-properties")


def test_bad_syntax_or_level_is_refused():
    with pytest.raises(ValueError):
        logger_snippet([LoggerSpec("a.B", "DEBUG")], "toml")
    with pytest.raises(ValueError):
        logger_snippet([LoggerSpec("a.B", "VERBOSE")], "logback-xml")


# --- missing evidence ---------------------------------------------------------------------------------


def test_required_detectors_have_logging_entries():
    assert REQUIRED_DETECTORS <= set(known_detector_ids())


@pytest.mark.parametrize("detector_id", known_detector_ids())
def test_every_detector_has_missing_evidence_steps(detector_id):
    steps = missing_evidence_steps(detector_id)
    assert steps and all(isinstance(s, str) and s for s in steps)
    assert any("§logging" in s for s in steps)
    assert len(steps) == len(set(steps))


def test_missing_evidence_wording():
    steps = missing_evidence_steps("eos-stale-restore-checkpoint")
    assert steps[0].startswith("Raise ProcessorStateManager, ") and steps[0].endswith(
        "to DEBUG (see collect-guide §logging)")
    assert any("capture-state" in s for s in steps)
    nifi = missing_evidence_steps("kinesis-checkpoint-migration-loss")
    assert nifi[0] == "Raise org.apache.nifi.processors.aws.kinesis to INFO in conf/logback.xml (see collect-guide §logging)"
    assert any("dynamodb-scan-TABLE.json" in s for s in nifi)
    with pytest.raises(KeyError):
        missing_evidence_steps("no-such-detector")


# --- the guide ------------------------------------------------------------------------------------------


def test_guide_for_both_products_has_every_command():
    text = render_guide(None, k8s=False)
    for needle in (
        "journalctl -u <unit> -o short-iso", "docker logs -t", "tar -czf",
        "stream-incident capture-state /var/lib/kafka-streams --out", "python3 capture.py",
        "playbooks/capturing-state.md", "find -printf",
        "aws dynamodb describe-table", "aws dynamodb scan", "--output json",
        'dynamodb-describe-$t.json', 'dynamodb-scan-$t.json', "<table>_migration",
        "aws cloudtrail lookup-events --lookup-attributes AttributeKey=ResourceName,AttributeValue=",
        "data events", "nifi.sh diagnostics --verbose", "conf/flow.json.gz", "conf/archive",
        "/nifi-api/flow/history", "conf/logback.xml", "30 seconds",
        "org.apache.kafka.streams.processor.internals.ProcessorStateManager",
        "org.apache.nifi.processors.aws.kinesis",
    ):
        assert needle in text, needle
    for syntax_title in SYNTAXES.values():
        assert syntax_title in text
    assert "kubectl" not in text.split("## §per-detector")[0]


def test_k8s_adds_the_kubectl_commands():
    plain, pods = render_guide("kafka-streams", k8s=False), render_guide("kafka-streams", k8s=True)
    for needle in ("kubectl -n <ns> logs <pod> -c <container> --previous --timestamps",
                   "--timestamps --prefix", "--tail=-1", "stern ", "kubectl -n <ns> cp ",
                   "kubectl -n <ns> describe pod", "## §kubernetes"):
        assert needle in pods and needle not in plain, needle


# --- §log-platform: pods that are gone -------------------------------------------------------------------


def guide_section(text: str, name: str) -> str:
    """The body of ``## §name`` up to the next ``## `` heading (AssertionError when the guide has none)."""
    match = re.search(rf"^## §{re.escape(name)} .*?(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, f"no §{name} section"
    return match.group(0)


def platform_section(text: str, platform: str) -> str:
    """One platform's ``### `` subsection of §log-platform."""
    section = guide_section(text, "log-platform")
    title = LOG_PLATFORMS[platform]
    match = re.search(rf"^### {re.escape(title)}\n.*?(?=^### |\Z)", section, flags=re.M | re.S)
    assert match, f"§log-platform has no subsection {title!r}"
    return match.group(0)


def shell_commands(section: str, program: str) -> list[list[str]]:
    """The commands of ``program`` in a section's ``sh`` blocks, split as the shell would (continuation lines
    joined, comments dropped); a quote left open fails here."""
    commands = []
    for body in re.findall(r"```sh\n(.*?)```", section, flags=re.S):
        for command in re.split(r"(?<!\\)\n(?=\S)", body.replace("\\\n", " ")):
            words = shlex.split(command, comments=True)
            if words and words[0] == program:
                commands.append(words)
    return commands


def flags(words: list[str]) -> dict[str, str]:
    """``--name=value`` and ``--name value`` options of a command (a bare flag maps to "")."""
    found, i = {}, 0
    while i < len(words):
        word = words[i]
        if word.startswith("--") and "=" in word:
            name, value = word.split("=", 1)
            found[name] = value
        elif word.startswith("-") and word not in ("-", "--"):
            takes_value = i + 1 < len(words) and not words[i + 1].startswith("-") and words[i + 1] != ">"
            found[word] = words[i + 1] if takes_value else ""
            i += takes_value
        i += 1
    return found


PODS_GUIDE = render_guide(None, k8s=True)


def test_log_platform_section_comes_with_k8s_only():
    plain, pods = render_guide("kafka-streams", k8s=False), render_guide("kafka-streams", k8s=True)
    assert "§log-platform" not in plain and "logcli" not in plain and "filter-log-events" not in plain
    assert "§log-platform (pods that are gone)" in pods.split("\n## ")[0]  # listed in the intro's sections
    assert pods.index("## §kubernetes") < pods.index("## §log-platform") < pods.index("## §state")
    assert "## §log-platform" in render_guide("nifi", k8s=True)


def test_log_platform_section_names_every_platform_once():
    section = guide_section(PODS_GUIDE, "log-platform")
    headings = re.findall(r"^### (.+)$", section, flags=re.M)
    assert headings == list(LOG_PLATFORMS.values())
    for name in ("Elasticsearch", "OpenSearch", "Kibana", "Loki", "logcli", "Grafana Explore", "CloudWatch",
                 "Logs Insights", "gcloud logging read", "Splunk", "Datadog", "Log Explorer"):
        assert name in section, name


def test_log_platform_section_says_what_to_keep_and_when():
    section = " ".join(guide_section(PODS_GUIDE, "log-platform").split())  # prose wraps anywhere
    for needle in ("raw message", "timestamp", "label that names the pod", "before the last clean start", "after the crash",
                   "newest first", "read once"):
        assert needle in section, needle
    assert "`StreamsConfig values:`" in guide_section(render_guide("kafka-streams", k8s=True), "log-platform")
    nifi = guide_section(render_guide("nifi", k8s=True), "log-platform")
    assert "`NiFi has started`" in nifi and "StreamsConfig" not in nifi


def test_elasticsearch_search_body_is_json_with_window_sort_and_pod_fields():
    section = platform_section(PODS_GUIDE, "elasticsearch")
    (curl,) = shell_commands(section, "curl")
    assert any(word.endswith("/_search") for word in curl)
    body = json.loads(flags(curl)["-d"])
    assert body["size"] == 10000 and body["sort"] == [{"@timestamp": "asc"}]
    assert {"@timestamp", "message", "log", "kubernetes.pod.name", "kubernetes.pod_name"} <= set(body["_source"])
    (window,) = [f["range"]["@timestamp"] for f in body["query"]["bool"]["filter"] if "range" in f]
    assert window["gte"] < window["lte"]
    for needle in ("search_after", "index.max_result_window", "jq -c '.hits.hits[]'", "Discover",
                   "Share → Export → CSV", "Reporting", "kubernetes.pod.name", "dateFormat:tz"):
        assert needle in section, needle


def test_logcli_exports_jsonl_forward_unlimited_over_the_window():
    section = platform_section(PODS_GUIDE, "loki")
    jsonl, raw = shell_commands(section, "logcli")
    opts = flags(jsonl)
    assert opts["--output"] == "jsonl" and "--forward" in opts and opts["--limit"] == "0"
    assert opts["--from"] < opts["--to"] and opts["--from"].endswith("Z")
    assert re.fullmatch(r'\{namespace="<ns>", pod=~"<pod-prefix>\.\*"\}', jsonl[2]), jsonl[2]
    assert flags(raw)["--output"] == "raw" and raw[-1] == "<pod>.log"  # the file names the pod
    for needle in ("`pod`", "`pod_name`", "`instance`", "--analyze-labels", "Download", "json"):
        assert needle in section, needle


def test_cloudwatch_filter_log_events_takes_milliseconds_and_writes_json():
    section = platform_section(PODS_GUIDE, "cloudwatch")
    (filter_events,) = shell_commands(section, "aws")
    assert filter_events[1:3] == ["logs", "filter-log-events"]
    opts = flags(filter_events)
    assert opts["--log-group-name"] == "/aws/containerinsights/<cluster>/application" and opts["--output"] == "json"
    assert opts["--start-time"].endswith("+%s000)") and opts["--end-time"].endswith("+%s000)")  # milliseconds
    assert "$.kubernetes.pod_name" in opts["--filter-pattern"]
    for needle in ("kubernetes.pod_name", "logStreamName", "get-log-events", "first page", "--next-token",
                   "fields @timestamp, @message, @logStream", "Download table", "10,000"):
        assert needle in section, needle


def test_gcloud_read_is_bounded_and_json():
    section = platform_section(PODS_GUIDE, "gcloud")
    (read,) = shell_commands(section, "gcloud")
    assert read[1:3] == ["logging", "read"]
    log_filter, opts = read[3], flags(read)
    assert opts["--format"] == "json" and opts["--order"] == "asc"
    for needle in ('resource.type="k8s_container"', "resource.labels.namespace_name=", "resource.labels.pod_name",
                   "timestamp>=", "timestamp<="):
        assert needle in log_filter, needle
    assert "--freshness=7d" in section and "1 day" in section and "textPayload" in section


def test_splunk_export_is_json_over_the_window():
    section = platform_section(PODS_GUIDE, "splunk")
    (curl,) = shell_commands(section, "curl")
    assert any(word.endswith("/services/search/v2/jobs/export") for word in curl)
    data = [curl[i + 1] for i, word in enumerate(curl) if word in ("-d", "--data-urlencode")]
    assert "output_mode=json" in data
    (search,) = [d for d in data if d.startswith("search=search ")]
    assert "_raw" in search and "_time" in search and "k8s.pod.name" in search
    assert {d.split("=", 1)[0] for d in data} >= {"earliest_time", "latest_time"}
    assert "/services/search/jobs/export" in section and "Export → CSV" in section


def test_datadog_csv_keeps_the_pod_name_column():
    section = platform_section(PODS_GUIDE, "datadog")
    for needle in ("Log Explorer", "Download as CSV", "pod_name", "Host", "kube_namespace:"):
        assert needle in section, needle


def test_each_product_guide_stays_on_its_product():
    kafka, nifi = render_guide("kafka-streams", k8s=False), render_guide("nifi", k8s=False)
    assert "aws dynamodb" not in kafka and "nifi.sh" not in kafka
    assert "capture-state /var/lib/kafka-streams" not in nifi and "log4j2" not in nifi
    assert "capture-state /opt/nifi/nifi-current --product nifi" in nifi
    assert "`kinesis-checkpoint-migration-loss`" in nifi and "`eos-stale-restore-checkpoint`" not in nifi
    with pytest.raises(ValueError):
        render_guide("flink", k8s=False)


def test_guide_snippets_parse_as_embedded():
    text = render_guide(None, k8s=True)
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)
    xml_blocks = [body for lang, body in blocks if lang == "xml"]
    assert len(xml_blocks) == 3  # log4j2 XML + logback for Kafka Streams, logback for NiFi
    for body in xml_blocks:
        ET.fromstring(body)
    props = [body for lang, body in blocks if lang == "properties"]
    assert len(props) == 1 and parse_log4j_properties(props[0])


# --- the playbook and the command line ---------------------------------------------------------------------


def test_committed_playbook_matches_the_generator():
    committed = (REPO / PLAYBOOK_PATH).read_text(encoding="utf-8")
    assert committed == render_playbook(), (
        "playbooks/collecting-evidence.md is stale; regenerate it with "
        "toolkit.knowledge.collect.write_playbook('playbooks/collecting-evidence.md')")


def test_write_playbook(tmp_path):
    path = write_playbook(tmp_path / "sub" / "collecting-evidence.md")
    assert path.read_text(encoding="utf-8") == render_playbook()


def test_main_prints_the_guide(capsys):
    assert main(["--product", "nifi"]) == 0
    assert "aws dynamodb scan" in capsys.readouterr().out
    assert main(["--k8s"]) == 0
    out = capsys.readouterr().out
    assert "--previous --timestamps" in out and "## §log-platform" in out


def test_main_snippet_detector_and_out(capsys, tmp_path):
    assert main(["--detector", "lock-contention", "--snippet", "logback-xml"]) == 0
    assert parse_logback_xml(capsys.readouterr().out)
    assert main(["--detector", "lock-contention"]) == 0
    assert "StateDirectory" in capsys.readouterr().out
    out = tmp_path / "guide.md"
    assert main(["--product", "kafka-streams", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8").startswith("# Collecting evidence")
    assert main(["--detector", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


def test_knowledge_package_reads_nothing_outside_itself():
    package = REPO / "toolkit" / "knowledge"
    for path in package.iterdir():
        if path.suffix in (".py", ".toml"):
            text = path.read_text(encoding="utf-8")
            assert "/work/" not in text and "shared/" not in text, path
