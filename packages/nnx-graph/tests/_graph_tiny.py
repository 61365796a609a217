"""A generated two-community graph shared by the node-classification tests."""

from __future__ import annotations

from typing import Any

import torch

from nnx import Callback
from nnx.graph import NNGraphDataset

N, F = 90, 8


def two_communities(seed: int = 0) -> NNGraphDataset:
    """Nodes alternate between two communities: dense inside (p 0.3), sparse across
    (p 0.01), undirected; features are noise shifted weakly by the community; 30 / 30 /
    30 nodes in train / val / test."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(N) % 2
    p = torch.where(y[:, None] == y[None, :], 0.3, 0.01)
    upper = torch.triu(torch.rand(N, N, generator=g) < p, 1)
    src, dst = (upper | upper.T).nonzero(as_tuple=True)
    x = torch.randn(N, F, generator=g) + 0.5 * (2 * y[:, None].float() - 1)
    order = torch.randperm(N, generator=g)
    masks = []
    for part in order.chunk(3):
        mask = torch.zeros(N, dtype=torch.bool)
        mask[part] = True
        masks.append(mask)
    return NNGraphDataset(x, torch.stack([src, dst]), y, train_mask=masks[0],
                          val_mask=masks[1], test_mask=masks[2])


class StopAfterTwo(Callback):
    """Stops a run after its second epoch: the first half of a run split at an epoch."""

    def on_epoch_end(self, ctx: Any) -> None:
        if ctx.epoch == 1:
            ctx.should_stop = True
