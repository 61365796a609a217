"""Tiny FeedFwd runs trained with provenance, for the run-reading tests."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx import Devices, MonitorSpec, NNModel, NNModelParams, NNOptimParams, NNParams, NNTrainParams
from nnx.provenance import ExperimentManifest

X = torch.randn(48, 4, generator=torch.Generator().manual_seed(0))
Y = (X[:, 0] + X[:, 1] > 0).long()


def loaders() -> tuple[DataLoader, DataLoader]:
    return (DataLoader(TensorDataset(X[:32], Y[:32]), batch_size=16),
            DataLoader(TensorDataset(X[32:], Y[32:]), batch_size=16))


def train(root: Any, *, seed: int, width: int = 8, epochs: int = 2, provenance: bool = True,
          data: str = "toy-v1", device: Devices = Devices.CPU,
          params: dict[str, Any] | None = None, **fit: Any):
    """Train one run under ``root`` (``params`` go to NNTrainParams, ``fit`` to
    ``model.train``); returns the NNRun."""
    train_loader, val_loader = loaders()
    model = NNModel(NNParams(input_dim=4, output_dim=2, hidden_dims=(width,)),
                    NNModelParams(device=device))
    train_params = NNTrainParams(n_epochs=epochs, seed=seed, monitor=MonitorSpec(metric="loss"),
                           optim=NNOptimParams.builder().sgd(max_lr=0.1).build(),
                           scheduler=None, train_loader=train_loader, val_loader=val_loader,
                           **(params or {}))
    manifest = (ExperimentManifest.for_model(model, train=train_params, data={"train": data},
                                             splits={"val": "val-v1"})
                if provenance else None)
    if provenance:
        fit["provenance"] = manifest
    return model.train(params=train_params, verbose=False, root=root, **fit)
