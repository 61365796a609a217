"""The forward process shared by the train step and the objective (spec §9.3, §6.5).

x_t = √ᾱ_t · x_0 + √(1 − ᾱ_t) · ε, and the one-input batch rule: the batch is split
by the model's adapter, which must yield exactly one input (x_0), positional or keyword.
"""

from __future__ import annotations

from typing import Any

import torch

from nnx.diffusion.schedules import NoiseSchedule

__all__ = ["add_noise", "clean_input"]


def clean_input(model: Any, batch: Any, who: str) -> torch.Tensor:
    """x_0 of ``batch``, on the model's device: the adapter's one input.

    That input may be positional or keyword (``KeywordInputs("x", target=None)``); its
    name only says which batch entry is x_0, since the net is always called as
    ``net(x_t, t)`` (§9.2).
    """
    inputs, _ = model.split_batch(batch)
    kwargs = getattr(inputs, "kwargs", None) or {}
    if len(inputs) + len(kwargs) != 1:
        raise ValueError(f"{who} needs batches with exactly one input (x_0); the batch "
                         f"adapter yielded {len(inputs)} positional and {len(kwargs)} "
                         "keyword input(s)")
    x0 = inputs[0] if len(inputs) else next(iter(kwargs.values()))
    if not isinstance(x0, torch.Tensor) or not x0.is_floating_point() or x0.dim() < 1:
        got = f"{x0.dtype} of shape {tuple(x0.shape)}" if isinstance(x0, torch.Tensor) else (
            type(x0).__name__)
        raise ValueError(f"{who} needs x_0 as a floating tensor of shape (B, ...); got {got}")
    return x0


def add_noise(schedule: NoiseSchedule, x0: torch.Tensor, t: torch.Tensor,
              eps: torch.Tensor) -> torch.Tensor:
    """x_t for each row's timestep (``schedule`` already on x0's device)."""
    shape = (-1,) + (1,) * (x0.dim() - 1)
    a = schedule.sqrt_alphas_cumprod[t].view(shape).to(x0.dtype)
    b = schedule.sqrt_one_minus_alphas_cumprod[t].view(shape).to(x0.dtype)
    return a * x0 + b * eps
