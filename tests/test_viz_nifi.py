"""NiFi charts on small hand-made frames (no Spark): lanes per node and repository, state before and after."""

from __future__ import annotations

import pandas as pd

from toolkit import viz_nifi


def _ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text)


CHECKPOINTS = pd.DataFrame([
    {"host": "nifi-2", "repository": "flowfile", "ts": _ts("2026-04-08 14:02:20.1"), "kind": "checkpointed",
     "records": 20146, "duration_ms": 206, "origin": "log", "problem": None, "evidence": "nifi-2/nifi-app.log:141"},
    {"host": "nifi-2", "repository": "flowfile", "ts": _ts("2026-04-08 14:02:34.2"), "kind": "checkpoint_failed",
     "records": None, "duration_ms": None, "origin": "log", "problem": "java.io.IOException: No space left on device",
     "evidence": "nifi-2/nifi-app.log:142"},
    {"host": "nifi-2", "repository": "local_state", "ts": _ts("2026-04-08 14:03:00"), "kind": "snapshot",
     "records": 3, "duration_ms": None, "origin": "capture", "problem": None, "evidence": "nifi-2/state.tar.gz"},
])
RUNS = pd.DataFrame([
    {"host": "nifi-2", "product": "nifi", "version": "2.9.0", "start": _ts("2026-04-08 13:40:00"),
     "end": _ts("2026-04-08 14:09:55"), "end_kind": "crash", "end_evidence_line": "nifi-2/nifi-app.log:229"},
])
STATES = pd.DataFrame([
    {"host": "nifi-0", "component": "ListFile[0195c2a4]", "component_id": "0195c2a4", "ts": _ts("2026-04-08 08:04:02"),
     "kind": "first_seen", "origin": "capture", "entries_before": None, "entries_after": 3,
     "listing_before": None, "listing_after": _ts("2026-04-08 08:03:40"), "detail": "v6", "evidence": "s"},
    {"host": "nifi-0", "component": "ListFile[0195c2a4]", "component_id": "0195c2a4", "ts": _ts("2026-04-08 08:06:41"),
     "kind": "cleared", "origin": "capture", "entries_before": 3, "entries_after": 0,
     "listing_before": _ts("2026-04-08 08:03:40"), "listing_after": None, "detail": "v7", "evidence": "s"},
    {"host": "nifi-0", "component": "ListFile[0195c2a4]", "component_id": "0195c2a4", "ts": _ts("2026-04-08 08:06:41"),
     "kind": "listed", "origin": "log", "entries_before": None, "entries_after": None,
     "listing_before": None, "listing_after": None, "detail": "4812", "evidence": "nifi-0/nifi-app.log:31"},
])


def _layers(chart) -> list[dict]:
    spec = chart.to_dict()
    return spec.get("layer", [spec])


def test_repository_chart_has_a_lane_per_host_and_repository_and_run_rules():
    chart = viz_nifi.repository_chart(CHECKPOINTS, RUNS, tz="UTC")
    layers = _layers(chart)
    points = layers[0]
    assert points["mark"]["type"] == "point"
    data = chart.to_dict()["datasets"]
    lanes = {row["lane"] for rows in data.values() for row in rows if "lane" in row}
    assert lanes == {"nifi-2 · flowfile", "nifi-2 · local_state"}
    assert [layer["mark"]["type"] for layer in layers[1:]] == ["rule", "rule"]  # start, crash


def test_state_chart_marks_the_reset_and_keeps_the_state_it_replaced():
    chart = viz_nifi.state_chart(STATES, tz="UTC")
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in _layers(chart)]
    assert marks == ["line", "point", "rule"]
    rows = [row for rows in chart.to_dict()["datasets"].values() for row in rows]
    cleared = [r for r in rows if r.get("kind") == "cleared"]
    assert cleared and all(r["state_text"] == "(none)" for r in cleared)


def test_before_after_table_leaves_out_listings():
    table = viz_nifi.state_before_after(STATES)
    assert list(table["kind"]) == ["first_seen", "cleared"]
    assert table.loc[1, "entries_before"] == 3 and table.loc[1, "entries_after"] == 0


def test_empty_frames_draw_a_placeholder():
    assert "nothing to draw" in str(viz_nifi.repository_chart(CHECKPOINTS.iloc[0:0]).to_dict())
    assert "nothing to draw" in str(viz_nifi.state_chart(STATES.iloc[0:0]).to_dict())
