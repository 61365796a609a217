"""DiffusionMLP (spec §9.2): a small conditional noise predictor, ``forward(x_t, t) -> ε̂``.

Sinusoidal time embedding → MLP projection → concatenated with the flattened
``x_t`` → MLP → the predicted noise, shaped like ``x_t``. Not a U-Net: the
schedule, the train step, the objective and the sampler work with any
``nn.Module`` of the same ``forward(x, t)`` signature.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from nnx.extend import check_count, check_counts

__all__ = ["DiffusionMLP", "sinusoidal_embedding"]


def sinusoidal_embedding(t: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """``[sin(t·f), cos(t·f)]`` per row (the Transformer position code, over timesteps)."""
    args = t.to(freqs.dtype).unsqueeze(-1) * freqs
    return torch.cat([args.sin(), args.cos()], dim=-1)


class DiffusionMLP(nn.Module):
    """``DiffusionMLP(input_dim, hidden_dims, time_embed_dim)``.

    ``input_dim`` is the flattened size of one sample; ``hidden_dims`` the widths of
    the denoising MLP; ``time_embed_dim`` (even, >= 2) the width of the time code.
    ``forward(x, t)`` takes ``x`` of shape ``(B, ...)`` with ``input_dim`` elements per
    row and ``t`` an integer tensor of shape ``(B,)`` (or a scalar, for every row).
    """

    freqs: torch.Tensor

    def __init__(self, input_dim: int, hidden_dims: Sequence[int], time_embed_dim: int) -> None:
        super().__init__()
        self.input_dim = check_count("DiffusionMLP input_dim", input_dim)
        self.hidden_dims = check_counts("DiffusionMLP hidden_dims", hidden_dims)
        if not self.hidden_dims:
            raise ValueError("DiffusionMLP hidden_dims must name at least one hidden width")
        self.time_embed_dim = check_count("DiffusionMLP time_embed_dim", time_embed_dim,
                                          minimum=2)
        if self.time_embed_dim % 2:
            raise ValueError(f"DiffusionMLP time_embed_dim must be even (sin and cos halves); "
                             f"got {time_embed_dim}")
        half = self.time_embed_dim // 2
        # Geometric frequencies 1 .. 1/10000: a buffer (follows .to(device)), not a weight,
        # and not persistent (it is a function of time_embed_dim alone).
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
        self.register_buffer("freqs", freqs, persistent=False)
        d = self.time_embed_dim
        self.time_mlp = nn.Sequential(nn.Linear(d, d), nn.SiLU(), nn.Linear(d, d))
        layers: list[nn.Module] = []
        width = self.input_dim + d
        for hidden in self.hidden_dims:
            layers += [nn.Linear(width, hidden), nn.SiLU()]
            width = hidden
        layers.append(nn.Linear(width, self.input_dim))
        self.denoiser = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, t: torch.Tensor | int) -> torch.Tensor:
        flat = x.reshape(x.shape[0], -1)
        if flat.shape[1] != self.input_dim:
            raise ValueError(f"DiffusionMLP(input_dim={self.input_dim}) got samples of "
                             f"{flat.shape[1]} elements (x of shape {tuple(x.shape)})")
        steps = torch.as_tensor(t, device=x.device)
        if steps.dim() == 0:
            steps = steps.expand(x.shape[0])
        emb = self.time_mlp(sinusoidal_embedding(steps, self.freqs))
        out: torch.Tensor = self.denoiser(torch.cat([flat, emb.to(flat.dtype)], dim=-1))
        return out.reshape(x.shape)
