"""A module's topology: the fingerprint a runtime module is identified by, and the
names-and-shapes check every rebuild runs before loading saved weights (spec §3.2).

The fingerprint is the SHA-256 of the canonical JSON of the ordered
(name, shape, dtype) of the parameters and buffers plus ``repr(module)``, so
identical architectures share it and layer hyperparameters the weights do not
show (a dropout rate) still tell architectures apart. It reads no values and
changes no state. Uninitialized lazy parameters record their shape as None.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from nnx._foundation.hashing import canonical_bytes, sha256_hex
from nnx.params.descriptors import RuntimeModule

__all__ = ["BuiltinWeightsMismatchError", "WeightsMismatchError", "check_weights_fit",
           "runtime_descriptor", "topology_fingerprint"]


def _entries(named: Iterable[tuple[str, torch.Tensor]]) -> list[list[Any]]:
    return [[name, None if is_lazy(t) else list(t.shape), str(t.dtype)] for name, t in named]


def topology_fingerprint(module: nn.Module) -> str:
    """SHA-256 of the parameters' and buffers' (name, shape, dtype) and ``repr(module)``."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"a topology fingerprint needs an nn.Module; got {type(module).__name__}")
    doc = {"parameters": _entries(module.named_parameters()),
           "buffers": _entries(module.named_buffers()), "repr": repr(module)}
    return sha256_hex(canonical_bytes(doc))


def runtime_descriptor(module: nn.Module) -> RuntimeModule:
    """The :class:`RuntimeModule` describing ``module``: its class and topology fingerprint."""
    cls = type(module)
    fingerprint = topology_fingerprint(module)
    return RuntimeModule(module=f"{cls.__module__}.{cls.__qualname__}", fingerprint=fingerprint)


class WeightsMismatchError(ValueError):
    """Saved weights whose names or shapes differ from the module's; ``missing`` and
    ``unexpected`` list every differing name, so a caller can explain the difference
    (``NNModel.from_checkpoint`` asks the transform ops whether they recognise it)."""

    def __init__(self, message: str, *, missing: list[str], unexpected: list[str]) -> None:
        super().__init__(message)
        self.missing, self.unexpected = missing, unexpected


class BuiltinWeightsMismatchError(WeightsMismatchError, RuntimeError):
    """:class:`WeightsMismatchError` for a built-in (``Nets``) net: also a RuntimeError,
    the error spec §3.2 says a built-in net's mismatch surfaces as (``load_state_dict``'s),
    raised by the allocation-free check before that load. ``except ValueError`` and
    ``except RuntimeError`` both catch it."""


def check_weights_fit(module: nn.Module, state_dict: Mapping[str, torch.Tensor],
                      what: str, *, builtin: bool = False) -> None:
    """Refuse (:class:`WeightsMismatchError`, a ValueError) saved weights whose names or
    shapes differ from ``module``'s; ``builtin``: ``module`` is a built-in net's, so the
    error is a :class:`BuiltinWeightsMismatchError` (a RuntimeError too)."""
    expected = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    saved = {k: tuple(v.shape) for k, v in state_dict.items()}
    if expected == saved:
        return
    missing = sorted(set(expected) - set(saved))
    extra = sorted(set(saved) - set(expected))
    shapes = [f"{k} {saved[k]} vs {expected[k]}"
              for k in sorted(set(expected) & set(saved)) if expected[k] != saved[k]][:5]
    error = BuiltinWeightsMismatchError if builtin else WeightsMismatchError
    raise error(
        f"{what}: the saved weights do not fit the module (missing {missing[:5]}, "
        f"unexpected {extra[:5]}, other shapes {shapes}); nothing was loaded",
        missing=missing, unexpected=extra)
