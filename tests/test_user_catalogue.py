"""A site's own templates and layouts: ``catalogue --check FILE`` checks a file a user writes, ``--catalogue DIR``
(or ``$STREAM_INCIDENT_CATALOGUE``) adds its entries to the shipped catalogue, and the parse cache keeps tables
classified with one catalogue apart from another's."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.catalogue import CatalogueError, load_templates
from toolkit.catalogue.user import USER_CATALOGUE_ENV, activate, check_files, load_user_catalogue

#: A site's own application line (its logger is the site's class, not Kafka's): a template for it is what a user
#: catalogue is for. The shipped catalogue does not classify it.
SITE_LINE = "Order reconciliation finished for store order-totals: 1520 keys checked"

SITE_TEMPLATE = """\
# Our reconciliation job's summary line.
[[template]]
id = "site.orders.reconciled"
product = "kafka-streams"
logger = "ReconcileJob"
level = "INFO"
literal = "Order reconciliation finished for store"
pattern = '^Order reconciliation finished for store (?P<store>\\S+): (?P<count>\\d+) keys checked$'
event = "SITE_RECONCILED"
samples = ["Order reconciliation finished for store order-totals: 1520 keys checked"]
expect = { store = "order-totals", count = 1520 }
"""

SITE_LAYOUT = """\
[[layout]]
id = "site-level-first"
description = "our own pattern: %p %d{dd.MM.yyyy HH:mm:ss,SSS} %c: %m%n"
pattern = '^(?P<level>[A-Z]+) (?P<ts>\\d{2}\\.\\d{2}\\.\\d{4} \\d{2}:\\d{2}:\\d{2},\\d{3}) (?P<logger>[\\w.$]+): (?P<message>.*)$'
ts_formats = ["dd.MM.yyyy HH:mm:ss,SSS"]

[[layout.samples]]
line = "INFO 07.03.2024 14:02:11,408 com.example.orders.ReconcileJob: Order reconciliation finished for store order-totals: 1520 keys checked"
ts = "07.03.2024 14:02:11,408"
level = "INFO"
logger = "com.example.orders.ReconcileJob"
message = "Order reconciliation finished for store order-totals: 1520 keys checked"
"""


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _shipped_catalogue_after(monkeypatch):
    """Every test leaves the process with the shipped catalogue alone, and never reads a user's own folder."""
    monkeypatch.delenv(USER_CATALOGUE_ENV, raising=False)
    yield
    activate(None)


def test_a_good_file_passes_the_check_and_the_command_says_ok(tmp_path, capsys):
    from toolkit.cli import main

    path = _write(tmp_path, "site.toml", SITE_TEMPLATE + "\n" + SITE_LAYOUT)
    assert check_files([path]) == []
    assert main(["catalogue", "--check", str(path)]) == 0
    assert capsys.readouterr().out.strip() == f"{path}: ok"


@pytest.mark.parametrize("change, problem", [
    (("samples = [\"Order", "samples = [\"Ordre"), "literal 'Order reconciliation finished for store' not in sample"),
    (("keys checked$'", "keys checked$'\nbogus = 1"), "unknown key(s) ('bogus' was unexpected)"),
    (("samples = [", "samples = [] # "), "samples: [] should be non-empty"),
    (("(?P<count>", "(?P<counted>"), "unknown group names ['counted']"),
    (("(?P<count>\\d+)", "(?P<count>\\d+"), "bad regex"),
    (("1520 keys checked\"]", "1520 keys verified\"]"), "sample 1 is not matched by its pattern"),
    (("count = 1520", "count = 1521"), "expect count=1521, the first sample gives '1520'"),
    (('id = "site.orders.reconciled"', 'id = "ks.checkpoint.read"'), "a shipped template has this id"),
    (("event = \"SITE_RECONCILED\"", "event = \"reconciled\""), "event: 'reconciled' does not match"),
])
def test_a_broken_file_is_rejected_naming_file_entry_and_problem(tmp_path, change, problem, capsys):
    from toolkit.cli import main

    text = SITE_TEMPLATE.replace(*change)
    assert text != SITE_TEMPLATE
    path = _write(tmp_path, "site.toml", text)
    problems = check_files([path])
    assert problems and any(problem in p for p in problems), problems
    assert all(p.startswith(f"{path}: template ") for p in problems), problems
    assert main(["catalogue", "--check", str(path)]) == 2
    err = capsys.readouterr().err
    assert problem in err and "problem" in err.splitlines()[-1]


