"""Tiny nets the surgery tests cut, and a snapshot to show a refusal changed nothing."""

from __future__ import annotations

import torch
from torch import nn

from nnx import Activations, FeedFwdNN, NNParams

X = torch.randn(16, 5, generator=torch.Generator().manual_seed(7))


def feedfwd(*, hidden: tuple[int, ...] = (6, 6), seed: int = 0, **fields: object) -> FeedFwdNN:
    torch.manual_seed(seed)
    return FeedFwdNN(NNParams(input_dim=5, output_dim=3, hidden_dims=hidden,
                              **fields))  # type: ignore[arg-type]


def relu_stack(*middle: nn.Module, seed: int = 0) -> nn.Sequential:
    """Linear(5, 6) → ``middle`` → Linear(6, 3); ReLU when ``middle`` is empty."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 6), *(middle or (nn.ReLU(),)), nn.Linear(6, 3))


def snapshot(net: nn.Module) -> tuple[str, dict[str, torch.Tensor], list[bool], list[bool]]:
    """What a refusal must leave as it was: the module tree, every tensor, every
    requires_grad flag and every train/eval mode."""
    return (repr(net), {k: v.clone() for k, v in net.state_dict().items()},
            [p.requires_grad for p in net.parameters()], [m.training for m in net.modules()])


def same(a: tuple, b: tuple) -> bool:  # type: ignore[type-arg]
    return (a[0] == b[0] and a[1].keys() == b[1].keys()
            and all(torch.equal(a[1][k], b[1][k]) for k in a[1]) and a[2:] == b[2:])


__all__ = ["Activations", "X", "feedfwd", "relu_stack", "same", "snapshot"]
