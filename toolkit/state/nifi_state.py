"""NiFi component state captured through the REST API -> ``nifi_state`` rows.

``GET /nifi-api/processors/{id}/state`` returns
``{"componentState": {"componentId", "stateDescription", "clusterState": {"scope", "state": [...]},
"localState": {"scope", "state": [{"key", "value", "clusterNodeId", "clusterNodeAddress"}]}}}``.
A component with no entries yields one row with null key so the capture itself is on record
(for ConsumeKinesis both maps are always empty: its checkpoints live in DynamoDB).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any


def nifi_state_rows(
    text: str, *, host: str | None, source: str, capture_time: datetime | None
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Rows for one REST component-state capture (also accepts the bare ``componentState`` object)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        return [], [(source, f"NiFi state capture is not valid JSON: {exc.msg} at line {exc.lineno}")]
    state = document.get("componentState", document) if isinstance(document, dict) else None
    if not isinstance(state, dict) or "componentId" not in state:
        return [], [(source, 'NiFi state capture has no "componentState" object')]
    base = {
        "host": host,
        "source": source,
        "component_id": state.get("componentId"),
        "state_description": state.get("stateDescription"),
        "capture_time": capture_time,
    }
    rows: list[dict[str, Any]] = []
    for map_name, default_scope in (("clusterState", "CLUSTER"), ("localState", "LOCAL")):
        state_map = state.get(map_name)
        if not isinstance(state_map, dict):
            continue  # clusterState is null on a standalone instance
        scope = state_map.get("scope") or default_scope
        for entry in state_map.get("state") or []:
            if not isinstance(entry, dict):
                continue
            rows.append(
                {
                    **base,
                    "scope": scope,
                    "key": _text(entry.get("key")),
                    "value": _text(entry.get("value")),
                    "cluster_node_id": entry.get("clusterNodeId"),
                    "cluster_node_address": entry.get("clusterNodeAddress"),
                }
            )
    if not rows:
        rows.append({**base, "scope": None, "key": None, "value": None})
    return rows, []


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)