def test_a_sample_a_shipped_template_classifies_first_is_a_problem(tmp_path):
    shipped = next(t for t in load_templates() if t.id == "ks.restore.finished_changelog")
    text = f"""
[[template]]
id = "site.restore"
product = "kafka-streams"
logger = "StoreChangelogReader"
level = "INFO"
literal = "{shipped.literal}"
pattern = '.*'
event = "SITE_RESTORED"
samples = [{shipped.samples[0]!r}]
"""
    (problem,) = check_files([_write(tmp_path, "restore.toml", text)])
    assert "sample 1 is classified by 'ks.restore.finished_changelog' (kafka_streams.toml) first" in problem


def test_layout_samples_are_read_by_their_layout(tmp_path):
    good = _write(tmp_path, "layout.toml", SITE_LAYOUT)
    assert check_files([good]) == []
    bad = _write(tmp_path, "bad.toml", SITE_LAYOUT.replace('level = "INFO"', 'level = "WARN"'))
    assert check_files([bad]) == [f"{bad}: layout 'site-level-first': sample 1: level is 'INFO', the sample says 'WARN'"]
    no_ts = _write(tmp_path, "no_ts.toml", SITE_LAYOUT.replace("(?P<ts>", "(?P<stamp>"))
    assert any("needs the named groups ['ts']" in p for p in check_files([no_ts]))
    clash = _write(tmp_path, "clash.toml", SITE_LAYOUT.replace('id = "site-level-first"', 'id = "kafka-log4j"'))
    assert check_files([clash]) == [f"{clash}: layout 'kafka-log4j': a shipped layout has this id"]
    assert check_files([good, good]) == [f"{good}: layout 'site-level-first': id already used in {good}"]


def test_two_files_of_one_folder_may_not_share_an_id(tmp_path):
    _write(tmp_path / "cat", "a.toml", SITE_TEMPLATE)
    _write(tmp_path / "cat", "b.toml", SITE_TEMPLATE)
    with pytest.raises(CatalogueError, match="id already used in .*a.toml"):
        load_user_catalogue(tmp_path / "cat")


