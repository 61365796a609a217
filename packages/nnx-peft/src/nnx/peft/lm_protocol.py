"""What the prefix and prompt tuners need of nnx-lm's TransformerNN, without importing it.

nnx-peft installs and imports without nnx-lm (the ``lm`` extra). The tuners
type against these protocols, and :func:`require_transformer` reaches nnx-lm
lazily at construction through core's ``require_distribution``: absent, it raises
core's one install hint naming ``pip install nnx-lm``; present, it checks the net
really is a TransformerNN (the attention math the prefix relies on lives there, in ``attend``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

import torch
from torch import nn

from nnx.extend import require_distribution

__all__ = [
    "KVCache", "LMAttention", "LMBlock", "LMNet", "LMShape", "inner_linear",
    "require_transformer",
]

#: One ``(keys, values)`` pair per layer, each ``(batch, heads, length, head_dim)``.
KVCache = tuple[tuple[torch.Tensor, torch.Tensor], ...]


class LMAttention(Protocol):
    """A block's attention: a fused ``qkv`` projection and ``attend`` with extra K/V."""

    n_heads: int
    head_dim: int
    qkv: nn.Module

    def attend(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None,
               prefix: tuple[torch.Tensor, torch.Tensor] | None = None
               ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]: ...


class LMBlock(Protocol):
    attn: LMAttention


class LMShape(Protocol):
    max_seq_len: int


class LMNet(Protocol):
    """TransformerNN as the tuners see it."""

    embed: nn.Embedding
    params: LMShape
    training: bool

    @property
    def blocks(self) -> Sequence[LMBlock]: ...

    def parameters(self, recurse: bool = True) -> object: ...

    def __call__(self, ids: torch.Tensor) -> torch.Tensor: ...

    def forward_with_cache(self, ids: torch.Tensor, cache: KVCache | None = None
                           ) -> tuple[torch.Tensor, KVCache]: ...

    def forward_embeddings(self, embeds: torch.Tensor, cache: KVCache | None = None
                           ) -> tuple[torch.Tensor, KVCache]: ...


def require_transformer(owner: str, net: object) -> LMNet:
    """``net`` as an :class:`LMNet` if nnx-lm is installed and ``net`` is its TransformerNN.

    Raises :class:`~nnx.extend.MissingDistributionError` (an ImportError) naming
    ``pip install nnx-lm`` when nnx-lm cannot be imported, TypeError for another net.
    """
    lm = require_distribution("nnx-lm", "nnx.lm", needed_by=owner)
    if not isinstance(net, lm.TransformerNN):
        raise TypeError(f"{owner} wraps an nnx-lm TransformerNN (model.net of a "
                        f"GenerativeNNModel); got {type(net).__name__}")
    return cast(LMNet, net)


def inner_linear(projection: nn.Module) -> nn.Module:
    """The Linear a projection computes with: itself, or the ``.base`` Linear inside an
    adapter wrapper (LoRALinear, DoRALinear, IA3Linear), found generically by attribute."""
    base = getattr(projection, "base", None)
    return base if isinstance(base, nn.Linear) else projection
