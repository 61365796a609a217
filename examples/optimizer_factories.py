"""A registered optimizer factory beside a built-in AdamW in one Trainer run (spec §3.1, §8.1).

``Lion`` is not shipped by NNx: it joins the run as a registered factory
(``register_optimizer_factory("example.lion", 1, ...)``) and owns the encoder,
while a built-in AdamW owns the head. run.yaml stores only the factory's spec
(id, version, config), so reloading the run offline reads that spec back and
runs no factory code: it would work in a fresh interpreter where nothing is
registered.

    uv run python examples/optimizer_factories.py
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from nnx import (
    Devices,
    Losses,
    NNModel,
    NNModelParams,
    NNOptimFactoryParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNRun,
    NNTrainerParams,
    OptimizerFactorySpec,
    Trainer,
    register_optimizer_factory,
    supervised_objective,
)


class Lion(torch.optim.Optimizer):
    """Sign-based momentum (Chen et al. 2023) with decoupled weight decay."""

    def __init__(self, params: Any, lr: float = 1e-4, betas: tuple[float, float] = (0.9, 0.99),
                 weight_decay: float = 0.0) -> None:
        super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                exp_avg = state["exp_avg"]
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(exp_avg.mul(beta1).add(p.grad, alpha=1 - beta1).sign_(), alpha=-group["lr"])
                exp_avg.mul_(beta2).add_(p.grad, alpha=1 - beta2)
        return loss


FACTORY_CALLS: list[Mapping[str, Any]] = []


def lion(param_groups: list[dict[str, Any]], config: Mapping[str, Any]) -> Lion:
    """The factory: resolved groups (params, lr, weight_decay) + the read-only config."""
    FACTORY_CALLS.append(config)
    return Lion(param_groups, betas=tuple(config["betas"]))


class EncoderHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 16), nn.ReLU())
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


def batches(n_batches: int = 8, size: int = 32) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n_batches * size, 4, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    return [(x[i:i + size], y[i:i + size]) for i in range(0, len(x), size)]


def main() -> None:
    register_optimizer_factory("example.lion", 1, lion)
    encoder_lion = NNOptimFactoryParams(
        factory=OptimizerFactorySpec("example.lion", 1, {"betas": [0.9, 0.99]}),
        max_lr=1e-3, weight_decay=0.1,
        param_groups=[NNParamGroupSpec(name_pattern="encoder.*")])
    head_adamw = (NNOptimParams.builder().adamw(max_lr=1e-2)
                  .param_groups([NNParamGroupSpec(name_pattern="head.*")]).build())
    params = (NNTrainerParams.builder()
              .n_epochs(3)
              .train_loader(batches())
              .optimizer("encoder", encoder_lion)
              .optimizer("head", head_adamw)
              .seed(0)
              .build())

    torch.manual_seed(0)
    model = NNModel(module=EncoderHead(),
                    params=NNModelParams(device=Devices.CPU, loss=Losses.CROSS_ENTROPY))
    with tempfile.TemporaryDirectory() as root:
        run = Trainer(model).train(params, objective=supervised_objective(), verbose=False,
                                   root=root)
        assert len(FACTORY_CALLS) == 1  # the factory built the encoder's optimizer once
        # Offline: the metadata alone, shown as example.lion@v1; no factory code runs.
        reloaded = NNRun.load(run.id, root=root)
        assert len(FACTORY_CALLS) == 1 and reloaded.id == run.id
        print(reloaded)


if __name__ == "__main__":
    main()
