"""The documentation says what the code does: figures, flags and outputs it states are checked against the code."""

from __future__ import annotations

import re
import shutil

from support import REPO

#: The pages that state them: the template count, which commands take --verbose, what parse writes.
TABLES_PAGE, COMMANDS_PAGE, OUTPUTS_PAGE = (REPO / "docs" / page for page in
                                            ("outputs/tables.md", "commands/index.md", "outputs/index.md"))


def test_the_template_count_is_the_catalogues():
    from toolkit.catalogue import load_templates

    (stated,) = re.findall(r"\((\d+) templates of Kafka", TABLES_PAGE.read_text(encoding="utf-8"))
    assert int(stated) == len(load_templates())


def test_verbose_is_documented_for_exactly_the_commands_that_accept_it():
    from toolkit.cli import build_parser

    (sentence,) = re.findall(r"`--verbose`, which (.+?) accept", COMMANDS_PAGE.read_text(encoding="utf-8"))
    documented = set(re.findall(r"`([a-z-]+)`", sentence))
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    accepting = {name for name, sub in commands.items() if "--verbose" in sub._option_string_actions}
    assert documented == accepting == {"parse", "timeline", "catalogue", "detect", "report"}


def test_parse_writes_what_the_docs_list_and_state_tables_only_with_state_evidence(spark, tmp_path):
    from toolkit.bundle import OUTPUT_MARKER
    from toolkit.cli import EXIT_OK, main

    (row,) = [line for line in OUTPUTS_PAGE.read_text(encoding="utf-8").splitlines()
              if line.startswith("| `stream-incident parse BUNDLE --out DIR` |")]
    listed, conditional = row.split("and `state/*.parquet` only when the bundle holds state evidence")
    listed_files = set(re.findall(r"`([a-z_]+\.(?:parquet|json))`", listed))

    sample = REPO / "sample_logs" / "kafka-eos-stale-checkpoint"
    logs_only = tmp_path / "logs-only"
    (logs_only / "orders-agg-1").mkdir(parents=True)
    shutil.copy2(sample / "orders-agg-1" / "app.log", logs_only / "orders-agg-1" / "app.log")
    written = {}
    for name, bundle in (("logs-only", logs_only), ("with-state", sample)):
        out = tmp_path / f"out-{name}"
        assert main(["parse", str(bundle), "--out", str(out), "--quiet"]) == EXIT_OK
        written[name] = {p.name for p in out.iterdir()} - {"logs", "work", OUTPUT_MARKER}
    assert written["logs-only"] == listed_files
    assert written["with-state"] == listed_files | {"state"}
    assert {p.name for p in (tmp_path / "out-with-state" / "state").iterdir()} >= {"state_files.parquet",
                                                                                    "checkpoints.parquet"}


def test_ci_runs_the_readmes_test_command_on_every_tier():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (command,) = re.findall(r"Run the tests:\n\n```bash\n(.+)\n```", readme)
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert command in ci
    # CI selects no tier: every one runs; the quick loop the README names is the unit tier
    assert not re.search(r"-m\s+['\"]?(not\b|unit|spark|e2e)", ci)
    (quick,) = re.findall(r"`\.venv/bin/python -m pytest -m (\w+) -n 2`", readme)
    assert quick == "unit"
