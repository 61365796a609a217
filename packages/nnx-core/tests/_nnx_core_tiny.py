"""Tiny data and models shared by the loop tests (imported via conftest's sys.path entry)."""

from __future__ import annotations

import torch

from nnx import Devices, Losses, NNModel, NNModelParams, NNOptimParams, NNParams, TaskSpec


def tiny_batches(n_batches: int = 2, size: int = 4, *, seed: int = 0
                 ) -> list[tuple[torch.Tensor, ...]]:
    """``n_batches`` seeded (X, y) batches: 4 features, 3 classes."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_batches * size, 4, generator=g)
    y = torch.randint(0, 3, (n_batches * size,), generator=g)
    return [(x[i:i + size], y[i:i + size]) for i in range(0, len(x), size)]


def tiny_model(seed: int = 0, *, hidden: int = 8, loss: Losses = Losses.CROSS_ENTROPY,
               task: TaskSpec | None = None, dropout: float = 0.0, out: int = 3) -> NNModel:
    """A seeded 4 → hidden → out FeedFwd classifier on the CPU."""
    torch.manual_seed(seed)
    return NNModel(
        net_params=NNParams(input_dim=4, output_dim=out, hidden_dims=(hidden,),
                            dropout_prob=dropout),
        params=NNModelParams(device=Devices.CPU, loss=loss, task=task),
    )


def sgd(lr: float = 0.1, accumulate: int = 1) -> NNOptimParams:
    return NNOptimParams.builder().sgd(max_lr=lr).accumulate_grad(accumulate).build()


class Lion(torch.optim.Optimizer):
    """Sign-based momentum (Chen et al. 2023), small enough to read in a test; the registered
    factory the optimizer-factory and Trainer tests train with."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
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
                update = exp_avg.mul(beta1).add(p.grad, alpha=1 - beta1).sign_()
                p.add_(update, alpha=-group["lr"])
                exp_avg.mul_(beta2).add_(p.grad, alpha=1 - beta2)
        return loss
