"""Float-target batches for the task and objective tests (nnx.testing's are classes).

Imported by name: nnx-core's pytest plugin (``-p nnx.testing``) makes ``tests/`` an
import root, so no conftest edits ``sys.path``.
"""

from __future__ import annotations

from typing import Any

import torch

from nnx import Devices, Losses, NNModel, NNModelParams, NNParams


def regression_batches(n_batches: int = 2, size: int = 8, *,
                       seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Seeded ``(X, y)`` batches: 4 features, ``y`` the row sums (float, one column)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n_batches * size, 4, generator=gen)
    return [(x[i:i + size], x[i:i + size].sum(1, keepdim=True)) for i in range(0, len(x), size)]


def regression_model(seed: int = 0, **kwargs: Any) -> NNModel:
    """A seeded CPU model with one output, trained on MSE unless a task or objective
    says otherwise; ``kwargs`` go to ``NNModel`` (``task=...``)."""
    torch.manual_seed(seed)
    return NNModel(net_params=NNParams(input_dim=4, output_dim=1, hidden_dims=(8,)),
                   params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR, device=Devices.CPU),
                   **kwargs)
