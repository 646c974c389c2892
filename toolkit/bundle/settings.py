"""Bundle settings (``bundle.toml``) and which host each file belongs to."""

from __future__ import annotations

import difflib
import re
import tomllib
from datetime import date
from pathlib import Path, PurePosixPath
from typing import Iterable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from toolkit.bundle.model import BundleError, HostSettings, IngestProblem
from toolkit.bundle.files import host_from_file_name
from toolkit.validation import schema_problems

BUNDLE_TOML = "bundle.toml"
#: Keys at the top of bundle.toml (``product`` is written by the sample generator and read by people).
TOP_KEYS = ("app_id", "product", "notes", "defaults", "hosts")
#: Keys of ``[defaults]`` and of each ``[hosts.NAME]``.
HOST_KEYS = ("timezone", "clock_offset_ms", "date")
#: Host names shown in a problem about a section that matches none (a journald file may carry hundreds).
SHOWN_HOSTS = 12


def _check_zone(name: str, where: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise BundleError(f"{where}: unknown time zone {name!r}") from exc
    return name


def _table(raw: object, where: str) -> dict:
    if not isinstance(raw, dict):
        raise BundleError(f"{where} must be a table of settings, got {raw!r}")
    return raw


def _unknown_keys(table: dict, known: tuple[str, ...], section: str) -> list[IngestProblem]:
    """A problem row per key of ``table`` the toolkit does not read, with the key the user likely meant.

    ``section`` is how the user wrote the table (``[defaults]``, ``[hosts.orders-agg-0]``), or "" for the top.
    """
    problems = []
    for key, value in table.items():
        if key in known:
            continue
        where = f"in {section}" if section else f"at the top of {BUNDLE_TOML}"
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        if not section and key in HOST_KEYS:
            hint = "host settings go in [defaults] or [hosts.NAME]"
        elif section and key in TOP_KEYS:
            hint = f"{key} goes at the top of {BUNDLE_TOML}"
        elif section.startswith("[hosts.") and isinstance(value, dict):
            # TOML reads [hosts.a.b.c] as nested tables: a dotted host name (an FQDN) must be quoted.
            hint = f'a host name with dots needs quotes: [hosts."{_dotted(section[7:-1], key, value)}"]'
        elif close:
            hint = f"did you mean '{close[0]}'? Keys of {section or BUNDLE_TOML}: {', '.join(known)}"
        else:
            hint = f"keys of {section or BUNDLE_TOML}: {', '.join(known)}"
        problems.append(IngestProblem(BUNDLE_TOML, f"unknown key '{key}' {where}, ignored", hint))
    return problems


def _dotted(name: str, key: str, value: dict) -> str:
    """The dotted host name TOML split into nested tables (``orders-agg-0`` + ``pods`` + ``svc``)."""
    parts = [name, key]
    while len(value) == 1 and isinstance(next(iter(value.values())), dict):
        inner_key, value = next(iter(value.items()))
        parts.append(inner_key)
    return ".".join(parts)


def _host_settings(raw: dict, base: HostSettings, where: str) -> HostSettings:
    tz = _check_zone(str(raw.get("timezone", base.timezone)), where)
    offset = raw.get("clock_offset_ms", base.clock_offset_ms)
    if not isinstance(offset, int):
        raise BundleError(f"{where}: clock_offset_ms must be an integer number of milliseconds")
    day = raw.get("date", base.date)
    if day is not None:
        try:
            date.fromisoformat(str(day))
        except ValueError as exc:
            raise BundleError(f"{where}: date must look like 2026-03-07, got {day!r}") from exc
        day = str(day)
    return HostSettings(timezone=tz, clock_offset_ms=offset, date=day)


def read_bundle_toml(path: Path, default_timezone: str | None = None) -> dict:
    """Parse and validate ``bundle.toml``; returns hosts/defaults/app_id/notes and problems.

    A value the toolkit cannot use (an unknown zone, an offset that is no integer, a value of the wrong type for the
    JSON Schema ``toolkit/resources/schemas/bundle.schema.json``) stops with a :class:`BundleError`; a key it does not know is a problem row (``problems``) and is ignored.

    ``default_timezone`` (``--timezone``) is the zone of hosts the file gives none: a ``[hosts.NAME]``
    timezone wins, then ``[defaults] timezone``, then it, then UTC. The file describes its own evidence;
    the command line only fills what it leaves open.
    """
    base = HostSettings(timezone=_check_zone(default_timezone, "--timezone") if default_timezone else "UTC")
    if not path.is_file():
        return {"defaults": base, "hosts": {}, "app_id": None, "notes": None, "problems": []}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BundleError(f"{path.name} is not valid TOML: {exc}") from exc
    problems = _unknown_keys(data, TOP_KEYS, "")
    raw_defaults = _table(data.get("defaults", {}), "bundle.toml [defaults]")
    problems += _unknown_keys(raw_defaults, HOST_KEYS, "[defaults]")
    defaults = _host_settings(raw_defaults, base, "bundle.toml [defaults]")
    hosts = {}
    for name, raw in _table(data.get("hosts", {}), "bundle.toml [hosts]").items():
        raw = _table(raw, f"bundle.toml [hosts.{name}]")
        problems += _unknown_keys(raw, HOST_KEYS, f"[hosts.{name}]")
        hosts[str(name)] = _host_settings(raw, defaults, f"bundle.toml [hosts.{name}]")
    shape = schema_problems(data, "bundle")  # what the checks above do not cover (app_id and notes are text...)
    if shape:
        raise BundleError(f"{BUNDLE_TOML}: " + "; ".join(shape))
    return {"defaults": defaults, "hosts": hosts, "app_id": data.get("app_id"), "notes": data.get("notes"),
            "problems": problems}


def _plain_name(name: str) -> str:
    """A host name without case and separators: how two spellings of one host are recognised."""
    return re.sub(r"[-_.]", "", name.casefold())


def unmatched_host_sections(sections: Iterable[str], hosts: Iterable[str]) -> list[IngestProblem]:
    """A problem row per ``[hosts.NAME]`` section of ``bundle.toml`` that names none of ``hosts`` (the hosts
    of the bundle's files, line prefixes and state evidence): its settings were applied to nothing.

    Names match exactly, case included (a pod ``podZ`` is not ``[hosts.podz]``); a host spelled the same
    but for case or separators is offered as the one meant. Hosts are only known once the lines are read
    (a line prefix names its own), so this runs after parsing.
    """
    found = sorted(set(hosts))
    problems = []
    for name in sorted(set(sections) - set(found)):
        meant = [h for h in found if _plain_name(h) == _plain_name(name)]
        shown = ", ".join(found[:SHOWN_HOSTS]) + (f" and {len(found) - SHOWN_HOSTS} more" if len(found) > SHOWN_HOSTS else "")
        detail = "host names match exactly, case included: " + (
            f"did you mean [hosts.{meant[0]}]? " if meant else "") + f"Hosts: {shown or 'none'}"
        problems.append(IngestProblem(BUNDLE_TOML, f"[hosts.{name}] matches no host of the bundle, its settings "
                                                   f"are not applied", detail))
    return problems



#: Folder names that hold several hosts' files rather than name a host (``incident/logs/<pod>/app.log``,
#: ``incident/state/<pod>/...``): never taken for a host, their sub-folders are.
CONTAINER_FOLDER_NAMES = frozenset({
    "logs", "log", "pods", "pod-logs", "state", "states", "state-dirs", "captures", "capture", "k8s", "kubernetes",
    "nodes", "hosts", "containers", "evidence",
})


def is_container_name(name: str) -> bool:
    """True for a generic folder name such as ``logs`` or ``pods`` (:data:`CONTAINER_FOLDER_NAMES`)."""
    return name.lower() in CONTAINER_FOLDER_NAMES


def attribute_host(rel: PurePosixPath, known_hosts: Iterable[str], inherited: str | None,
                   containers: Iterable[str] = ()) -> str:
    """A file's host: a known host folder on its path, the host of the archive holding it, its first folder that
    is not a container of hosts, a pod name in its file name, else ``unknown-host``.

    A leading folder is a container of hosts, and is passed over, when its name is generic
    (:data:`CONTAINER_FOLDER_NAMES`) or it is one of ``containers``: the top folders found to hold several
    pod-named folders (:func:`toolkit.bundle.discovery.host_containers`).
    """
    known = _known_folder(rel, known_hosts)
    if known:
        return known
    if inherited:
        return inherited
    return host_folder(rel, (), containers) or host_from_file_name(rel.name) or "unknown-host"


def _known_folder(rel: PurePosixPath, known_hosts: Iterable[str]) -> str | None:
    known = set(known_hosts)
    return next((part for part in rel.parts[:-1] if part in known), None)


def host_folder(rel: PurePosixPath, known_hosts: Iterable[str], containers: Iterable[str] = ()) -> str | None:
    """The folder on ``rel``'s path that names its host: a host of ``bundle.toml``, else the first folder that is
    not a container of hosts (see :func:`attribute_host`); None when no folder names one."""
    known = _known_folder(rel, known_hosts)
    if known:
        return known
    folders = rel.parts[:-1]
    skip = 0
    while skip < len(folders) and (is_container_name(folders[skip]) or (skip == 0 and folders[0] in containers)):
        skip += 1
    return folders[skip] if skip < len(folders) else None
