"""The documentation site has a page for every command and every detector, and names every option of a command
on its page. Fast, no Spark: the lists come from the command line's parser and the detector registry."""

from __future__ import annotations

import argparse
import importlib.util
import re

import pytest

from support import REPO

DOCS = REPO / "docs"
MKDOCS_YML = (REPO / "mkdocs.yml").read_text(encoding="utf-8")


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    from toolkit.cli import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _hooks():
    """``docs/hooks.py``, the MkDocs hook that publishes the playbooks (importable without MkDocs)."""
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SUBCOMMANDS = _subcommands()


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_command_has_a_page_in_the_nav(command):
    page = DOCS / "commands" / f"{command}.md"
    assert page.is_file(), f"no docs page for `stream-incident {command}`: {page.relative_to(REPO)}"
    assert re.search(rf"^\s*- {re.escape(command)}: commands/{re.escape(command)}\.md$", MKDOCS_YML, re.M), \
        f"commands/{command}.md is not in the nav of mkdocs.yml"
    assert page.read_text(encoding="utf-8").startswith(f"# `stream-incident {command}`")


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_option_of_a_command_is_on_its_page(command):
    text = (DOCS / "commands" / f"{command}.md").read_text(encoding="utf-8")
    options = {flag for action in SUBCOMMANDS[command]._actions for flag in action.option_strings
               if flag.startswith("--") and flag != "--help"}
    missing = sorted(flag for flag in options if not re.search(rf"`{re.escape(flag)}(?![\w-])", text))
    assert not missing, f"docs/commands/{command}.md does not name {', '.join(missing)}"


def test_every_registered_detector_has_a_page():
    from toolkit.detectors import registered_detectors

    published = dict(_hooks().playbook_pages())  # nav label -> docs path, as the site is built
    detector_ids = set(registered_detectors())
    assert detector_ids
    for detector_id in detector_ids:
        assert published.get(detector_id) == f"playbooks/{detector_id}.md", \
            f"detector {detector_id} has no page (playbooks/{detector_id}.md with front matter id: {detector_id})"
    assert published["Detectors"] == "playbooks/README.md"
