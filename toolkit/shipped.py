"""Where the notebooks and playbooks are on this machine, and the user's cache folder.

They live at the repository root (users open them there); a built wheel carries copies under
``toolkit/notebooks`` and ``toolkit/playbooks`` (``setup.py`` puts them there). :func:`shipped_file` is the
one lookup: the installed copy first, the repository root for a source checkout or an editable install.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

#: The ``toolkit`` package folder.
PACKAGE_DIR = Path(__file__).resolve().parent
#: The folder that holds the ``toolkit`` package: the repository in a checkout, ``site-packages`` when installed.
IMPORT_ROOT = PACKAGE_DIR.parent
#: Root folders whose files ship with the package.
SHIPPED_FOLDERS = ("notebooks", "playbooks")


#: Values that turn an on/off environment switch off (compared case-insensitively, blanks ignored).
OFF_WORDS = ("", "0", "off", "false", "no")


def env_switch(name: str, default: bool) -> bool:
    """The on/off environment variable ``name``: ``default`` when unset; off for one of :data:`OFF_WORDS`,
    on for any other value (``1``, ``on``, ``yes``...)."""
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() not in OFF_WORDS


def shipped_file(relative: str | PurePosixPath) -> Path:
    """Local path of ``notebooks/<name>`` or ``playbooks/<name>`` (as findings and docs name them).

    The copy installed inside the package wins; then the repository root. When neither exists the installed
    location is returned, so a message about the missing file names where it was expected.
    Raises ValueError for a path outside those folders.
    """
    rel = PurePosixPath(relative)
    if rel.is_absolute() or ".." in rel.parts or len(rel.parts) < 2 or rel.parts[0] not in SHIPPED_FOLDERS:
        raise ValueError(f"{relative!s} is not a file under {' or '.join(SHIPPED_FOLDERS)}/")
    installed = PACKAGE_DIR.joinpath(*rel.parts)
    if installed.exists():
        return installed
    checkout = IMPORT_ROOT.joinpath(*rel.parts)
    return checkout if checkout.exists() else installed


def notebook_file(name: str) -> Path:
    """``notebook_file("incident_report.ipynb")``: see :func:`shipped_file`."""
    return shipped_file(PurePosixPath("notebooks", name))


def playbook_file(name: str) -> Path:
    """``playbook_file("capturing-state.md")``: see :func:`shipped_file`."""
    return shipped_file(PurePosixPath("playbooks", name))


def default_cache_dir() -> Path:
    """``$STREAM_INCIDENT_CACHE``, else ``$XDG_CACHE_HOME/stream-incident``, else ``~/.cache/stream-incident``."""
    explicit = os.environ.get("STREAM_INCIDENT_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stream-incident"
