"""The 2:4 semi-structured pattern (spec §16): two of every four consecutive input weights.

For each Linear weight, every group of four consecutive entries along the input dimension
keeps its two largest ``|w|`` (the earlier of two equal magnitudes kept first) and zeroes
the other two, in place, so keys, dtypes and ``requires_grad`` flags stay. On the CPU
this is the pattern only, without a sparse kernel: the result is a dense net with 50 %
zeros, no faster than before. This release never swaps in torchao's CUDA 2:4 kernel
(Ampere+); the masked weights are what that kernel would take.
"""

from __future__ import annotations

import torch
from torch import nn

from nnx.prune.errors import PruneError
from nnx.prune.targets import prunable_layers

__all__ = ["semi_structured_24"]


def semi_structured_24(net: nn.Module) -> nn.Module:
    """Apply the 2:4 pattern to every ``nn.Linear`` weight of ``net`` in place; returns
    ``net``. Refuses (:class:`PruneError`) before any change a net without a Linear, a
    Linear whose input width is not a multiple of 4, and a net still carrying masks or
    weight_norm / spectral_norm parametrizations."""
    layers = [(name, m) for name, m in prunable_layers(net, what="semi_structured_24")
              if isinstance(m, nn.Linear)]
    if not layers:
        raise PruneError(f"semi_structured_24: {type(net).__name__} has no nn.Linear")
    odd = [f"{name} (in_features={m.in_features})" for name, m in layers
           if m.in_features % 4]
    if odd:
        raise PruneError(f"semi_structured_24: the 2:4 pattern needs input widths that are "
                         f"multiples of 4: {', '.join(odd)}")
    for _, layer in layers:
        w = layer.weight
        groups = w.detach().abs().reshape(-1, 4)
        # stable descending sort: the two largest of each group, the earlier first on ties
        top = torch.argsort(groups, dim=1, descending=True, stable=True)[:, :2]
        mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(1, top, True)
        with torch.no_grad():
            w.mul_(mask.reshape(w.shape).to(w.dtype))
    return net
