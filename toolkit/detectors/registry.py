"""Which detectors exist: the built-in detector modules, imported on first use, and the registry they fill.

A detector registers itself with :func:`toolkit.detectors.base.detector` when its module is imported; this
module only knows which modules those are, so asking for the detectors never imports more than once.
"""

from __future__ import annotations

import importlib

from toolkit.detectors.base import REGISTRY, DetectorSpec

#: Modules that register the built-in detectors (imported on first use).
DETECTOR_MODULES: tuple[str, ...] = (
    "eos_stale_restore_checkpoint",
    "standby_lock_stale_checkpoint",
    "restore_skipped_after_reassignment",
    "alos_crash_reprocessing",
    "kinesis_checkpoint_migration_loss",
    "rebalance_storm",
    "lock_contention",
    "restore_from_scratch",
    "eos_task_corruption_wipe",
    "unclean_shutdown",
    "cleaner_races_assignment",
    "eos_checkpoint_stale_during_running",
)
#: NiFi repository and component-state detectors.
DETECTOR_MODULES += ("nifi_component_state_reset", "nifi_flowfile_repo_not_restored", "nifi_checkpoints_stopped")

#: The package the modules of :data:`DETECTOR_MODULES` live in.
PACKAGE = "toolkit.detectors"


def _load_builtin() -> None:
    for name in DETECTOR_MODULES:
        importlib.import_module(f"{PACKAGE}.{name}")


def registered_detectors() -> dict[str, DetectorSpec]:
    """Every registered detector by id (the built-in ones are imported on first call)."""
    _load_builtin()
    return dict(sorted(REGISTRY.items()))
