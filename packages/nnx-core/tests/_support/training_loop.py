"""Helpers shared by the tests split out of engine/test_training_loop.py."""

from __future__ import annotations

import torch
from _nnx_core_tiny import tiny_model

from nnx import (
    NNEvaluationDataPoint,
    NNModel,
)

# -- helpers ----------------------------------------------------------------------------


def data(n: int = 20, *, seed: int = 0, classes: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=g), torch.randint(0, classes, (n,), generator=g)


def chunks(x: torch.Tensor, y: torch.Tensor, sizes: list[int]) -> list[tuple[torch.Tensor, ...]]:
    out, start = [], 0
    for size in sizes:
        out.append((x[start:start + size], y[start:start + size]))
        start += size
    assert start == len(x)
    return out


make_model = tiny_model


# -- refusals leave nothing on disk ------------------------------------------------------


def _loader():
    x, y = data(8)
    return chunks(x, y, [4, 4])


# -- one monitor rule for BEST, ReduceLROnPlateau and EarlyStopping ------------------------


def _scripted_eval(values, metric):
    def evaluate(ctx):
        value = values[ctx.epoch_idx]
        return NNEvaluationDataPoint(loss=value if metric == "nll" else None,
                                     metrics={metric: value})
    return evaluate


def weights(model: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.net.state_dict().items()}
