"""Hand-written lines of one Kafka Streams application (4.1.2 wording) for the process-run tests: start-up markers,
processing summaries, the application's own lines and clean stops."""

from __future__ import annotations

from datetime import datetime, timedelta

T0 = datetime(2026, 5, 12, 8, 0, 0)
CLIENT = "fraud-scoring-5f0c2a71-9d3e-4b8a-a6c1-2e7f4d90b3a8"
THREAD = f"{CLIENT}-StreamThread-1"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def line(source, line_no, seconds, message, event=None, template_id=None, **fields):
    host = source.split("/", 1)[0]
    return {"source": source, "line_no": line_no, "host": host, "ts": at(seconds), "message": message,
            "event": event, "template_id": template_id, "product": "kafka-streams" if event else None, **fields}


def start(source, first_line, seconds, version="4.1.2"):
    """The start-up markers of one KafkaStreams start, as 4.1.2 prints them."""
    return [
        line(source, first_line, seconds, "StreamsConfig values: \n\tapplication.id = fraud-scoring", "CONFIG_DUMP"),
        line(source, first_line + 1, seconds + 0.05, f"stream-client [{CLIENT}] Kafka Streams version: {version}",
             "APP_START", "ks.client.version", version=version),
        line(source, first_line + 2, seconds + 0.1, f"stream-client [{CLIENT}] State transition from CREATED to "
                                                    "REBALANCING", "CLIENT_STATE", "ks.client.state",
             to_state="REBALANCING"),
    ]


def summary(source, line_no, seconds):
    return line(source, line_no, seconds, f"stream-thread [{THREAD}] Processed 1838231 total records, ran 0 "
                                           "punctuators, polled 2408 times and committed 412 total tasks since the last "
                                           "update 120004ms ago", "PROCESSING_SUMMARY", "ks.thread.summary")


def app_line(source, line_no, seconds):
    """A line of the application's own logger: no template knows it."""
    return line(source, line_no, seconds, "Scored transaction batch 8812 (412 transactions) in 38 ms")


def stopped(source, line_no, seconds, terminal="NOT_RUNNING"):
    return line(source, line_no, seconds, f"stream-client [{CLIENT}] Streams client stopped completely and "
                                          f"transitioned to the terminal {terminal} state", "CLIENT_STOPPED",
                "ks.client.stopped_terminal")
