"""IA3Linear: (IA)^3's learned scaling vector on a frozen nn.Linear (Liu et al., 2022).

Matches HF PEFT's ``IA3Config`` layer: a non-feed-forward target scales the
Linear's OUTPUT (one factor per out feature, the bias scaled too); a
feed-forward target scales its INPUT (one factor per in feature), as in the
paper, where (IA)^3 rescales the inner activation of the position-wise FFN.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["IA3Linear"]


class IA3Linear(nn.Module):
    """Wrap ``base`` (an ``nn.Linear``) with a learned ``scaling`` vector, initialized to ones.

    ``feedforward=False``: ``y = base(x) * scaling`` (``scaling`` has ``out_features``
    entries). ``feedforward=True``: ``y = base(x * scaling)`` (``in_features``
    entries). The base's parameters are frozen; ``scaling`` is allocated from the
    base weight's dtype and device (meta included), and the wrapper copies the
    base's train/eval flag (spec §11).
    """

    def __init__(self, base: nn.Linear, feedforward: bool = False) -> None:
        if not isinstance(base, nn.Linear):
            raise TypeError(f"IA3Linear wraps an nn.Linear; got {type(base).__name__}")
        if not isinstance(feedforward, bool):
            raise TypeError(
                f"IA3Linear.feedforward must be a bool; got {feedforward!r} "
                f"({type(feedforward).__name__})"
            )
        super().__init__()
        self.base = base
        self.feedforward = feedforward
        size = base.in_features if feedforward else base.out_features
        w = base.weight
        self.scaling = nn.Parameter(torch.ones(size, dtype=w.dtype, device=w.device))
        for p in base.parameters():
            p.requires_grad_(False)
        # Mode is inherited per layer at insertion time, never imposed (spec §11).
        self.training = base.training

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.feedforward:
            out: torch.Tensor = self.base(x * self.scaling)
            return out
        scaled: torch.Tensor = self.base(x) * self.scaling
        return scaled

    def extra_repr(self) -> str:
        return f"feedforward={self.feedforward}"
