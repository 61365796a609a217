"""Inputs that number their own rows: the sample ids of graph seed rows (spec §3.1).

A batch's inputs may know which sample each output row is, where the row's position
does not: a graph batch scores its seed nodes, whose ids are global node indices
(nnx-graph's ``GraphInputs``). Such an inputs object has ``sample_ids()``; the built-in
tasks' ``sample_ids`` hook (the Task protocol's) reads it, so ``predict_proba`` and
``iter_predict`` report those ids for any net and task kind, through concatenation.
A batch source may answer for all its rows the same way (nnx-graph's sampled loader:
the ids of the pass ``predict_proba`` just ran).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch

__all__ = ["IdentifiedInputs", "batch_row_ids"]


@runtime_checkable
class IdentifiedInputs(Protocol):
    """A batch's model inputs that name the sample of each output row."""

    def sample_ids(self) -> torch.Tensor:
        """One integer id per output row, in row order."""
        ...


def _of_batch(batch: Any) -> torch.Tensor | None:
    if isinstance(batch, IdentifiedInputs):
        return batch.sample_ids()
    if isinstance(batch, (tuple, list)) and batch and isinstance(batch[0], IdentifiedInputs):
        return batch[0].sample_ids()  # (inputs, target)
    return None


def batch_row_ids(data: Any) -> torch.Tensor | None:
    """The ids the inputs of ``data`` give their rows: ``data`` one batch, or a list /
    tuple of batches whose every inputs are identified; None otherwise (positions)."""
    ids = _of_batch(data)
    if ids is not None:
        return ids
    if isinstance(data, (list, tuple)) and data:
        parts = [_of_batch(batch) for batch in data]
        if all(part is not None for part in parts):
            return torch.cat([p.reshape(-1).cpu() for p in parts if p is not None])
    return None
