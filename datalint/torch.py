"""Training with a quarantine list: samplers that never yield a quarantined sample, and a guard.

The three-line change to a training script::

    from datalint.torch import GuardedDataset, QuarantineSampler
    sampler = QuarantineSampler(train_ds, "out/quarantine.json", shuffle=True)
    loader = DataLoader(GuardedDataset(train_ds, record="out/scan.db"), batch_size=64, sampler=sampler)

(`datalint docs training` has the whole story: samplers, the filter, staleness, the guard.)

This module is the public face only: it checks that the [torch] extra is installed and re-exports
the names defined in `datalint.training` (samplers and filter in `samplers`, the guard in `guard`).
"""

from __future__ import annotations

try:
    # Imported first, so that a missing part of the [torch] extra is named before anything else loads.
    import numpy  # noqa: F401
    import torch  # noqa: F401
except ModuleNotFoundError:
    from datalint.extras import missing_extra_error

    # One line naming the extra and its install command, instead of a bare "No module named torch".
    _missing = missing_extra_error("torch", "`import datalint.torch`")
    if _missing is not None:
        raise _missing from None
    raise

from datalint.training.fit import StaleQuarantineError, StaleQuarantineWarning
from datalint.training.guard import GuardedDataset, GuardTrippedError, SkippedSample, guarded_collate
from datalint.training.quarantine import Quarantine, QuarantineFormatError, load_quarantine
from datalint.training.samplers import (
    DistributedQuarantineSampler,
    QuarantineFilter,
    QuarantineSampler,
    quarantine_filter,
)

__all__ = [
    "DistributedQuarantineSampler",
    "GuardTrippedError",
    "GuardedDataset",
    "Quarantine",
    "QuarantineFilter",
    "QuarantineFormatError",
    "QuarantineSampler",
    "SkippedSample",
    "StaleQuarantineError",
    "StaleQuarantineWarning",
    "guarded_collate",
    "load_quarantine",
    "quarantine_filter",
]
