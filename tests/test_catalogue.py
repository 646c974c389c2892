"""The template catalogue proves itself: every sample classifies to its own entry."""

from __future__ import annotations

import tomllib

import pytest
from pyspark.sql import functions as F

from support import REPO
from toolkit.catalogue import (
    FIELD_TYPES,
    CatalogueError,
    documented_events,
    load_templates,
    templates_from_toml,
)
from toolkit.events import catalogue_table, classify
from toolkit.events.classifier import _tag_templates
from toolkit.schemas import RECORD_SCHEMA

TEMPLATES = load_templates()


def _sample_records(spark):
    """One record per sample, in one DataFrame; line_no numbers the samples."""
    rows, owners = [], {}
    for t in TEMPLATES:
        for k, sample in enumerate(t.samples):
            line_no = len(rows) + 1
            owners[line_no] = (t, k)
            rows.append(("samples.log", line_no, "h1", None, None, t.level, None, None, sample, None, "test", "missing", 1))
    return spark.createDataFrame(rows, RECORD_SCHEMA), owners


def test_catalogue_is_read_once_and_every_call_gets_its_own_list():
    first, second = load_templates(), load_templates()
    assert first == second == TEMPLATES
    assert first is not second
    first.clear()
    assert load_templates() == TEMPLATES
    extra = templates_from_toml('''
[[template]]
id = "site.extra.line"
product = "kafka-streams"
logger = "Site"
level = "INFO"
literal = "site extra line"
pattern = '^site extra line$'
event = "SITE_EXTRA"
versions = "3.0-4.3"
samples = ["site extra line"]
reference = "site"
''')
    with_extra = load_templates(extra)
    assert sorted(t.id for t in with_extra) == sorted([t.id for t in TEMPLATES] + ["site.extra.line"])
    assert load_templates() == TEMPLATES


def test_catalogue_holds_every_template_of_its_files_once_and_covers_every_product():
    """Every ``[[template]]`` table of the shipped files (read here with tomllib alone) is loaded, none twice."""
    tables = [entry for path in sorted((REPO / "toolkit" / "catalogue").glob("*.toml"))
              for entry in tomllib.loads(path.read_text(encoding="utf-8")).get("template", [])]
    assert sorted(entry["id"] for entry in tables) == sorted(t.id for t in TEMPLATES)
    assert len({t.id for t in TEMPLATES}) == len(TEMPLATES)
    assert {t.product for t in TEMPLATES} == {"kafka-streams", "kafka-client", "nifi"}
    for t in TEMPLATES:
        assert t.reference and t.versions and t.samples, t.id
        assert set(t.groups) <= set(FIELD_TYPES) | {"partitions", "tasks"}, t.id


def test_vocabulary_lists_exactly_the_catalogue_events():
    used = {t.event for t in TEMPLATES} | {a for t in TEMPLATES for a in t.also}
    documented = documented_events()
    assert used - documented == set(), "events missing from VOCABULARY.md"
    assert documented - used == set(), "VOCABULARY.md lists events no template produces"
    for name in ("THREAD_STATE", "CHECKPOINT_READ", "STATE_WIPED", "NIFI_STARTING", "LINGERING_MIGRATION_DELETED"):
        assert name in documented


def test_every_sample_classifies_to_its_own_entry_with_expected_fields(spark):
    records, owners = _sample_records(spark)
    rows = {r["line_no"]: r for r in classify(records, TEMPLATES).collect()}
    problems = []
    for line_no, (t, k) in owners.items():
        row = rows.get(line_no)
        if row is None:
            problems.append(f"{t.id} sample {k}: not classified")
            continue
        if row["event"] != t.event:
            problems.append(f"{t.id} sample {k}: event {row['event']} via {row['template_id']}")
        if k == 0:
            if row["template_id"] != t.id:
                problems.append(f"{t.id}: first sample claimed by {row['template_id']}")
                continue
            for name, want in t.expect.items():
                if row[name] != want:
                    problems.append(f"{t.id}: {name}={row[name]!r}, expected {want!r}")
    assert problems == []


