"""NNModelParams: device, loss, net kind, precision policy and task.

``net`` is a ``Nets`` member (stored by name, exactly as before) or a model
descriptor (:mod:`nnx.params.descriptors`, public as ``nnx.models.ModelSpec`` /
``nnx.models.RuntimeModule``; stored as its ``{"kind": ...}`` mapping).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from nnx._foundation.config_base import Params, always, enum_decoder, set_field
from nnx._foundation.validation import check_enum
from nnx.enums.devices import Devices
from nnx.enums.losses import Losses
from nnx.enums.nets import Nets
from nnx.enums.precision import PRECISION_ALIASES, Precision
from nnx.params.descriptors import ModelDescriptor, ModelSpec, RuntimeModule, descriptor_from_state
from nnx.params.task import TaskSpec

__all__ = ["NNModelParams"]


def _net(value: Any) -> Nets | ModelDescriptor:
    if isinstance(value, (Nets, ModelSpec, RuntimeModule)):
        return value
    if isinstance(value, Mapping):  # a descriptor's {"kind": ...} state
        return descriptor_from_state(value)
    try:
        return Nets[value]
    except KeyError:
        raise ValueError(f"NNModelParams.net: unknown net kind {value!r}") from None


def _net_named(name: str) -> Nets:
    try:  # an absent add-on member's install hint (an ImportError) passes through
        return Nets._resolve(name.upper())
    except AttributeError as exc:
        raise ValueError(f"NNModelParams.net {name!r}: {exc}") from None


def _task(value: Any) -> TaskSpec | None:
    return None if value is None else TaskSpec.from_state(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class NNModelParams(Params):
    """What model to build and how to run it.

    ``precision`` is the explicit policy (FP32 / FP16 / BF16). ``mixed_precision``
    is the legacy flag (reduced precision on CUDA only); set one or the other.
    ``device`` defaults to ``Devices.AUTO`` (CUDA, then MPS, then CPU).
    ``net`` is a ``Nets`` member, a :class:`~nnx.models.ModelSpec` or a
    :class:`~nnx.models.RuntimeModule` (spec §3.2).
    """

    net: Nets | ModelDescriptor = always(Nets.FEED_FWD)
    loss: Losses = always(Losses.CROSS_ENTROPY)
    device: Devices = Devices.AUTO
    precision: Precision | None = None
    mixed_precision: bool = False
    task: TaskSpec | None = None

    _DECODERS: ClassVar[Mapping[str, Any]] = {
        "net": _net,
        "loss": enum_decoder(Losses),
        "device": enum_decoder(Devices),
        "precision": enum_decoder(Precision),
        "task": _task,
    }

    def __post_init__(self) -> None:
        if isinstance(self.net, str):  # "feed_fwd" / "FEED_FWD": the Nets member by name
            set_field(self, "net", _net_named(self.net))
        if not isinstance(self.net, (Nets, ModelSpec, RuntimeModule)):
            raise ValueError(f"NNModelParams.net must be a Nets member, a ModelSpec or a "
                             f"RuntimeModule; got {self.net!r}")
        # Strings spelling a member ("cpu", "bf16", "cross_entropy") become the member, so
        # state() and the run id are those of the enum (§2.3).
        set_field(self, "loss", check_enum("NNModelParams.loss", self.loss, Losses))
        set_field(self, "device", check_enum("NNModelParams.device", self.device, Devices))
        if self.precision is not None:
            set_field(self, "precision", check_enum("NNModelParams.precision", self.precision,
                                                    Precision, PRECISION_ALIASES))
        if not isinstance(self.mixed_precision, bool):
            raise ValueError(
                f"NNModelParams.mixed_precision must be a bool; got {self.mixed_precision!r}"
            )
        if self.precision is not None and self.mixed_precision:
            raise ValueError(
                "NNModelParams: set either precision (the explicit policy) or the legacy "
                "mixed_precision flag, not both"
            )
        if self.task is not None:
            if not isinstance(self.task, TaskSpec):
                raise ValueError(f"NNModelParams.task must be a TaskSpec; got {self.task!r}")
            if not self.task.accepts_loss(self.loss):
                raise ValueError(
                    f"NNModelParams.loss {self.loss.name} does not suit a {self.task.kind} task"
                )
