"""``GraphPool``: node rows to graph rows, each graph over its own nodes only (spec §25).

``"sum"`` adds a graph's node rows, ``"mean"`` divides that by its node count. Both are
graph-local (a row only ever reaches its own graph's output) and invariant to the order
of a graph's nodes (a sum does not depend on the order of its terms, up to rounding).
"""

from __future__ import annotations

import torch
from torch import nn

from nnx.extend import check_choice

__all__ = ["POOLS", "GraphPool"]

#: The pooling modes.
POOLS = ("mean", "sum")


class GraphPool(nn.Module):
    """``forward(h (N, D), batch (N,), num_graphs) -> (num_graphs, D)``."""

    def __init__(self, mode: str = "mean") -> None:
        super().__init__()
        self.mode = check_choice("GraphPool.mode", mode, POOLS)

    def forward(self, h: torch.Tensor, batch: torch.Tensor, num_graphs: int) -> torch.Tensor:
        out = h.new_zeros((num_graphs, h.shape[1])).index_add_(0, batch, h)
        if self.mode == "mean":
            counts = torch.bincount(batch, minlength=num_graphs).clamp_min(1)
            out = out / counts.to(h.dtype).unsqueeze(1)
        return out

    def extra_repr(self) -> str:
        return f"mode={self.mode!r}"
