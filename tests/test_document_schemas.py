"""The documents the toolkit reads are checked against JSON Schemas (one library, ``jsonschema``; schemas are package
data under ``toolkit/resources/schemas/``): ``bundle.toml`` and ``findings.json`` here, user catalogue files in
tests/test_user_catalogue.py."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from toolkit.bundle import BundleError
from toolkit.bundle.settings import read_bundle_toml
from toolkit.detectors import (
    Evidence,
    Finding,
    FindingsError,
    Impact,
    check_findings_json,
    findings_from_json,
    findings_to_json,
    read_findings,
)
from toolkit.validation import SCHEMAS, load_schema, schema_problems


def test_every_schema_is_a_valid_json_schema():
    from jsonschema import Draft202012Validator

    for name in SCHEMAS:
        Draft202012Validator.check_schema(load_schema(name))


GOOD_BUNDLE = """\
app_id = "orders-app"
notes = "pods of the orders app, 7 March"

[defaults]
timezone = "Europe/Berlin"

[hosts.orders-agg-0]
clock_offset_ms = -1200
date = 2026-03-07
"""


def test_a_good_bundle_toml_reads(tmp_path):
    path = tmp_path / "bundle.toml"
    path.write_text(GOOD_BUNDLE, encoding="utf-8")
    settings = read_bundle_toml(path)
    assert settings["app_id"] == "orders-app" and settings["problems"] == []
    assert settings["hosts"]["orders-agg-0"].date == "2026-03-07"
    assert schema_problems({"defaults": {"date": "2026-03-07"}}, "bundle") == []


@pytest.mark.parametrize("text, message", [
    ("app_id = 5\n", "bundle.toml: app_id: 5 is not of type 'string'"),
    ('notes = ["a", "b"]\n', "bundle.toml: notes: ['a', 'b'] is not of type 'string'"),
    ('[hosts.a]\ndate = "2026-3-7"\n', "date must look like 2026-03-07"),
    ('[hosts.a]\nclock_offset_ms = "5"\n', "clock_offset_ms must be an integer"),
])
def test_a_bad_bundle_toml_stops_with_one_sentence_naming_the_key(tmp_path, text, message):
    path = tmp_path / "bundle.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BundleError) as raised:
        read_bundle_toml(path)
    assert message in str(raised.value)


def _document() -> dict:
    at = datetime(2026, 3, 7, 9, 0, 2, tzinfo=timezone.utc)
    finding = Finding("unclean-shutdown", "critical", "likely", "t", "e", hosts=["h"], tasks=["0_1"], ts=at,
                      evidence=[Evidence("h/app.log", 12, "line", ts=at)],
                      impact=Impact("1 record", {"records": 1}, "counted"), role="root-cause")
    return json.loads(json.dumps(findings_to_json([finding], bundle="/b", ingest={"lines": 3})))


def test_a_findings_document_the_toolkit_writes_conforms_and_reads_back(tmp_path):
    document = _document()
    check_findings_json(document)
    path = tmp_path / "findings.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    data, findings = read_findings(path)
    assert data == document and [f.detector for f in findings] == ["unclean-shutdown"]
    assert findings[0].evidence[0].line_no == 12
    document["findings"][0]["colour"] = "red"  # a key a later version adds is ignored, as the schema page says
    document["findings"][0]["evidence"][0]["colour"] = "red"
    assert [f.detector for f in findings_from_json(document)] == ["unclean-shutdown"]


@pytest.mark.parametrize("change, message", [
    (lambda d: d["findings"][0].update(severity="fatal"), "findings[0].severity: 'fatal' is not one of"),
    (lambda d: d["findings"][0]["evidence"][0].pop("source"), "findings[0].evidence[0]: 'source' is required"),
    (lambda d: d["findings"][0].update(hosts="h"), "findings[0].hosts: 'h' is not of type 'array'"),
    (lambda d: d.update(schema_version=2), "schema_version: 1 was expected"),
    (lambda d: d.pop("summary"), "top: 'summary' is required"),
])
def test_a_bad_findings_document_is_rejected_naming_where(tmp_path, change, message):
    document = _document()
    change(document)
    with pytest.raises(FindingsError) as raised:
        findings_from_json(document)
    assert message in str(raised.value) and str(raised.value).startswith("findings.json does not conform")
    path = tmp_path / "findings.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(FindingsError, match=f"{path} does not conform"):
        read_findings(path)
    path.write_text("{", encoding="utf-8")
    with pytest.raises(FindingsError, match="is not JSON"):
        read_findings(path)
