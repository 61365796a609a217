"""Enums-as-factories (spec §3): calling a member constructs the object it names."""

from nnx.enums.activations import Activations
from nnx.enums.checkpoints import Checkpoints
from nnx.enums.devices import Devices
from nnx.enums.losses import Losses
from nnx.enums.nets import NetRegistration, Nets
from nnx.enums.optims import Optims
from nnx.enums.precision import Precision
from nnx.enums.schedulers import Schedulers

__all__ = [
    "Activations",
    "Checkpoints",
    "Devices",
    "Losses",
    "NetRegistration",
    "Nets",
    "Optims",
    "Precision",
    "Schedulers",
]