def test_no_sample_is_claimed_by_two_entries_with_different_events(spark):
    """Every sample against every template (literal, prefix kind, regex), in one Spark job."""
    records, owners = _sample_records(spark)
    bodies = _tag_templates(records, TEMPLATES).select("line_no", "message", "_body", "_first", "_prefix_kind")
    table = spark.createDataFrame(
        [(t.id, t.event, t.literal, t.java_pattern, list(t.prefix), t.multiline) for t in TEMPLATES],
        "template_id string, event string, literal string, pattern string, prefix array<string>, multiline boolean",
    )
    matches = (
        bodies.crossJoin(F.broadcast(table))
        .where(F.col("message").contains(F.col("literal")))
        .where((F.size("prefix") == 0) | F.array_contains(F.col("prefix"), F.col("_prefix_kind")))
        .where(F.expr("regexp_like(CASE WHEN multiline THEN _body ELSE _first END, pattern)"))
        .groupBy("line_no")
        .agg(F.collect_set("event").alias("events"), F.collect_set("template_id").alias("ids"))
        .where(F.size("events") > 1)
        .collect()
    )
    clashes = [(owners[r["line_no"]][0].id, sorted(r["ids"])) for r in matches]
    assert clashes == []


def test_catalogue_table_is_bounded_and_counts_hits(spark):
    records, _ = _sample_records(spark)
    events = classify(records.where("line_no <= 3"), TEMPLATES)
    table = catalogue_table(events, TEMPLATES)
    assert len(table) == len(TEMPLATES)
    assert {"id", "product", "event", "versions", "hits"} <= set(table.columns)
    assert table["hits"].sum() == 3
    assert "hits" not in catalogue_table(None, TEMPLATES).columns


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("pattern = '''^Bad (?P<nosuchfield>\\d+)$'''", "unknown group"),
        ("pattern = '''^Bad ((\\d+)$'''", "bad regex"),
        ("pattern = '''^Bad {x}$'''", "escape literal braces"),
    ],
)
def test_loader_rejects_broken_entries(entry, problem):
    text = f"""
[[template]]
id = "x.bad"
product = "kafka-streams"
logger = "X"
level = "INFO"
literal = "Bad"
{entry}
event = "THREAD_STATE"
versions = "1.1-4.3"
samples = ["Bad 1"]
reference = "x"
"""
    with pytest.raises(CatalogueError, match=problem):
        templates_from_toml(text)


def test_loader_rejects_a_literal_that_cuts_a_word():
    text = """
[[template]]
id = "x.cut"
product = "nifi"
logger = "X"
level = "INFO"
literal = "Terminat"
pattern = '''^Terminating \\S+$'''
event = "PROCESSOR_TERMINATED"
versions = "2.9"
samples = ["Terminating ConsumeKinesis[id=5f0c2a1e-0197-1000-9d3e-3b8c5e2f4a11]"]
reference = "x"
"""
    with pytest.raises(CatalogueError, match="word boundaries"):
        templates_from_toml(text)


#: Long texts that make a search restart inside one long token: a run of one character, a run of
#: letters and digits, a base64-like payload (100,000 characters each, with and without a prefix).
_LONG_TOKENS = ("x" * 100_000, "a1" * 50_000, "Ab1+/9z=" * 12_500)


@pytest.mark.timeout(240)
def test_no_template_or_layout_pattern_rescans_a_long_token():
    """A pattern that may start inside a token and fails only at its end rescans the token from every
    character: quadratic, minutes for one long line (a checkpoint-map item did). Every pattern must
    search these texts in linear time; a quadratic one exceeds the bound on its own."""
    import re

    from toolkit.catalogue import DEFAULT_ITEM
    from toolkit.layouts import load_layouts

    patterns = {f"{t.id}.{attr}": getattr(t, attr) for t in load_templates() for attr in ("pattern", "item")
                if getattr(t, attr, None)}
    patterns.update({f"{l.id}.{attr}": getattr(l, attr) for l in load_layouts().layouts
                     for attr in ("pattern", "bare_pattern") if getattr(l, attr, None)})
    patterns["default item"] = DEFAULT_ITEM
    assert len(patterns) > 100
    for name, pattern in patterns.items():
        compiled = re.compile(pattern)
        for token in _LONG_TOKENS:
            for text in (token, f"stream-thread [app-StreamThread-1] {token}", f"{{{token}-0=1}}"):
                compiled.search(text)  # returns in milliseconds, or runs for minutes
