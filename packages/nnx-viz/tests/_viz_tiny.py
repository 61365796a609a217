"""Small nets and state snapshots the nnx-viz tests share (torch and nnx only)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import torch
from torch import nn

from nnx import Activations, Devices, Losses, Nets, NNModel, NNModelParams, NNParams

HOOK_TABLES = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
               "_backward_pre_hooks")


class Boom(nn.Module):
    """Identity until armed; armed, its forward raises mid-call (after earlier layers ran)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.armed:
            raise RuntimeError("boom inside the forward")
        return x


class Mixed(nn.Module):
    """A mixed train / eval tree with a frozen layer: what §13.2 must put back as it was."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU())
        self.boom = Boom()
        self.drop = nn.Dropout(0.5)
        self.head = nn.Linear(6, 3)
        self.train()
        self.backbone.eval()  # a frozen backbone kept in eval under a training head
        self.backbone[0].weight.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(self.boom(self.backbone(x))))


def mixed() -> Mixed:
    torch.manual_seed(0)
    return Mixed()


def snapshot(net: nn.Module) -> dict[str, Any]:
    """Every submodule's mode, every parameter's flag and grad, hooks per module, buffers."""
    return {
        "modes": {n: m.training for n, m in net.named_modules()},
        "flags": {n: p.requires_grad for n, p in net.named_parameters()},
        "grads": {n: None if p.grad is None else p.grad.clone()
                  for n, p in net.named_parameters()},
        "hooks": {n: [len(getattr(m, t)) for t in HOOK_TABLES] for n, m in net.named_modules()},
        "state": {k: v.clone() for k, v in net.state_dict().items()},
    }


def assert_same(net: nn.Module, before: dict[str, Any]) -> None:
    after = snapshot(net)
    assert after["modes"] == before["modes"]
    assert after["flags"] == before["flags"]
    assert after["hooks"] == before["hooks"]
    for name, grad in before["grads"].items():
        now = after["grads"][name]
        assert (grad is None and now is None) or torch.equal(grad, now), name
    for key, value in before["state"].items():
        assert torch.equal(after["state"][key], value), key


def feed_forward() -> NNModel:
    torch.manual_seed(0)
    return NNModel(
        net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=[32, 16],
                            dropout_prob=0.1, activation=Activations.RELU),
        params=NNModelParams(net=Nets.FEED_FWD, device=Devices.CPU,
                             loss=Losses.CROSS_ENTROPY),
    )


def hide(monkeypatch: pytest.MonkeyPatch, package: str) -> None:
    """Make ``import package`` (and its submodules) fail as if it were not installed."""
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, package, None)
