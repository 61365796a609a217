"""sample (spec §9.4, §13.2): the DDPM reverse process.

T reverse steps under ``torch.no_grad()`` from x_T ~ N(0, I): at each t,
x_{t−1} = (x_t − β_t/√(1 − ᾱ_t) · ε̂) / √α_t + √β̃_t · z, with z ~ N(0, I) and no
noise at t = 0 (β̃ is the posterior variance, diffusers' ``variance_type=
"fixed_small"``; the predicted x_0 is not clipped, ``clip_sample=False``).

Fast by construction: the per-step coefficients are computed once per call (float64,
then read as Python floats, so each step passes scalars to in-place kernels and
creates no tensor); the timestep batches are views of one precomputed tensor; the
noise is drawn into one reused buffer. Draw order matches a diffusers loop (x_T, then
one draw per step with t > 0), so the same generator gives the same noise.

The net runs in eval mode; every submodule's own train/eval flag is restored after,
also on error. A call with its own ``generator`` never touches the global RNG, so a
preview inside a training run perturbs neither it nor an objective's stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from nnx.diffusion.schedules import NoiseSchedule
from nnx.extend import check_counts, preserved_state

__all__ = ["reverse_coefficients", "sample"]


def reverse_coefficients(schedule: NoiseSchedule) -> tuple[list[float], list[float],
                                                           list[float]]:
    """Per t: (1/√α_t, β_t / √(1 − ᾱ_t), √β̃_t) as Python floats, so that
    x_{t−1} = (x_t − eps_coef · ε̂) · scale + sigma · z."""
    betas = schedule.betas.double().cpu()
    alphas = 1.0 - betas
    cumprod = torch.cumprod(alphas, dim=0)
    previous = torch.cat([torch.ones(1, dtype=torch.float64), cumprod[:-1]])
    scale = alphas.rsqrt()
    eps_coef = betas / (1.0 - cumprod).sqrt()
    sigma = (betas * (1.0 - previous) / (1.0 - cumprod)).sqrt()
    return scale.tolist(), eps_coef.tolist(), sigma.tolist()


def _net_and_device(model: Any, device: torch.device | str | None) -> tuple[nn.Module,
                                                                             torch.device]:
    net = getattr(model, "net", model)
    if not isinstance(net, nn.Module):
        raise TypeError(f"sample needs an NNModel or an nn.Module with forward(x, t); got "
                        f"{type(model).__name__}")
    if device is not None:
        return net, torch.device(device)
    own = getattr(model, "device", None)
    if isinstance(own, torch.device):
        return net, own
    first = next(net.parameters(), None)
    return net, first.device if first is not None else torch.device("cpu")


def sample(model: Any, schedule: NoiseSchedule, shape: Sequence[int], *,
           device: torch.device | str | None = None,
           generator: torch.Generator | None = None) -> torch.Tensor:
    """Generate ``shape`` samples (``(B, ...)``) by running the T reverse steps.

    ``model`` is an NNModel or an ``nn.Module`` with ``forward(x, t) -> ε̂``; ``device``
    defaults to the model's. ``generator`` (on any device) makes the draw reproducible
    and leaves the global RNG alone; without one the global RNG is used.
    """
    if not isinstance(schedule, NoiseSchedule):
        raise TypeError(f"sample needs a NoiseSchedule; got {type(schedule).__name__}")
    dims = check_counts("sample shape", shape)
    if not dims:
        raise ValueError("sample shape must be (B, ...) with at least the batch dimension")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"sample generator must be a torch.Generator; got "
                        f"{type(generator).__name__}")
    net, where = _net_and_device(model, device)
    scale, eps_coef, sigma = reverse_coefficients(schedule)
    T = schedule.T
    # Every step's timestep batch, once: row t is a view (no per-step tensor creation).
    steps = torch.arange(T, device=where).unsqueeze(1).expand(T, dims[0])
    drawn_on = generator.device if generator is not None else where

    def noise(out: torch.Tensor) -> torch.Tensor:
        if drawn_on == where:
            return out.normal_(generator=generator)
        out.copy_(torch.randn(dims, generator=generator, device=drawn_on))
        return out

    with preserved_state(net, mode="eval"), torch.no_grad():
        x = noise(torch.empty(dims, device=where))
        z = torch.empty_like(x)
        for t in range(T - 1, -1, -1):
            eps = net(x, steps[t])
            x = x.sub_(eps, alpha=eps_coef[t]).mul_(scale[t])
            if t > 0:
                x.add_(noise(z), alpha=sigma[t])
    return x
