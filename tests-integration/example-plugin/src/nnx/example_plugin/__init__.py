"""nnx-example-plugin: the reference add-on, and the template for third-party ones.

It joins the ``nnx`` namespace the way every add-on does: it ships the
``nnx/example_plugin/`` directory (never ``nnx/__init__.py``, which belongs to
nnx-core) and announces what it provides through entry points in its
``pyproject.toml``:

``nnx.exports``             ``ExampleScaler``  → ``from nnx import ExampleScaler``
``nnx.nets``                ``EXAMPLE_MLP``    → ``Nets.EXAMPLE_MLP(ExampleMLPParams(...))``
``nnx.optimizer_factories`` ``example.sgd@v1`` → :func:`example_sgd`

Nothing here is imported by ``import nnx``; nnx-core loads each entry the
first time someone asks for its name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

# nnx.extend is nnx-core's extension API (docs/extending.md): with ``nnx`` itself, the only
# core module an add-on imports (its tests assert it: nnx.testing.check_distribution).
from nnx.extend import NON_NEGATIVE, NetRegistration, NNParams, check_real, set_field

__all__ = ["EXAMPLE_MLP", "ExampleMLP", "ExampleMLPParams", "ExampleScaler", "example_sgd"]


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


def example_sgd(
    param_groups: Sequence[Mapping[str, Any]], config: Mapping[str, Any]
) -> torch.optim.Optimizer:
    """Optimizer factory ``example.sgd@v1``: plain SGD over the resolved groups.

    Each group already carries its own ``lr`` and ``weight_decay``; the
    optional ``config["lr"]`` / ``config["momentum"]`` are the fallbacks.
    """
    lr = check_real("example.sgd config lr", config.get("lr", 0.01), NON_NEGATIVE)
    momentum = check_real("example.sgd config momentum", config.get("momentum", 0.0), NON_NEGATIVE)
    return torch.optim.SGD([dict(g) for g in param_groups], lr=lr, momentum=momentum)
