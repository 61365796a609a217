"""Reproducible splits (spec §13.3): group, chronological, stratified and explicit plans.

:func:`plan_split` decides which sample ids train, validate and test from the
ids and their groups, times or labels alone (seeded by SHA-256, never by a
global RNG) and returns a :class:`SplitManifest`: JSON ``nnx.split/1`` that
reloads equal, identified by ``digest()``, resolved against a source with
``resolve`` and re-planned with ``replay``. Every refusal is a :class:`SplitError`.
"""

from nnx.data_splits._ids import SplitError
from nnx.data_splits.manifest import FORMAT, SplitManifest
from nnx.data_splits.plan import plan_split
from nnx.datasets._split import SplitIndices

__all__ = ["FORMAT", "SplitError", "SplitIndices", "SplitManifest", "plan_split"]
