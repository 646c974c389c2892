"""Every test is in exactly one tier (tests/conftest.py gives them): unit, spark or e2e; and test modules share
helpers through tests/support, never by importing one another."""

from __future__ import annotations

import ast
import tomllib

from support import REPO
from support.tiers import COLLECTED_TIERS, TIERS


def test_every_collected_test_has_exactly_one_tier(request):
    collected = request.config.stash[COLLECTED_TIERS]
    assert request.node.nodeid in collected  # every test collected, before -m deselects
    assert {nodeid: tiers for nodeid, (tiers, _) in collected.items() if len(tiers) != 1} == {}
    # a test marked unit by hand must not take the session
    assert [nodeid for nodeid, (tiers, uses_spark) in collected.items() if tiers == ["unit"] and uses_spark] == []


def test_the_tiers_are_registered_markers():
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    registered = [line.split(":", 1)[0] for line in config["markers"]]
    assert [tier for tier in registered if tier in TIERS] == list(TIERS)
    assert "--strict-markers" in config["addopts"].split()


def test_no_test_module_imports_another_or_conftest():
    tests = REPO / "tests"
    paths = sorted(tests.glob("test_*.py")) + sorted(tests.glob("*/test_*.py"))
    assert [p for p in paths if p.parent != tests] != []  # the test packages (tests/detectors/) are searched too
    modules = {p.stem for p in paths} | {"conftest"}
    packages = {p.parent.name for p in paths if p.parent != tests}
    imports = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:  # from . import test_x, from .test_x import ...
                imports.setdefault(str(path.relative_to(tests)), []).append("." * node.level + (node.module or ""))
                continue
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for name in names:
                parts = name.split(".")
                if parts[0] in modules | packages or parts[-1] in modules:
                    imports.setdefault(str(path.relative_to(tests)), []).append(name)
    assert imports == {}
