"""Tensor subclasses as plain tensors: how a bundle stores quantized weights (spec §22).

A QAT-converted net (nnx-quantize's ``nnx.qat`` recipe) holds torchao tensor subclasses
whose data lives in plain inner tensors (``qdata``, ``scale``, ``zero_point``) and whose
metadata (block size, target dtype) is fixed by the recipe. A bundle stores the inner
tensors in its safetensors payload and records the subclass's type name and metadata as
text. Reading one never imports or unpickles anything the bundle names: the class and
its metadata come from the net the recorded recipe rebuilds (a trusted op), and the
stored type name and metadata must equal that template's before its inner tensors are
replaced by the stored ones (same names, shapes and dtypes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["FLAT_SEPARATOR", "FlattenedTensor", "FlattenedTensorError", "flatten_subclass",
           "inner_tensors", "is_subclass", "restore_flattened", "type_name"]

#: A tensor subclass's inner tensor is stored as ``<state key>#<inner name>``.
FLAT_SEPARATOR = "#"


class FlattenedTensorError(ValueError):
    """A stored subclass tensor does not fit the rebuilt net's (type, metadata, inner
    tensors): the bundle was not written from this recipe's topology."""


def is_subclass(tensor: torch.Tensor) -> bool:
    """A tensor subclass (anything but a plain tensor or Parameter)."""
    return type(tensor) not in (torch.Tensor, torch.nn.Parameter)


def type_name(tensor: torch.Tensor) -> str:
    kind = type(tensor)
    return f"{kind.__module__}.{kind.__qualname__}"


@dataclass(frozen=True)
class FlattenedTensor:
    """A subclass tensor as stored: its type name, its flatten metadata as text, its
    outer size, and its inner plain tensors by attribute name."""

    kind: str
    meta: str
    size: tuple[int, ...]
    inner: Mapping[str, torch.Tensor]

    @property
    def shape(self) -> torch.Size:  # the names-and-shapes check reads the outer shape
        return torch.Size(self.size)


def flatten_subclass(tensor: torch.Tensor, where: str) -> FlattenedTensor:
    """``tensor`` (a subclass implementing ``__tensor_flatten__``) as a FlattenedTensor;
    ValueError naming ``where`` for one that does not flatten into plain tensors."""
    flatten = getattr(tensor, "__tensor_flatten__", None)
    if not callable(flatten):
        raise ValueError(f"{where}: the tensor is a {type_name(tensor)} subclass that does not "
                         "flatten into plain tensors (__tensor_flatten__)")
    names, meta = flatten()
    inner = {name: getattr(tensor, name) for name in names}
    nested = [n for n, t in inner.items() if not isinstance(t, torch.Tensor) or is_subclass(t)]
    if nested:
        raise ValueError(f"{where}: the {type_name(tensor)}'s inner tensors {nested} are not "
                         "plain tensors")
    return FlattenedTensor(type_name(tensor), repr(meta), tuple(tensor.shape), inner)


def inner_tensors(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``tensors`` as stored: each subclass replaced by its inner tensors under
    ``<key>#<name>`` (what a bundle's model.safetensors holds, so a fingerprint of a live
    QAT-converted net equals its bundle's)."""
    out: dict[str, torch.Tensor] = {}
    for key, tensor in tensors.items():
        if isinstance(tensor, torch.Tensor) and is_subclass(tensor):
            for name, inner in flatten_subclass(tensor, key).inner.items():
                out[f"{key}{FLAT_SEPARATOR}{name}"] = inner
        else:
            out[key] = tensor
    return out


def restore_flattened(state_dict: Mapping[str, Any], template: Mapping[str, Any],
                      what: str) -> dict[str, Any]:
    """``state_dict`` with each FlattenedTensor rebuilt as the subclass ``template`` (the
    rebuilt net's state_dict) holds under its key, from the stored inner tensors.
    FlattenedTensorError before anything is built when a type name, metadata, outer
    size or inner tensor (name, shape, dtype) differs from the template's."""
    flattened = {k: v for k, v in state_dict.items() if isinstance(v, FlattenedTensor)}
    problems, rebuilt = [], {}
    for key, stored in flattened.items():
        live = template.get(key)
        if not isinstance(live, torch.Tensor) or not is_subclass(live):
            problems.append(f"{key}: stored as a {stored.kind}, rebuilt as a plain tensor")
            continue
        names, meta = live.__tensor_flatten__()  # type: ignore[attr-defined]
        wanted = {n: (tuple(getattr(live, n).shape), getattr(live, n).dtype) for n in names}
        held = {n: (tuple(t.shape), t.dtype) for n, t in stored.inner.items()}
        if (stored.kind, stored.meta, stored.size) != (type_name(live), repr(meta),
                                                        tuple(live.shape)) or held != wanted:
            problems.append(f"{key}: stored {stored.kind} {stored.meta} size {stored.size} "
                            f"{held}, rebuilt {type_name(live)} {meta!r} size "
                            f"{tuple(live.shape)} {wanted}")
            continue
        rebuilt[key] = type(live).__tensor_unflatten__(  # type: ignore[attr-defined]
            dict(stored.inner), meta, live.size(), live.stride())
    if problems:
        raise FlattenedTensorError(f"{what}: the stored quantized weights do not fit the net "
                                   "the recorded recipes rebuild; nothing was loaded:\n  - "
                                   + "\n  - ".join(problems))
    return {**state_dict, **rebuilt}
