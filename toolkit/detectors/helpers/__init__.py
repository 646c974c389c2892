"""Helpers detectors share, one module per subject.

* :mod:`~toolkit.detectors.helpers.frames` -- bounded reads of the timeline, results shared within a run;
* :mod:`~toolkit.detectors.helpers.values` -- collected values: Spark's order, epoch numbers, printing;
* :mod:`~toolkit.detectors.helpers.citing` -- evidence references and the evidence still to collect;
* :mod:`~toolkit.detectors.helpers.runs` -- process runs: versions, guarantee, state updater;
* :mod:`~toolkit.detectors.helpers.versions` -- what a version says: known bugs, changed defaults;
* :mod:`~toolkit.detectors.helpers.captures` -- changelog checkpoints of state captures;
* :mod:`~toolkit.detectors.helpers.streams` -- input rates and the streams protocol's task losses.

:mod:`toolkit.detectors.common` re-exports them all, the one import line a detector module needs.
"""
