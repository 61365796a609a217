"""The plugin's optimizer factory, ``example.sgd@v1`` (the ``nnx.optimizer_factories``
entry point): run.yaml records it by id, version and config, never as code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from nnx.extend import NON_NEGATIVE, check_real

__all__ = ["example_sgd"]


def example_sgd(
    param_groups: Sequence[Mapping[str, Any]], config: Mapping[str, Any]
) -> torch.optim.Optimizer:
    """Optimizer factory ``example.sgd@v1``: plain SGD over the resolved groups.

    Each group already carries its own ``lr`` and ``weight_decay``; the
    optional ``config["lr"]`` / ``config["momentum"]`` are the fallbacks.
    """
    lr = check_real("example.sgd config lr", config.get("lr", 0.01), NON_NEGATIVE)
    momentum = check_real("example.sgd config momentum", config.get("momentum", 0.0), NON_NEGATIVE)
    return torch.optim.SGD([dict(g) for g in param_groups], lr=lr, momentum=momentum)
