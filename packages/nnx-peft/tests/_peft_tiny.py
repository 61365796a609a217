"""Small helpers shared by nnx-peft's tests: snapshots for "nothing changed" assertions."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from nnx import NNOptimParams
from nnx.optimizers import build_param_groups


def snapshot(net: nn.Module) -> dict[str, Any]:
    """Everything a refused call must leave alone: identities, weights, flags, groups, modes."""
    optim = NNOptimParams.builder().sgd(max_lr=0.1).build()
    try:
        groups = [[id(p) for p in g["params"]] for g in build_param_groups(net, optim)]
    except ValueError:  # no trainable parameter at all
        groups = []
    return {
        "ids": [(n, id(m)) for n, m in net.named_modules(remove_duplicate=False)],
        "weights": {k: v.detach().clone() for k, v in net.state_dict().items()},
        "grads": [(n, p.requires_grad) for n, p in net.named_parameters(remove_duplicate=False)],
        "groups": groups,
        "modes": [(n, m.training) for n, m in net.named_modules(remove_duplicate=False)],
    }


def assert_unchanged(net: nn.Module, before: dict[str, Any]) -> None:
    now = snapshot(net)
    assert now["ids"] == before["ids"]
    assert now["grads"] == before["grads"]
    assert now["groups"] == before["groups"]
    assert now["modes"] == before["modes"]
    assert now["weights"].keys() == before["weights"].keys()
    assert all(torch.equal(now["weights"][k], before["weights"][k]) for k in now["weights"])
