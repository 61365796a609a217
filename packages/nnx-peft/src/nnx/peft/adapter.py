"""AdapterLayer: the bottleneck residual of spec §11.2 (Houlsby et al., 2019)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from nnx.extend import check_count

__all__ = ["AdapterLayer"]


class AdapterLayer(nn.Module):
    """``y = x + up(act(down(x)))``, with ``up`` zero-initialized so it starts as the identity.

    A full module the caller composes into its forward pass (there is no
    ``apply_adapters_to``: where to insert depends on the architecture).
    ``activation`` is a module factory (a class such as ``nn.GELU``, or any
    zero-argument callable returning an ``nn.Module``), called once; an
    ``nn.Module`` instance (``nn.GELU(approximate="tanh")``) is used as given.
    """

    def __init__(self, dim: int, bottleneck: int,
                 activation: Callable[[], nn.Module] | nn.Module = nn.GELU) -> None:
        dim = check_count("AdapterLayer.dim", dim)
        bottleneck = check_count("AdapterLayer.bottleneck", bottleneck)
        if isinstance(activation, nn.Module):
            act = activation
        elif not callable(activation):
            raise TypeError(
                "AdapterLayer.activation must be a module factory such as nn.GELU; "
                f"got {activation!r} ({type(activation).__name__})"
            )
        else:
            act = activation()
        if not isinstance(act, nn.Module):
            raise TypeError(
                "AdapterLayer.activation() must return an nn.Module; "
                f"got {type(act).__name__}"
            )
        super().__init__()
        self.dim = dim
        self.bottleneck = bottleneck
        self.down = nn.Linear(dim, bottleneck)
        self.act = act
        self.up = nn.Linear(bottleneck, dim)
        # Zero up-projection: the residual adds exactly 0 at step 0, so the adapted
        # network starts with the pretrained behaviour (the same story as LoRA's B).
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = x + self.up(self.act(self.down(x)))
        return out

    def extra_repr(self) -> str:
        return f"dim={self.dim}, bottleneck={self.bottleneck}"