def test_catalogue_flag_and_environment_fill_the_options_and_a_bad_folder_fails_before_spark(tmp_path, monkeypatch,
                                                                                         capsys):
    from toolkit.cli import build_parser, main
    from toolkit.options import options_from, options_from_args

    folder = tmp_path / "cat"
    _write(folder, "site.toml", SITE_TEMPLATE)
    args = build_parser().parse_args(["parse", "b", "--out", "o", "--catalogue", str(folder)])
    options = options_from_args(args)
    assert options.catalogue == folder.resolve()
    assert options.as_parameters()["catalogue"] == str(folder.resolve())
    assert [t.id for t in options.user_catalogue().templates] == ["site.orders.reconciled"]
    assert options_from().catalogue is None
    monkeypatch.setenv(USER_CATALOGUE_ENV, str(folder))
    assert options_from().catalogue == folder.resolve()
    monkeypatch.delenv(USER_CATALOGUE_ENV)

    _write(folder, "broken.toml", SITE_TEMPLATE.replace('id = "site.orders.reconciled"', 'id = "site.other"')
           .replace("samples = [\"Order", "samples = [\"Ordre"))
    bundle = _write(tmp_path / "bundle", "app.log", "[2024-03-07 14:02:11,408] INFO x (a.B)\n")
    assert main(["parse", str(bundle.parent), "--out", str(tmp_path / "out"), "--catalogue", str(folder),
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"user catalogue {folder} has 1 problem" in err and "broken.toml: template 'site.other'" in err
    assert main(["parse", str(bundle.parent), "--out", str(tmp_path / "out"), "--catalogue",
                 str(tmp_path / "missing"), "--quiet"]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_the_catalogue_listing_shows_the_user_templates(tmp_path, capsys):
    from toolkit.cli import main

    folder = tmp_path / "cat"
    _write(folder, "site.toml", SITE_TEMPLATE)
    assert main(["catalogue", "--catalogue", str(folder)]) == 0
    assert "site.orders.reconciled" in capsys.readouterr().out
    assert main(["catalogue"]) == 0
    assert "site.orders.reconciled" not in capsys.readouterr().out


def test_the_parse_cache_keys_entries_by_the_user_catalogue(tmp_path):
    from toolkit.cache import ParseCache

    cache = ParseCache(tmp_path / "cache")
    shipped = cache.derived_dir(["k"], "events")
    cache.use_catalogue("abc")
    with_user = cache.derived_dir(["k"], "events")
    cache.use_catalogue("abd")
    assert len({shipped, with_user, cache.derived_dir(["k"], "events")}) == 3
    cache.use_catalogue("")
    assert cache.derived_dir(["k"], "events") == shipped


def _bundle(folder: Path) -> Path:
    lines = [
        "[2024-03-07 14:02:11,408] INFO stream-thread [orders-app-3c8e7f0a-2b61-4c57-9a4e-0d1f5b6a7c88-StreamThread-1] "
        "State transition from PARTITIONS_ASSIGNED to RUNNING (org.apache.kafka.streams.processor.internals.StreamThread)",
        f"[2024-03-07 14:02:12,001] INFO {SITE_LINE} (com.example.orders.ReconcileJob)",
    ]
    _write(folder, "orders-app-0.log", "\n".join(lines) + "\n")
    return folder


def test_a_user_template_classifies_its_line_and_the_cache_keeps_catalogues_apart(spark, tmp_path):
    from toolkit.options import AnalysisOptions
    from toolkit.pipeline import parse

    bundle = _bundle(tmp_path / "bundle")
    folder = tmp_path / "cat"
    _write(folder, "site.toml", SITE_TEMPLATE)
    cache_dir = tmp_path / "cache"

    def site_rows(options: AnalysisOptions, out: str):
        events = parse(spark, bundle, tmp_path / out, options).events
        return events.where(f"message = '{SITE_LINE}'").select("template_id", "event", "store", "count").collect()

    try:
        shipped = site_rows(AnalysisOptions(cache_dir=cache_dir), "shipped")
        with_user = site_rows(AnalysisOptions(cache_dir=cache_dir, catalogue=folder), "user")
        again = site_rows(AnalysisOptions(cache_dir=cache_dir), "again")
    finally:
        activate(None)
    assert shipped == again == []
    assert [tuple(r) for r in with_user] == [("site.orders.reconciled", "SITE_RECONCILED", "order-totals", 1520)]


def test_a_user_layout_reads_a_file_of_its_own_pattern(spark, tmp_path):
    from toolkit.options import AnalysisOptions
    from toolkit.pipeline import parse

    folder = tmp_path / "cat"
    _write(folder, "site.toml", SITE_TEMPLATE + "\n" + SITE_LAYOUT)
    line = "INFO 07.03.2024 14:02:11,408 com.example.orders.ReconcileJob: " + SITE_LINE
    bundle = _write(tmp_path / "bundle", "reconcile.log", "\n".join([line] * 3) + "\n").parent
    try:
        parsed = parse(spark, bundle, tmp_path / "out", AnalysisOptions(use_cache=False, catalogue=folder))
    finally:
        activate(None)
    (report,) = parsed.ingest.files
    assert report.layout == "site-level-first" and report.unparsed == 0
    rows = parsed.events.select("template_id", "logger", "store").distinct().collect()
    assert [tuple(r) for r in rows] == [("site.orders.reconciled", "com.example.orders.ReconcileJob", "order-totals")]


def test_check_files_takes_string_paths(tmp_path):
    path = _write(tmp_path, "site.toml", SITE_TEMPLATE)
    assert check_files([str(path)]) == []
