"""Tiny models and data shared by the distillation tests (kd, feature-KD, Born-Again,
offline distillation)."""

from __future__ import annotations

from pathlib import Path

import torch

from nnx import Devices, Losses, NNModel, NNModelParams, NNOptimParams, NNParams, NNTrainParams


def classifier(seed: int = 0, hidden: tuple[int, ...] = (6,), loss: Losses = Losses.CROSS_ENTROPY,
               **model_params: object) -> NNModel:
    torch.manual_seed(seed)
    params = NNModelParams(device=Devices.CPU, loss=loss, **model_params)  # type: ignore[arg-type]
    return NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=hidden),
                   params=params)


def batches(n: int = 3, size: int = 5, seed: int = 1) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(size, 4, generator=g), torch.randint(0, 3, (size,), generator=g))
            for _ in range(n)]


def sgd(lr: float = 0.1, accumulate: int = 1) -> NNOptimParams:
    return NNOptimParams.builder().sgd(max_lr=lr).accumulate_grad(accumulate).build()


def plan(loader: object, n_epochs: int = 1, **kwargs: object) -> NNTrainParams:
    return NNTrainParams(n_epochs=n_epochs, train_loader=loader,
                         optim=kwargs.pop("optim", sgd()), seed=0, **kwargs)  # type: ignore


def weights(model: object) -> dict[str, torch.Tensor]:
    net = getattr(model, "net", model)
    return {k: v.detach().clone() for k, v in net.state_dict().items()}  # type: ignore


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()} if root.exists() else {}
