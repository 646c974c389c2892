"""Process-run markers are catalogue data (``toolkit/catalogue/runs.toml``): the run numbering
(tests/test_runs.py, tests/test_run_bounds.py) and the classifier's gate read them from there."""

from __future__ import annotations

import re

from toolkit.catalogue.gate import RUN_MARKER_HEADS
from toolkit.catalogue.markers import run_markers
from toolkit.events import runs

STRONG = [
    ("StreamsConfig values:", "config"),
    ("stream-client [app-1] Kafka Streams version: 3.7.1", "version"),
    ("Kafka Streams version: 2.0.1", "version"),
    ("stream-client [app-1] State transition from CREATED to REBALANCING", "created"),
    ("Starting NiFi 2.10.0 using Java 21.0.5 with PID 12", "nifi"),
    ("Launching NiFi...", "nifi"),
]
WEAK = ["Kafka version: 3.7.1", "Kafka version : 2.0.1"]
NEITHER = ["Kafka commitId: abc", "stream-client [app-1] State transition from RUNNING to REBALANCING",
           "StreamsConfig values are", "Starting NiFi bootstrap"]


def test_the_markers_come_from_the_catalogue_and_every_marker_starts_with_a_head():
    markers = run_markers()
    assert (runs._STRONG_START, runs._WEAK_START, runs._MARKER_KINDS, runs._CLIENT_STOP) == (
        markers.strong, markers.weak, markers.kinds, markers.stop)
    assert RUN_MARKER_HEADS == markers.heads == (
        "StreamsConfig values:", "Kafka ", "stream-client [", "Starting NiFi ", "Launching NiFi...")
    for message, kind in STRONG:
        assert re.search(markers.strong, message) and message.startswith(RUN_MARKER_HEADS), message
        assert next(k for p, k in markers.kinds if re.search(p, message)) == kind
    for message in WEAK:
        assert re.search(markers.weak, message) and not re.search(markers.strong, message)
    for message in NEITHER:
        assert not re.search(markers.strong, message) and not re.search(markers.weak, message), message
