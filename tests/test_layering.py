"""The package's stages import only from earlier stages (module-level and function-level imports alike).

A stage may use anything declared in the stages before it and nothing after it, so each stage can be
read, tested and replaced knowing only what comes before. Modules are matched to stages by the
longest declared prefix (the root package ``toolkit`` by its own name only); a module of no declared stage fails the test, so a new module must be placed.

Inside a stage too, no two modules import each other, directly or round a longer circle (a package importing
its own submodules to re-export them counts), and no module is longer than :data:`MAX_LINES`: each module
does one job that can be read on its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import toolkit

PACKAGE = Path(toolkit.__file__).parent

#: Stages, lowest first; modules in one stage may import each other.
STAGES: list[tuple[str, tuple[str, ...]]] = [
    # leaves every stage may use: version, regex conversion, shared column contracts, redaction, Spark set-up,
    # timestamps read onto the driver, string literals in SQL text, JSON Schema validation of documents read
    ("base", ("toolkit", "toolkit.regex", "toolkit.schemas", "toolkit.redact", "toolkit.progress", "toolkit.spark",
              "toolkit.jvm", "toolkit.shipped", "toolkit.utc", "toolkit.sqltext", "toolkit.validation")),
    # state evidence: formats, sniffing, readers -> state tables (they import nothing but toolkit.schemas)
    ("state", ("toolkit.state",)),
    # the bundle walker (asks the state sniffers what each file is) and the parse cache keyed by its files,
    # with what lists and prunes it
    ("bundle", ("toolkit.bundle", "toolkit.cache", "toolkit.cache_admin")),
    ("catalogue", ("toolkit.catalogue", "toolkit.layouts")),
    ("ingest", ("toolkit.ingest",)),
    ("events", ("toolkit.events",)),
    # the timeline, and the registry of every table up to it (it lists the schemas of the stages below)
    ("timeline", ("toolkit.timeline", "toolkit.tables")),
    ("knowledge", ("toolkit.knowledge",)),
    ("detectors", ("toolkit.detectors",)),
    # what one analysis is asked to do (opens the parse cache it names)
    ("options", ("toolkit.options",)),
    ("pipeline", ("toolkit.pipeline",)),
    ("viz", ("toolkit.viz", "toolkit.viz_nifi")),
    ("report", ("toolkit.report",)),
    ("serve", ("toolkit.serve",)),
    # builds the class archive by analysing generated samples in a JVM of its own
    ("warmup", ("toolkit.warmup",)),
    # what every command shares (exit codes, usage errors, opening a bundle), the command line and its commands
    ("cli", ("toolkit.commands", "toolkit.cli", "toolkit.detect")),
    # sample bundle generator: a tool of its own, imports nothing from the stages
    ("samples", ("toolkit.samples",)),
]

#: The longest a module may be, in lines.
MAX_LINES = 700

#: Imports allowed against the order, each with its reason: (importing module, imported module) -> why.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("toolkit.warmup", "toolkit.samples"): "the warm-up analyses generated sample bundles (no repository needed)",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _stage_of(module: str) -> int | None:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(STAGES):
        for prefix in prefixes:
            # the root package holds only itself; every other prefix holds its submodules too
            inside = module == prefix or (prefix != "toolkit" and module.startswith(prefix + "."))
            if inside and len(prefix) > best:
                best, rank = len(prefix), i
    return rank


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """Every ``toolkit`` module ``module`` imports, anywhere in its body."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "toolkit"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "toolkit":
                continue
            for alias in node.names:  # `from toolkit import viz` imports the module toolkit.viz
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
    return found


def test_every_module_belongs_to_a_stage() -> None:
    assert [m for m in _modules() if _stage_of(m) is None] == []


def test_no_module_imports_a_later_stage() -> None:
    modules = _modules()
    known = set(modules)
    violations = []
    for module, path in modules.items():
        own = _stage_of(module)
        for imported in sorted(_imports(module, path, known)):
            theirs = _stage_of(imported)
            if theirs is not None and own is not None and theirs > own and (module, imported) not in EXCEPTIONS:
                violations.append(f"{module} ({STAGES[own][0]}) imports {imported} ({STAGES[theirs][0]})")
    assert violations == []


def test_exceptions_are_still_needed() -> None:
    modules = _modules()
    known = set(modules)
    stale = [pair for pair in EXCEPTIONS if pair[1] not in _imports(pair[0], modules[pair[0]], known)]
    assert stale == []


def test_the_walk_sees_function_level_and_relative_imports() -> None:
    known = set(_modules())
    bundle = _imports("toolkit.bundle.discovery", PACKAGE / "bundle" / "discovery.py", known)
    assert any(m.startswith("toolkit.state") for m in bundle)  # imported inside a function
    samples = _imports("toolkit.samples.bundles", PACKAGE / "samples" / "bundles.py", known)
    assert "toolkit.samples.render" in samples  # `from .render import ...`
    viz = _imports("toolkit.viz", PACKAGE / "viz" / "__init__.py", known)
    assert "toolkit.viz.frames" in viz  # a package re-exporting its own submodule's names


def _import_graph() -> dict[str, list[str]]:
    """Every ``toolkit`` module and the ``toolkit`` modules it imports (module- and function-level)."""
    modules = _modules()
    known = set(modules)
    return {m: sorted(i for i in _imports(m, path, known) if i in known and i != m) for m, path in modules.items()}


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """One circle of imports per edge that closes one, found by a depth-first walk: ``[a, b, ..., a]``."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        path.append(module)
        on_path.add(module)
        for imported in graph.get(module, ()):
            if imported in on_path:
                found.append(path[path.index(imported):] + [imported])
            elif imported not in done:
                visit(imported)
        on_path.discard(path.pop())
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module)
    return found


def test_no_import_cycle() -> None:
    assert [" -> ".join(c) for c in _cycles(_import_graph())] == []


def test_the_cycle_check_finds_a_circle() -> None:
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": ["b"], "b": []}) == []


def test_no_module_is_too_long() -> None:
    lengths = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in _modules().items()}
    assert [f"{m} ({n} lines)" for m, n in sorted(lengths.items()) if n > MAX_LINES] == []
