"""Tiny models, data and snapshots shared by the SimCLR / Mixup / CutMix / MoE tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from nnx import (
    Devices,
    Losses,
    Nets,
    NNModel,
    NNModelParams,
    NNMoEParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
)


def classifier(seed: int = 0, loss: Losses = Losses.CROSS_ENTROPY, **params: Any) -> NNModel:
    torch.manual_seed(seed)
    return NNModel(net_params=NNParams(input_dim=3, output_dim=4, hidden_dims=(6,)),
                   params=NNModelParams(device=Devices.CPU, loss=loss, **params))


def moe_classifier(seed: int = 0, loss: Losses = Losses.CROSS_ENTROPY, **params: Any) -> NNModel:
    torch.manual_seed(seed)
    net = NNMoEParams(input_dim=3, output_dim=4, hidden_dims=(6, 5), num_experts=3, top_k=2)
    return NNModel(net_params=net, params=NNModelParams(device=Devices.CPU, loss=loss,
                                                          net=Nets.MOE, **params))


class TinyConv(nn.Module):
    """(B, 2, 4, 4) images → 3 logits."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.head = nn.Linear(3 * 16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)).flatten(1))


def image_classifier(seed: int = 0, loss: Losses = Losses.CROSS_ENTROPY,
                     **params: Any) -> NNModel:
    torch.manual_seed(seed)
    return NNModel(module=TinyConv(), params=NNModelParams(device=Devices.CPU, loss=loss,
                                                           **params))


def rows(n_batches: int = 2, size: int = 6, seed: int = 1, classes: int = 4
         ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(size, 3, generator=g), torch.randint(classes, (size,), generator=g))
            for _ in range(n_batches)]


def images(n_batches: int = 2, size: int = 5, seed: int = 2
           ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(size, 2, 4, 4, generator=g), torch.randint(3, (size,), generator=g))
            for _ in range(n_batches)]


def sgd(lr: float = 0.1) -> NNOptimParams:
    return NNOptimParams.builder().sgd(max_lr=lr).build()


def plan(loader: list[Any], n_epochs: int = 1, **kwargs: Any) -> NNTrainParams:
    return NNTrainParams(n_epochs=n_epochs, train_loader=loader,
                         optim=kwargs.pop("optim", sgd()), seed=0, **kwargs)


def weights(model: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.net.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def grad_flags(model: NNModel) -> dict[str, tuple[bool, int]]:
    """Each parameter's requires_grad and identity, and (under "") the net's modules'
    identities: a refusal must leave all of them as they were."""
    flags: dict[str, tuple[bool, int]] = {
        n: (p.requires_grad, id(p)) for n, p in model.net.named_parameters()}
    flags[""] = (True, hash(tuple(id(m) for m in model.net.modules())))
    return flags


def files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def sgd_step(net: nn.Module, loss: torch.Tensor, lr: float = 0.1) -> None:
    """One plain-autograd SGD step (the reference the NNx runs are compared with)."""
    net.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in net.parameters():
            if p.grad is not None:
                p -= lr * p.grad
