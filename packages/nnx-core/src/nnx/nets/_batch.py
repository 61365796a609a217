"""How a built-in net splits a data-loader batch into model inputs and targets."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

__all__ = ["XYBatch"]


class XYBatch:
    """Mixin for nets fed ``(X, Y)`` batches (or a bare ``X`` at inference)."""

    def unpack_batch(
        self, batch: Tensor | Sequence[Tensor]
    ) -> tuple[tuple[Tensor, ...], Tensor | None]:
        """Return ``((X,), Y)``; the inputs are a tuple so callers can ``net(*inputs)``."""
        if isinstance(batch, Tensor):
            return (batch,), None
        if isinstance(batch, (tuple, list)) and len(batch) in (1, 2):
            target = batch[1] if len(batch) == 2 else None
            return (batch[0],), target
        raise ValueError(
            f"{type(self).__name__} expects a batch of X or (X, Y); got "
            f"{type(batch).__name__}"
            + (f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else "")
        )
