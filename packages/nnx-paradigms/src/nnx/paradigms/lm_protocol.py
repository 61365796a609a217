"""What DPO needs of nnx-lm, reached without importing it at module import.

nnx-paradigms installs and imports without nnx-lm (its ``lm`` extra). The DPO step
and :class:`~nnx.paradigms.preference.NNPreferenceDataset` reach nnx-lm at construction
through core's ``require_distribution``: absent, it raises the one install hint naming
``pip install nnx-lm``; present, :func:`transformer_of` checks a reference really is (or
wraps) nnx-lm's TransformerNN.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

import torch
from torch import nn

from nnx.extend import require_distribution

__all__ = ["LMNet", "transformer_of"]


class LMShape(Protocol):
    vocab_size: int
    max_seq_len: int


class LMNet(Protocol):
    """TransformerNN as DPO sees it: ids ``(B, T)`` → next-token logits ``(B, T, V)``."""

    params: LMShape
    training: bool

    def parameters(self, recurse: bool = True) -> Any: ...

    def eval(self) -> nn.Module: ...

    def modules(self) -> Any: ...

    def __call__(self, ids: torch.Tensor) -> torch.Tensor: ...


def transformer_of(owner: str, model: object) -> LMNet:
    """The TransformerNN of ``model``: a GenerativeNNModel / NNModel over one, or the net."""
    lm = require_distribution("nnx-lm", "nnx.lm", needed_by=owner)
    net = getattr(model, "net", model)
    if not isinstance(net, lm.TransformerNN):
        raise TypeError(f"{owner}: the reference policy must be an nnx-lm TransformerNN or a "
                        f"model over one (a GenerativeNNModel); got {type(model).__name__}")
    return cast(LMNet, net)
