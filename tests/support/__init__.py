"""What several test modules share: paths, timeline and state builders, local Spark services, a browser.

Test modules import from here (``from support import REPO``, ``from support.timelines import ev``), never from
one another; fixtures live in ``conftest.py``.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: The shipped sample bundles, written by the scenario generator.
SAMPLES = REPO / "sample_logs"
#: Hand-built incident bundles (see tests/bundles/README.md).
BUNDLES = REPO / "tests" / "bundles"
#: The sample the entry-point tests (report command, Explorer notebook, detect) share.
EOS_SAMPLE = SAMPLES / "kafka-eos-stale-checkpoint"
