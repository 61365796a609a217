"""Activations: ``Activations.RELU()`` → ``nn.ReLU()``."""

from __future__ import annotations

import enum
import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn

# torch is imported on first use, not at import: ``nnx runs show`` renders a run's typed
# configuration (these members) and must run without torch (docs/architecture.md).


class Activations(enum.Enum):
    RELU = "relu"
    LEAKY_RELU = "leaky_relu"
    GELU = "gelu"
    SILU = "silu"
    ELU = "elu"
    TANH = "tanh"
    SIGMOID = "sigmoid"
    SOFTPLUS = "softplus"
    IDENTITY = "identity"

    def __call__(self) -> nn.Module:
        return _modules()[self]()


@functools.cache
def _modules() -> dict[Activations, type[nn.Module]]:
    from torch import nn

    return {
        Activations.RELU: nn.ReLU,
        Activations.LEAKY_RELU: nn.LeakyReLU,
        Activations.GELU: nn.GELU,
        Activations.SILU: nn.SiLU,
        Activations.ELU: nn.ELU,
        Activations.TANH: nn.Tanh,
        Activations.SIGMOID: nn.Sigmoid,
        Activations.SOFTPLUS: nn.Softplus,
        Activations.IDENTITY: nn.Identity,
    }
