"""Build hook: the notebooks and playbooks at the repository root travel inside the wheel.

Users open ``notebooks/`` and ``playbooks/`` where they are; an installed package finds its copies under
``toolkit/notebooks`` and ``toolkit/playbooks`` (see :mod:`toolkit.shipped`). Everything else is in
``pyproject.toml``.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
#: Root folder -> the file patterns of it that ship inside the package.
SHIPPED = {"notebooks": ("*.ipynb",), "playbooks": ("*.md",)}


class BuildWithShippedFiles(build_py):
    """``build_py`` that also copies the root notebooks and playbooks into ``toolkit/``."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return  # an editable install reads them from the repository root
        for folder, patterns in SHIPPED.items():
            target = Path(self.build_lib) / "toolkit" / folder
            self.mkpath(str(target))
            for pattern in patterns:
                for source in sorted((ROOT / folder).glob(pattern)):
                    self.copy_file(str(source), str(target / source.name))


setup(cmdclass={"build_py": BuildWithShippedFiles})
