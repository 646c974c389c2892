"""A site's own templates and layouts: the user catalogue (``--catalogue DIR``, ``$STREAM_INCIDENT_CATALOGUE``).

A user catalogue is a folder of ``*.toml`` files, each holding ``[[template]]`` entries (as the shipped
``kafka_streams.toml``) and/or ``[[layout]]`` entries (as the shipped ``layouts.toml``). Every file is checked
before any Spark work, as ``stream-incident catalogue --check FILE`` checks it:

1. against the JSON Schema ``toolkit/resources/schemas/catalogue.schema.json`` (keys, types, at least one sample);
2. as the shipped templates are (:func:`toolkit.catalogue._validate`: regexes compile and Java accepts them, group
   names are known fields, the literal is in every sample at word boundaries);
3. every sample of a template is classified by that template, with the classifier's order (priority, then file
   order): no shipped template, nor an earlier user one, claims it first; the first sample yields ``expect``;
4. ids are unique and clash with no shipped template or layout;
5. every layout sample's line is read by the layout, with the fields the sample gives.

:func:`activate` then makes the templates and layouts part of every catalogue answer
(:func:`toolkit.catalogue.load_templates`, :func:`toolkit.layouts.catalogue.load_layouts`); the parse cache keys
its entries by :attr:`UserCatalogue.digest`, so another catalogue never reads tables classified with this one.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from toolkit.catalogue import (
    FIELD_TYPES,
    CatalogueError,
    Template,
    _template_from_entry,
    _validate,
    load_templates,
    set_user_templates,
)
from toolkit.catalogue.prefix import split_prefix
from toolkit.layouts.catalogue import FIELDS, Layout, _shipped_layouts, layout_from_entry, set_user_layouts
from toolkit.validation import error_path, schema_errors

#: The environment variable naming the user catalogue folder used when ``--catalogue`` is not given.
USER_CATALOGUE_ENV = "STREAM_INCIDENT_CATALOGUE"

#: Values a user template may leave out (the shipped catalogue gives them all).
_TEMPLATE_DEFAULTS = {"versions": "unknown", "reference": ""}


@dataclass(frozen=True)
class UserCatalogue:
    """The templates and layouts of one user catalogue folder, checked."""

    folder: Path
    files: tuple[str, ...]
    templates: tuple[Template, ...]
    layouts: tuple[Layout, ...]
    #: identity of every file's name and bytes: part of the parse cache's keys
    digest: str


@dataclass
class _FileContent:
    templates: list[Template]
    #: (file, layout): a layout does not name its file itself
    layouts: list[tuple[str, Layout]]
    problems: list[str]


def default_folder() -> Path | None:
    """The user catalogue folder named by ``$STREAM_INCIDENT_CATALOGUE``, or None when it is unset or empty."""
    value = os.environ.get(USER_CATALOGUE_ENV, "").strip()
    return Path(value).expanduser() if value else None


def _read(path: Path) -> _FileContent:
    """A file's entries, each one that could be built, and every problem found (schema and per entry)."""
    name = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return _FileContent([], [], [f"{name}: cannot be read: {exc.strerror or exc}"])
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return _FileContent([], [], [f"{name}: not valid TOML: {exc}"])
    problems = [f"{name}: {_entry_path(data, path)}: {message}" for path, message in schema_errors(data, "catalogue")]
    if problems:
        return _FileContent([], [], problems)
    templates, layouts = [], []
    for raw in data.get("template", []):
        entry = {**_TEMPLATE_DEFAULTS, **raw}
        entry["reference"] = entry["reference"] or path.name
        try:
            template = _template_from_entry(entry, name)
            _validate(template)
        except CatalogueError as exc:
            problems.append(str(exc))
            continue
        templates.append(template)
    for raw in data.get("layout", []):
        layout = layout_from_entry(raw)
        found = _layout_problems(layout)
        problems += [f"{name}: layout {layout.id!r}: {p}" for p in found]
        if not found:
            layouts.append((name, layout))
    return _FileContent(templates, layouts, problems)


def _entry_path(data: Mapping[str, Any], path: tuple[Any, ...]) -> str:
    """Where a schema problem is, with the entry's id when it has one: ``template 'site.x' (#2).samples``."""
    if len(path) >= 2 and path[0] in ("template", "layout") and isinstance(path[1], int):
        entry = data[path[0]][path[1]]
        entry_id = entry.get("id") if isinstance(entry, dict) else None
        label = f"{path[0]} {entry_id!r} (#{path[1] + 1})" if isinstance(entry_id, str) else f"{path[0]} #{path[1] + 1}"
        rest = error_path(path[2:])
        return label if rest == "top" else f"{label}.{rest}" if not rest.startswith("[") else label + rest
    return error_path(path)


def _layout_problems(layout: Layout) -> list[str]:
    """What is wrong with a user layout: its pattern, its groups, its samples."""
    try:
        compiled = re.compile(layout.pattern or "")
    except re.error as exc:
        return [f"bad regex {layout.pattern!r}: {exc}"]
    problems = []
    missing = [g for g in ("ts", "message") if g not in compiled.groupindex]
    if missing:
        problems.append(f"the pattern needs the named groups {missing}")
    unknown = sorted(set(compiled.groupindex) - set(FIELDS))
    if unknown:
        problems.append(f"unknown group names {unknown} (known: {', '.join(FIELDS)})")
    if problems:
        return problems
    for k, sample in enumerate(layout.samples):
        fields = layout.fields(sample["line"])
        if fields is None:
            problems.append(f"sample {k + 1} is not read by the pattern: {sample['line'][:80]!r}")
            continue
        for key in FIELDS:
            if key in sample and fields[key] != sample[key]:
                problems.append(f"sample {k + 1}: {key} is {fields[key]!r}, the sample says {sample[key]!r}")
    return problems


