"""Activations: ``Activations.RELU()`` → ``nn.ReLU()``."""

from __future__ import annotations

import enum

from torch import nn


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
        return _MODULES[self]()


_MODULES: dict[Activations, type[nn.Module]] = {
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
