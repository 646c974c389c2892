"""Bundle settings (``bundle.toml``) and which host each file belongs to."""

from __future__ import annotations

import tomllib
from datetime import date
from pathlib import Path, PurePosixPath
from typing import Iterable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from toolkit.bundle.model import BundleError, HostSettings
from toolkit.bundle.files import host_from_file_name


def _check_zone(name: str, where: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise BundleError(f"{where}: unknown time zone {name!r}") from exc
    return name


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
    """Parse and validate ``bundle.toml``; returns hosts/defaults/app_id/notes."""
    base = HostSettings(timezone=_check_zone(default_timezone, "--timezone") if default_timezone else "UTC")
    if not path.is_file():
        return {"defaults": base, "hosts": {}, "app_id": None, "notes": None}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BundleError(f"{path.name} is not valid TOML: {exc}") from exc
    defaults = _host_settings(data.get("defaults", {}), base, "bundle.toml [defaults]")
    if default_timezone:  # an explicit command-line zone wins over the file's default
        defaults = HostSettings(default_timezone, defaults.clock_offset_ms, defaults.date)
    hosts = {
        str(name): _host_settings(raw or {}, defaults, f"bundle.toml [hosts.{name}]")
        for name, raw in (data.get("hosts") or {}).items()
    }
    return {"defaults": defaults, "hosts": hosts, "app_id": data.get("app_id"), "notes": data.get("notes")}



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
