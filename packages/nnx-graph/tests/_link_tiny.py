"""A generated graph and a tiny link net shared by the nnx.link_tasks tests."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from nnx import Callback, Devices, NNModel, NNModelParams, NNOptimParams, NNTrainParams
from nnx.link_tasks import LinkSplit, LinkTask, split_links

N, F = 40, 6


def graph(seed: int = 0, n: int = N, edges: int = 160) -> tuple[torch.Tensor, torch.Tensor]:
    """Random edges (duplicates, reverses and self-loops included) and node features."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, n, (2, edges), generator=g), torch.randn(n, F, generator=g)


class DotNet(nn.Module):
    """``net(x, edge_index, edge_label_index) -> logits``: one sum-aggregation layer and a
    dot-product decoder (or a linear head over the pair for edge-label splits). In training
    mode it records every candidate set it scores, so a test can compare what two runs drew."""

    def __init__(self, categories: int = 0, hidden: int = 8) -> None:
        super().__init__()
        self.lin = nn.Linear(F, hidden)
        self.head = nn.Linear(hidden, categories) if categories else None
        self.seen: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor,
                edge_label_index: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.seen.append(edge_label_index.clone())
        z = self.lin(x)
        z = z + torch.zeros_like(z).index_add_(0, edge_index[1], z[edge_index[0]])
        pair = z[edge_label_index[0]] * z[edge_label_index[1]]
        return pair.sum(-1) if self.head is None else self.head(pair)


def model(task: LinkTask, seed: int = 0, categories: int = 0) -> NNModel:
    torch.manual_seed(seed)
    return NNModel(module=DotNet(categories), params=NNModelParams(device=Devices.CPU),
                   task=task)


def plan(task: LinkTask, x: torch.Tensor, n_epochs: int = 1, val: bool = False,
         **kwargs: Any) -> NNTrainParams:
    optim = NNOptimParams.builder().sgd(max_lr=0.01).build()
    return NNTrainParams(n_epochs=n_epochs, train_loader=task.loader("train", x, 32),
                         val_loader=task.loader("val", x, 16) if val else None, optim=optim,
                         scheduler=None, seed=0, **kwargs)


def a_split(seed: int = 0, **kwargs: Any) -> tuple[LinkSplit, torch.Tensor, torch.Tensor]:
    edge_index, x = graph()
    return split_links(edge_index, N, val=0.15, test=0.15, seed=seed, **kwargs), edge_index, x


class StopAfterTwo(Callback):
    """Stops a run after its second epoch: the first half of a run split at an epoch."""

    def on_epoch_end(self, ctx: Any) -> None:
        if ctx.epoch == 1:
            ctx.should_stop = True


def weights(m: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in m.net.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