def _matches(template: Template, sample: str) -> re.Match[str] | None:
    """The template's match on a sample message as the classifier tries it: literal, prefix kind, then the
    pattern on the body (its first line, unless the pattern reads several)."""
    if template.literal not in sample:
        return None
    kind, body = split_prefix(sample)
    if template.prefix and kind not in template.prefix:
        return None
    return re.search(template.pattern, body if template.multiline else body.split("\n", 1)[0])


def _same_value(got: str | None, want: Any, field: str) -> bool:
    if FIELD_TYPES.get(field) in ("int", "bigint"):
        try:
            return got is not None and int(got) == int(want)
        except (TypeError, ValueError):
            return False
    return got == want


def _sample_problems(templates: Sequence[Template], ordered: Sequence[Template]) -> list[str]:
    """Each user template's samples against the whole catalogue in matching order (``ordered``)."""
    problems = []
    for t in templates:
        where = f"{t.source_file}: template {t.id!r}"
        for k, sample in enumerate(t.samples):
            first = next((o for o in ordered if _matches(o, sample)), None)
            if first is None or first.id != t.id:
                mine = _matches(t, sample)
                if mine is None:
                    problems.append(f"{where}: sample {k + 1} is not matched by its pattern (tried on the message "
                                    f"without its Kafka/NiFi prefix): {sample[:80]!r}")
                else:
                    owner = f"{first.id!r} ({first.source_file or 'shipped'})" if first is not None else "?"
                    problems.append(f"{where}: sample {k + 1} is classified by {owner} first; make the pattern "
                                    f"or literal more specific, or give a higher priority")
                continue
            if k == 0:
                m = _matches(t, sample)
                groups = m.groupdict() if m else {}
                for field, want in t.expect.items():
                    if field in groups and not _same_value(groups[field], want, field):
                        problems.append(f"{where}: expect {field}={want!r}, the first sample gives {groups[field]!r}")
    return problems


def _id_problems(templates: Sequence[Template], layouts: Sequence[tuple[str, Layout]]) -> list[str]:
    """Ids used twice among the user entries, or already used by a shipped template or layout."""
    problems = []
    shipped = {t.id for t in load_templates(user=False)}
    seen: dict[str, str] = {}
    for t in templates:
        if t.id in shipped:
            problems.append(f"{t.source_file}: template {t.id!r}: a shipped template has this id")
        elif t.id in seen:
            problems.append(f"{t.source_file}: template {t.id!r}: id already used in {seen[t.id]}")
        seen.setdefault(t.id, t.source_file)
    shipped_layouts = {layout.id for layout in _shipped_layouts().layouts}
    seen_layouts: dict[str, str] = {}
    for name, layout in layouts:
        if layout.id in shipped_layouts:
            problems.append(f"{name}: layout {layout.id!r}: a shipped layout has this id")
        elif layout.id in seen_layouts:
            problems.append(f"{name}: layout {layout.id!r}: id already used in {seen_layouts[layout.id]}")
        seen_layouts.setdefault(layout.id, name)
    return problems


def _check(paths: Sequence[Path]) -> tuple[list[Template], list[Layout], list[str]]:
    templates: list[Template] = []
    layouts: list[tuple[str, Layout]] = []
    problems: list[str] = []
    for path in paths:
        content = _read(path)
        templates += content.templates
        layouts += content.layouts
        problems += content.problems
    problems += _id_problems(templates, layouts)
    shipped = {t.id for t in load_templates(user=False)}
    unique = list({t.id: t for t in reversed(templates) if t.id not in shipped}.values())[::-1]
    problems += _sample_problems(unique, load_templates(unique, user=False))
    return templates, [layout for _name, layout in layouts], problems


def check_files(paths: Iterable[str | Path]) -> list[str]:
    """Every problem of these catalogue files, read together as one user catalogue (empty: they are usable).

    Each problem is one sentence naming the file and the entry (``stream-incident catalogue --check``)."""
    return _check([Path(p) for p in paths])[2]


def folder_files(folder: str | Path) -> list[Path]:
    """The ``*.toml`` files of a user catalogue folder, sorted by name; CatalogueError when it is no folder."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise CatalogueError(f"user catalogue {root} is not a folder")
    return sorted(p for p in root.glob("*.toml") if p.is_file())


def load_user_catalogue(folder: str | Path) -> UserCatalogue:
    """The checked templates and layouts of a user catalogue folder.

    Raises CatalogueError naming every problem (one per line) when any file has one."""
    files = folder_files(folder)
    templates, layouts, problems = _check(files)
    if problems:
        raise CatalogueError(f"user catalogue {Path(folder)} has {len(problems)} problem"
                             f"{'s' if len(problems) != 1 else ''}:\n  " + "\n  ".join(problems))
    h = hashlib.blake2b(digest_size=12)
    for path in files:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return UserCatalogue(folder=Path(folder).expanduser().resolve(), files=tuple(p.name for p in files),
                         templates=tuple(templates), layouts=tuple(layouts), digest=h.hexdigest())


_active: UserCatalogue | None = None


def activate(catalogue: UserCatalogue | None) -> None:
    """Use ``catalogue``'s templates and layouts from now on in this process (None: the shipped ones alone)."""
    global _active
    _active = catalogue
    set_user_templates(catalogue.templates if catalogue else ())
    set_user_layouts(catalogue.layouts if catalogue else ())


def active() -> UserCatalogue | None:
    """The user catalogue :func:`activate` last made current, if any."""
    return _active


__all__ = ["USER_CATALOGUE_ENV", "UserCatalogue", "activate", "active", "check_files", "default_folder",
           "folder_files", "load_user_catalogue"]
