"""Checking what users pass to nnx.viz, before the model runs.

Every helper takes an ``NNModel`` (it works on ``model.net``) or any ``torch.nn.Module``
(spec §12). Inputs are tensors (or NumPy arrays), moved to the net's device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from nnx.extend import default_batch_adapter, module_of
from nnx.viz.errors import UnknownLayerError

__all__ = ["LISTED_NAMES", "as_tensor", "batch_splitter", "device_of", "find_module", "network",
           "split_batch", "split_on_device"]

#: How many available names an unknown layer's error lists.
LISTED_NAMES = 20


def network(owner: str, model: object) -> nn.Module:
    """``model`` itself when it is a module, else its ``net`` (an NNModel's): core's
    ``module_of``, its TypeError naming ``owner``."""
    return module_of(model, owner=owner)


def device_of(net: nn.Module) -> torch.device:
    """Where the net's first parameter (or buffer) lives; the CPU for a net with none."""
    for tensor in (*net.parameters(), *net.buffers()):
        return tensor.device
    return torch.device("cpu")


def batch_splitter(owner: str, model: object, net: nn.Module, batch_adapter: Any) -> Any:
    """What splits ``model``'s loader batches as training splits them: ``batch_adapter``,
    else the NNModel's own adapter, else core's default for the net."""
    if batch_adapter is None:
        batch_adapter = getattr(model, "batch_adapter", None) or default_batch_adapter(net)
    if not callable(getattr(batch_adapter, "split", None)):
        raise TypeError(f"{owner}: batch_adapter must be a BatchAdapter (split(batch) -> "
                        f"(args, kwargs, target)); got {type(batch_adapter).__name__}")
    return batch_adapter


def split_on_device(adapter: Any, batch: Any,
                    device: torch.device) -> tuple[list[Any], dict[str, Any], Any]:
    """``adapter.split(batch)`` with every tensor-like part moved to ``device``."""
    args, kwargs, target = adapter.split(batch)
    return ([a.to(device) if hasattr(a, "to") else a for a in args],
            {k: v.to(device) if hasattr(v, "to") else v for k, v in kwargs.items()},
            target.to(device) if hasattr(target, "to") else target)


def split_batch(owner: str, model: object, net: nn.Module, batch: Any,
                batch_adapter: Any) -> tuple[list[Any], dict[str, Any], Any]:
    """One loader batch split as training splits it (:func:`batch_splitter`), every part
    on the net's device: ``(args, kwargs, target)``."""
    return split_on_device(batch_splitter(owner, model, net, batch_adapter), batch,
                           device_of(net))


def as_tensor(owner: str, label: str, x: Any, device: torch.device, *,
              min_dim: int = 1) -> torch.Tensor:
    """``x`` (a tensor or NumPy array with at least ``min_dim`` axes) on ``device``."""
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{owner}: {label} must be a tensor; got {type(x).__name__}")
    if x.dim() < min_dim:
        raise ValueError(f"{owner}: {label} must have at least {min_dim} axes (the first "
                         f"is the batch); got shape {tuple(x.shape)}")
    return x.to(device)


def find_module(owner: str, net: nn.Module, name: object) -> nn.Module:
    """The submodule ``name`` (a dotted name from ``net.named_modules()``)."""
    if not isinstance(name, str):
        raise TypeError(f"{owner}: layer_name must be a string; got {type(name).__name__}")
    modules: dict[str, nn.Module] = dict(net.named_modules())
    if name and name in modules:
        found: nn.Module = modules[name]
        return found
    names: Sequence[str] = [n for n in modules if n]
    shown = ", ".join(repr(n) for n in names[:LISTED_NAMES])
    more = f" (and {len(names) - LISTED_NAMES} more)" if len(names) > LISTED_NAMES else ""
    raise UnknownLayerError(f"{owner}: {type(net).__name__} has no submodule {name!r}; "
                            f"available: {shown or 'none'}{more}")
