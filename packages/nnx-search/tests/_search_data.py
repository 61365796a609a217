"""Tiny plans for the search tests: a FeedFwd classifier on 48 rows, 3 batches an epoch."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx import Devices, MonitorSpec, NNModelParams, NNOptimParams, NNParams, NNTrainParams
from nnx.extend import ExperimentPlan

X = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
Y = (X[:, 0] + X[:, 1] > 0).long()
MONITOR = MonitorSpec(metric="loss")


def train_loader() -> DataLoader:
    return DataLoader(TensorDataset(X[:48], Y[:48]), batch_size=16)


def val_loader() -> DataLoader:
    return DataLoader(TensorDataset(X[48:], Y[48:]), batch_size=16)


def make_plan(epochs: int = 2, monitor: MonitorSpec | None = MONITOR) -> ExperimentPlan:
    net = NNParams(input_dim=4, output_dim=2, hidden_dims=(8,))
    train = NNTrainParams(n_epochs=epochs, optim=NNOptimParams.builder().sgd(max_lr=0.1).build(),
                          scheduler=None, monitor=monitor)
    return (ExperimentPlan(model=NNModelParams(device=Devices.CPU), train=train, net=net, seed=0)
            .with_data(train_loader, val=val_loader, identity="toy-v1"))


def with_lr(plan: ExperimentPlan, params: dict[str, Any]) -> ExperimentPlan:
    return plan.with_optim(NNOptimParams.builder().sgd(max_lr=params["lr"]).build())
