"""Tiny ranking data and models shared by the RankingTask tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from nnx import Devices, NNModel, NNModelParams, NNOptimParams, NNParams, NNTrainParams
from nnx.ranking import RankingTask

FEATURES = 3


def queries(n_queries: int = 6, per: int = 4, seed: int = 0) -> list[tuple[Any, ...]]:
    """One batch per query: the first feature decides the grade (0..2), so a scorer can
    learn it; candidate ids are strings, query ids integers."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for q in range(n_queries):
        x = torch.randn(per, FEATURES, generator=g)
        grades = (x[:, 0] > 0).long() + (x[:, 0] > 1).long()
        out.append((x, [q] * per, [f"c{i}" for i in range(per)], grades))
    return out


def model(task: RankingTask, seed: int = 0) -> NNModel:
    torch.manual_seed(seed)
    return NNModel(net_params=NNParams(input_dim=FEATURES, output_dim=1, hidden_dims=(8,)),
                   params=NNModelParams(device=Devices.CPU), task=task)


def plan(train: Any, n_epochs: int = 1, **kwargs: Any) -> NNTrainParams:
    optim = NNOptimParams.builder().sgd(max_lr=0.1).build()
    return NNTrainParams(n_epochs=n_epochs, train_loader=train, optim=optim, scheduler=None,
                         seed=0, **kwargs)


def weights(m: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in m.net.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()} if root.exists() else {}
