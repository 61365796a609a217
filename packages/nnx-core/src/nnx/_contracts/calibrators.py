"""What a calibrator shows a run bundle, and how a bundle gives one back (spec §18, §22).

A bundle ships calibrators as their JSON records (``calibrator-<n>.json``). Any
object with this shape can be exported (nnx-decisions' TemperatureCalibrator is
one):

* ``to_json()`` → its record, as JSON text or a mapping: a JSON object whose
  ``"format"`` names its format
  and version (``"nnx.calibration/1"``), with ``"labels"`` (one per class, in
  order) and ``"model_id"`` (a :func:`model_fingerprint`, a declared id, or None);
  everything else in it is the calibrator's own;
* ``labels`` and ``num_classes``: the task it calibrates (checked against the
  bundled model's class count and labels);
* ``model_id``: the record's model id; a fingerprint (``sha256:…``) must be the
  bundled weights', a declared id is recorded as it is.

Reconstruction turns a record back into an object through the reader
registered for its format: the ``nnx.calibration_readers`` versioned registry,
keyed ``<format id>@v<version>`` (``nnx.calibration@v1``), filled by
:func:`register_calibrator_reader` or an add-on's entry point of that group.
With no reader installed the validated record itself is returned, read-only,
so a bundle always reconstructs; only the record's owner interprets it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from nnx._foundation.hashing import frozen_plain
from nnx._foundation.plugins import VersionedRegistry, versioned_registry

if TYPE_CHECKING:
    import torch

__all__ = ["BundleCalibrator", "CalibratorReader", "model_fingerprint", "read_calibrator",
           "register_calibrator_reader", "registered_calibrator_readers",
           "unregister_calibrator_reader"]

#: ``reader(record) -> calibrator``: rebuilds a calibrator from its validated record.
CalibratorReader = Callable[[Mapping[str, Any]], Any]
_FORMAT = re.compile(r"(?P<id>[A-Za-z0-9_.\-]+)/(?P<version>[1-9][0-9]*)")


@runtime_checkable
class BundleCalibrator(Protocol):
    """A calibrator a run bundle can carry (see the module docstring)."""

    @property
    def labels(self) -> Sequence[str | int]: ...

    @property
    def num_classes(self) -> int: ...

    @property
    def model_id(self) -> str | None: ...

    def to_json(self) -> str | Mapping[str, Any]: ...


def _registry() -> VersionedRegistry:
    return versioned_registry("nnx.calibration_readers")


def _key(format: str) -> tuple[str, int]:
    match = _FORMAT.fullmatch(format) if isinstance(format, str) else None
    if match is None:
        raise ValueError(f"a calibrator format is '<id>/<version>' (nnx.calibration/1); got "
                         f"{format!r}")
    return match["id"], int(match["version"])


def register_calibrator_reader(format: str, reader: CalibratorReader) -> None:
    """Read records of ``format`` (``"nnx.calibration/1"``) back with ``reader(record)``."""
    if not callable(reader):
        raise TypeError(f"register_calibrator_reader needs a callable; got {reader!r}")
    _registry().register(*_key(format), reader)


def unregister_calibrator_reader(format: str) -> None:
    _registry().unregister(*_key(format), what="calibrator reader")


def registered_calibrator_readers() -> list[tuple[str, int]]:
    return _registry().registered()


def read_calibrator(record: Mapping[str, Any]) -> Any:
    """The calibrator ``record`` describes, through its format's reader; the record
    itself (read-only) when no reader is registered for that format."""
    try:
        key = _key(record.get("format", ""))
    except ValueError:
        key = None
    reader = None if key is None else _registry().get(*key)
    if reader is None:
        frozen: Mapping[str, Any] = frozen_plain(record)
        return frozen if isinstance(frozen, MappingProxyType) else MappingProxyType(dict(record))
    return reader(record)


#: Attributes of a model object that never shape its outputs: the loss scores them and a
#: compiled forward of a fit wraps the net itself (NNModel's ``_fit_forward``).
_NOT_OUTPUT_STATE = frozenset({"net", "loss_fn", "_fit_forward"})


def model_fingerprint(model: Any) -> str:
    """``sha256:<hex>`` over every weight of what it is given: names, dtypes, shapes and
    bytes. A state dict is hashed as it is; a module, all of its state (a wrapper's head
    beside its ``net`` included); a model object (an NNModel), its net's state plus every
    other module or tensor it holds that shapes its outputs (a subclass's head, a
    scale), each under ``<attribute>:``, its loss excluded. An NNModel holding only
    its net gets the digest a bundle computes from its model.safetensors payload
    without building a tensor, so a calibrator bound to it is checked against the
    bundled weights."""
    # Imported here: nnx.calibration re-exports this function and its import loads no
    # torch (spec §18); whoever hands over weights has torch loaded already.
    import torch
    from torch import nn

    from nnx._persistence.safetensors_codec import tensors_fingerprint  # loads torch

    if isinstance(model, nn.Module):
        state: dict[str, Any] = dict(model.state_dict())
    elif isinstance(model, Mapping):
        state = dict(model)
    elif isinstance(getattr(model, "net", None), nn.Module):
        state = dict(model.net.state_dict())
        state.update(_beside_the_net(model))
    else:
        raise TypeError(f"model_fingerprint needs a model, a module or a state dict; got "
                        f"{type(model).__name__}")
    tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    if len(tensors) != len(state):
        odd = sorted(k for k in state if k not in tensors)[:5]
        raise TypeError(f"model_fingerprint: state entries {odd} are not tensors")
    return tensors_fingerprint(tensors)


def _beside_the_net(model: Any) -> dict[str, torch.Tensor]:
    """The modules' and tensors' state a model object holds besides its net and loss, as
    ``<attribute>:<name>`` entries (``:`` never occurs in a module's state names)."""
    import torch
    from torch import nn

    out: dict[str, torch.Tensor] = {}
    for attribute, value in sorted(vars(model).items()) if hasattr(model, "__dict__") else ():
        if attribute in _NOT_OUTPUT_STATE:
            continue
        if isinstance(value, nn.Module):
            out.update({f"{attribute}:{k}": v for k, v in value.state_dict().items()})
        elif isinstance(value, torch.Tensor):
            out[f"{attribute}:"] = value
    return out
