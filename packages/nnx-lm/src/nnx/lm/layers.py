"""RMSNorm and RoPE: the transformer's normalization and rotary positions (spec §2.3)."""

from __future__ import annotations

import torch
from torch import nn

from nnx.extend import NON_NEGATIVE, POSITIVE, check_count, check_real

__all__ = ["RMSNorm", "RoPE"]


class RMSNorm(nn.Module):
    """``x / rms(x) * weight``, computed in at least float32 and cast back: half and
    bfloat16 inputs in float32 (as Llama does, bit for bit), float64 inputs in float64
    (in float32 their squares overflow past ~1e19 and the rows come out zeros)."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = float(check_real("RMSNorm.eps", eps, NON_NEGATIVE))
        self.weight = nn.Parameter(torch.ones(check_count("RMSNorm.dim", dim)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.to(torch.promote_types(x.dtype, torch.float32))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class RoPE(nn.Module):
    """Rotary position embedding over ``dim`` channels, for positions below ``max_seq_len``.

    Channel ``i`` is rotated with channel ``i + dim/2`` (the "rotate half" layout
    Llama checkpoints use), so their q/k projections load unpermuted. The cos/sin
    tables are buffers kept out of the state dict: they follow from the config.
    """

    def __init__(self, dim: int, max_seq_len: int, base: float = 10000.0) -> None:
        super().__init__()
        dim = check_count("RoPE.dim", dim)
        if dim % 2:
            raise ValueError(f"RoPE.dim must be even (channels rotate in pairs); got {dim}")
        self.dim = dim
        self.max_seq_len = check_count("RoPE.max_seq_len", max_seq_len)
        self.base = float(check_real("RoPE.base", base, POSITIVE))
        inv_freq = 1.0 / (self.base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        freqs = torch.outer(torch.arange(self.max_seq_len).float(), inv_freq)
        angles = torch.cat((freqs, freqs), dim=-1)
        self.cos: torch.Tensor
        self.sin: torch.Tensor
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Rotate ``x`` of shape ``(..., T, dim)`` for positions ``offset … offset+T-1``."""
        end = offset + x.shape[-2]
        if end > self.max_seq_len:
            raise ValueError(f"RoPE: position {end - 1} is past max_seq_len "
                             f"({self.max_seq_len})")
        cos = self.cos[offset:end].to(x.dtype)
        sin = self.sin[offset:end].to(x.dtype)
        half = self.dim // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin
