"""Secrets seeded into a bundle appear in no output: tables, JSON, text."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from toolkit.pipeline import analyse

SECRETS = ["hunter2", "s3cr3tTrust", "AKIAABCDEFGHIJKLMNOP", "pa55word-in-url", "tok-9f8e7d", "wJalrXUtnFEMI/K7MDENG"]

KAFKA = """\
[2026-03-07 14:02:10,001] INFO StreamsConfig values: 
\tapplication.id = orders-agg
\tsasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="svc" password="hunter2";
\tssl.truststore.password = s3cr3tTrust
\tprocessing.guarantee = exactly_once_v2
 (org.apache.kafka.streams.StreamsConfig)
[2026-03-07 14:02:11,408] ERROR stream-thread [orders-agg-0-StreamThread-1] Encountered the following exception during processing and the thread is going to shut down:  (org.apache.kafka.streams.processor.internals.StreamThread)
java.lang.IllegalStateException: cannot reach https://svc:pa55word-in-url@registry.internal/subjects with key AKIAABCDEFGHIJKLMNOP
\tat com.example.Registry.fetch(Registry.java:42)
[2026-03-07 14:02:12,000] INFO stream-thread [orders-agg-0-StreamThread-1] Starting with token=tok-9f8e7d (org.apache.kafka.streams.processor.internals.StreamThread)
"""
JSONL = json.dumps({"@timestamp": "2026-03-07T14:02:13.000Z", "level": "WARN", "logger_name": "com.example.Aws",
                    "thread_name": "main", "message": "retrying with aws_secret_access_key=wJalrXUtnFEMI/K7MDENG",
                    "stack_trace": "java.lang.RuntimeException: password: hunter2\n\tat x.y(Z.java:1)"}) + "\n"


def _strings_in_parquet(path: Path):
    table = pq.read_table(path)
    for column in table.column_names:
        for value in table.column(column).to_pylist():
            if value is not None:
                yield str(value)


def test_secrets_never_reach_any_output(spark, tmp_path):
    bundle = tmp_path / "bundle"
    (bundle / "orders-agg-0").mkdir(parents=True)
    (bundle / "orders-agg-0" / "app.log").write_text(KAFKA)
    (bundle / "orders-agg-0" / "app.json").write_text(JSONL)
    out = tmp_path / "out"
    analysis = analyse(spark, bundle, out)
    assert analysis.events.count() > 0  # the pipeline really ran

    leaks = []
    for path in out.rglob("*"):
        if path.is_file() and path.suffix == ".parquet":
            texts = _strings_in_parquet(path)
        elif path.is_file() and path.suffix in (".json", ".html", ".txt", ".md", ".ipynb"):
            texts = [path.read_text(errors="replace")]
        else:
            continue
        for text in texts:
            leaks += [(str(path.relative_to(out)), s) for s in SECRETS if s in text]
    assert not leaks, leaks
    config = {r.key: r.value for r in analysis.timeline.config.collect()}
    assert config["ssl.truststore.password"] == "[redacted]"
    assert config["processing.guarantee"] == "exactly_once_v2"  # only secrets go
