"""The shipped sample bundles (``sample_logs/``) and the ground truth the scenario generator wrote with each."""

from __future__ import annotations

import json

from support import SAMPLES

#: Every shipped sample with an EXPECTED.json.
NAMES = sorted(p.name for p in SAMPLES.iterdir() if (p / "EXPECTED.json").is_file())


def expected_of(name: str) -> dict:
    return json.loads((SAMPLES / name / "EXPECTED.json").read_text(encoding="utf-8"))
