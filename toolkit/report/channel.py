"""What ``stream-incident report`` and the report notebook's kernel tell each other.

The command runs the notebook in another process (a Jupyter kernel, through papermill). Everything the two
exchange goes through one typed pair, never through environment variables or exception class names:

* in: :class:`KernelChannel`, one notebook parameter (``command_channel``) naming a folder for the kernel's
  stage lines and its outcome, and whether the engine's own log is shown (``--verbose``);
* out: :class:`KernelOutcome`, written by the kernel to ``outcome.json`` in that folder: whether the analysis
  finished, the exit code a failure means (2 unusable input, 3 no Spark, 1 anything else), its one-sentence
  message, and the bundle's ingest status (``empty`` when it held nothing to read).

The analysis writes ``findings.json`` itself (the report's artefact); the outcome says what the command needs
to end with the right words and exit code.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

from toolkit.progress import Progress, file_progress

#: File names inside the channel's folder.
PROGRESS_FILE = "progress.txt"
OUTCOME_FILE = "outcome.json"

#: Exit codes, as every ``stream-incident`` command uses them.
EXIT_FAILED, EXIT_USAGE, EXIT_SPARK = 1, 2, 3


class ChannelError(ValueError):
    """The ``command_channel`` parameter is not one the report command writes."""


def exit_code_of(exc: BaseException) -> int:
    """The exit code an exception raised in the kernel means: unusable input 2, no Spark 3, else 1."""
    from toolkit.bundle import BundleError
    from toolkit.report.errors import ParameterError
    from toolkit.spark import SparkUnavailable

    if isinstance(exc, (BundleError, ParameterError)):
        return EXIT_USAGE
    if isinstance(exc, SparkUnavailable):
        return EXIT_SPARK
    return EXIT_FAILED


@dataclass(frozen=True)
class KernelOutcome:
    """How the kernel's analysis ended (``outcome.json``)."""

    #: ``analysed``: the analysis ran and wrote ``findings.json``; ``failed``: it stopped with ``message``
    status: str
    exit_code: int = 0
    message: str | None = None
    #: the bundle's ingest status (``ok``, ``partial``, ``empty``...) and its sentence, when analysed
    ingest_status: str | None = None
    ingest_message: str | None = None

    @classmethod
    def failure(cls, exc: BaseException) -> "KernelOutcome":
        """The outcome of an analysis that raised ``exc``."""
        return cls(status="failed", exit_code=exit_code_of(exc), message=str(exc) or type(exc).__name__)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "KernelOutcome":
        return cls(**{name: data.get(name) for name in cls.__dataclass_fields__ if name in data})


@dataclass(frozen=True)
class KernelChannel:
    """The report command's side of a kernel run: where stage lines and the outcome go, and the verbosity."""

    folder: Path
    verbose: bool = False

    @property
    def progress_file(self) -> Path:
        return self.folder / PROGRESS_FILE

    @property
    def outcome_file(self) -> Path:
        return self.folder / OUTCOME_FILE

    def to_parameter(self) -> dict[str, Any]:
        """The notebook parameter ``command_channel`` (plain JSON values, as papermill injects them)."""
        return {"folder": str(self.folder), "verbose": self.verbose}

    @classmethod
    def from_parameter(cls, value: Any) -> "KernelChannel | None":
        """The channel a notebook was given (None when it runs on its own, as in JupyterLab)."""
        if value in (None, "", {}):
            return None
        if not isinstance(value, dict) or not isinstance(value.get("folder"), str) \
                or not isinstance(value.get("verbose", False), bool):
            raise ChannelError(f"command_channel is set by `stream-incident report` and must stay None when the "
                               f"notebook is run by hand, not {value!r}.")
        return cls(folder=Path(value["folder"]), verbose=value.get("verbose", False))

    def progress(self) -> Progress:
        """The kernel's progress callback: one stage line per line of the progress file."""
        return file_progress(self.progress_file)

    def write(self, outcome: KernelOutcome) -> None:
        """Publish the kernel's outcome (written whole, then renamed: the command never reads half of it)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = self.outcome_file.with_suffix(".partial")
        partial.write_text(json.dumps(outcome.to_json(), indent=2) + "\n", encoding="utf-8")
        partial.replace(self.outcome_file)

    def read(self) -> KernelOutcome | None:
        """The kernel's outcome, or None when it wrote none (it failed before or after the analysis)."""
        try:
            return KernelOutcome.from_json(json.loads(self.outcome_file.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    def clear(self) -> None:
        """Forget an earlier run's outcome before a new kernel starts."""
        self.outcome_file.unlink(missing_ok=True)

    @contextlib.contextmanager
    def reporting_failures(self) -> Iterator[None]:
        """Inside the kernel: an exception raised in the block is written as the outcome, then re-raised."""
        try:
            yield
        except Exception as exc:
            self.write(KernelOutcome.failure(exc))
            raise


@contextlib.contextmanager
def failures_reported(channel: KernelChannel | None) -> Iterator[None]:
    """:meth:`KernelChannel.reporting_failures` when there is a channel; nothing otherwise."""
    if channel is None:
        yield
        return
    with channel.reporting_failures():
        yield
