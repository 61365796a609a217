"""Tiny models, data and snapshots shared by nnx-diffusion's tests."""

from __future__ import annotations

from pathlib import Path

import torch

from nnx import Devices, Losses, NNModel, NNModelParams, NNOptimParams, NNTrainParams
from nnx.diffusion import DiffusionMLP


def tiny_model(seed: int = 0, **model_params: object) -> NNModel:
    torch.manual_seed(seed)
    params = NNModelParams(device=Devices.CPU, loss=Losses.MEAN_SQUARED_ERROR,
                           **model_params)  # type: ignore[arg-type]
    return NNModel(module=DiffusionMLP(input_dim=2, hidden_dims=[8], time_embed_dim=4),
                   params=params)


def points(n_batches: int = 3, size: int = 4, seed: int = 1) -> list[tuple[torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(size, 2, generator=g),) for _ in range(n_batches)]


def sgd(lr: float = 0.1, accumulate: int = 1) -> NNOptimParams:
    return NNOptimParams.builder().sgd(max_lr=lr).accumulate_grad(accumulate).build()


def plan(loader: list, n_epochs: int = 1, **kwargs: object) -> NNTrainParams:
    return NNTrainParams(n_epochs=n_epochs, train_loader=loader,
                         optim=kwargs.pop("optim", sgd()), seed=0, **kwargs)  # type: ignore


def weights(model: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.net.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
