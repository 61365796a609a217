"""The plugin's net: ``Nets.EXAMPLE_MLP`` (the ``nnx.nets`` entry point) and its params.

An add-on params class extends a core params class and validates its own fields with
the core validator, so a bad value is refused with the same message as anywhere
else in nnx.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from nnx.extend import NetRegistration, NNParams, check_real, set_field

__all__ = ["EXAMPLE_MLP", "ExampleMLP", "ExampleMLPParams", "ExampleScaler"]


class ExampleScaler(nn.Module):
    """Multiplies its input by one learnable scalar (initially ``init``)."""

    def __init__(self, init: float = 1.0) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(float(check_real("ExampleScaler.init", init))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


@dataclass(frozen=True, slots=True, kw_only=True)
class ExampleMLPParams(NNParams):
    """NNParams plus ``scale``, the constant the output is multiplied by.

    Add-on params classes extend a core params class and validate their own
    fields with the core validator (re-exported by :mod:`nnx.extend`), so a bad value is
    refused with the same message as anywhere else in nnx. ``scale`` is not an
    ``always()`` field: at its default it stays out of ``state()``.
    """

    scale: float = 1.0

    def validate(self) -> None:
        # Explicit base call: zero-argument super() breaks in slotted dataclasses.
        NNParams.validate(self)
        set_field(self, "scale", check_real(self.field_name("scale"), self.scale))


class ExampleMLP(nn.Module):
    """``Linear(input_dim, output_dim)``, then times ``params.scale``."""

    def __init__(self, params: ExampleMLPParams) -> None:
        super().__init__()
        self.params = params
        self.linear: nn.Module = (
            nn.LazyLinear(params.output_dim)
            if params.input_dim is None
            else nn.Linear(params.input_dim, params.output_dim)
        )
        self.scale = float(params.scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.linear(x) * self.scale
        return out


#: The ``nnx.nets`` entry: how ``Nets.EXAMPLE_MLP`` builds, and its params class.
EXAMPLE_MLP = NetRegistration(build=ExampleMLP, params_class=ExampleMLPParams)
