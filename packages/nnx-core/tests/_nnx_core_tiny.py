"""Tiny data and models shared by the loop tests (tests/ is an import root: see README.md).

The data, model and loader helpers live in :mod:`nnx.testing`; this module re-exports
them and adds the test-only Lion optimizer."""

from __future__ import annotations

import torch

# One source of truth: the shared helpers are nnx.testing's (public, for add-on suites too).
from nnx.testing import sgd, tiny_batches, tiny_loader, tiny_model, tiny_train_params, weights

__all__ = ["Lion", "sgd", "tiny_batches", "tiny_loader", "tiny_model", "tiny_train_params",
           "weights"]


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
