"""Batch adapters: how a module that is not a built-in net sees batches (spec §3.2).

An adapter splits a loader batch into ``(args, kwargs, target)`` for
``module(*args, **kwargs)`` and extracts the output tensor from what the
module returns. Adapters are runtime-only: never serialized, never part of a
run id.

* :class:`PositionalInputs` — ``(x1, ..., xn, y)`` batches → ``module(x1, ..., xn)``;
* :class:`KeywordInputs` — mapping batches → ``module(**{name: batch[name]})``;
* a module that defines ``unpack_batch`` (every built-in net) keeps using it;
* a module that defines ``batch_adapter()`` gets the adapter it returns: an add-on net
  that needs one layout's split plus its own check (nnx-graph's node nets refuse link
  batches by name) says so without changing how a mapping reaches ``predict()``.

Subclass :class:`BatchAdapter` for other layouts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import torch
from torch import nn

from nnx._foundation.validation import check_count

__all__ = ["BatchAdapter", "KeywordInputs", "ModelInputs", "PositionalInputs", "UnpackBatch",
           "default_batch_adapter"]

#: ``(args, kwargs, target)``: one batch split for ``module(*args, **kwargs)``.
Split = tuple[tuple[Any, ...], dict[str, Any], Any]


_NO_KWARGS: Mapping[str, Any] = MappingProxyType({})


class ModelInputs(tuple[Any, ...]):
    """A module call's inputs: the positional ones (the tuple itself) and ``kwargs``.

    ``NNModel.split_batch`` returns one, so ``(x,), y = model.split_batch(batch)``
    keeps working for positional modules. Equality is the tuple's (kwargs ignored).
    """

    kwargs: Mapping[str, Any]

    def __new__(cls, args: Iterable[Any] = (),
                kwargs: Mapping[str, Any] | None = None) -> ModelInputs:
        self = super().__new__(cls, args)
        self.kwargs = MappingProxyType(dict(kwargs)) if kwargs else _NO_KWARGS
        return self

    def __repr__(self) -> str:
        return f"ModelInputs({tuple(self)!r}, kwargs={dict(self.kwargs)!r})"


class BatchAdapter:
    """Splits batches for a module and reads its output; subclass for other layouts."""

    def split(self, batch: Any) -> Split:
        """``(args, kwargs, target)`` of one loader batch; ``target`` is None without one."""
        raise NotImplementedError(f"{type(self).__name__} must implement split(batch)")

    def output(self, raw: Any) -> torch.Tensor:
        """The output tensor of what the module returned (the default requires a tensor)."""
        if not isinstance(raw, torch.Tensor):
            raise TypeError(
                f"the module returned {type(raw).__name__}, not a tensor; subclass BatchAdapter "
                f"and override output(raw) to extract the tensor from it")
        return raw

    def predict_inputs(self, data: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``(args, kwargs)`` for a mapping given to ``predict()``: keyword inputs by default."""
        return (), dict(data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class PositionalInputs(BatchAdapter):
    """``module(x1, ..., xn)`` on ``(x1, ..., xn, y)`` batches (or ``(x1, ..., xn)``
    without a target; a bare tensor when ``n_inputs`` is 1)."""

    def __init__(self, n_inputs: int = 1) -> None:
        self.n_inputs = check_count("PositionalInputs.n_inputs", n_inputs)

    def split(self, batch: Any) -> Split:
        n = self.n_inputs
        if isinstance(batch, torch.Tensor) and n == 1:
            return (batch,), {}, None
        if isinstance(batch, (tuple, list)) and len(batch) in (n, n + 1):
            return tuple(batch[:n]), {}, batch[n] if len(batch) == n + 1 else None
        size = f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else ""
        raise ValueError(f"PositionalInputs(n_inputs={n}) expects ({n} input(s)[, target]) "
                         f"batches; got {type(batch).__name__}{size}")

    def __repr__(self) -> str:
        return f"PositionalInputs(n_inputs={self.n_inputs})"


class KeywordInputs(BatchAdapter):
    """``module(**{name: batch[name] for name in inputs})`` on mapping batches;
    ``batch[target]`` is the target (None when absent, or when ``target`` is None)."""

    def __init__(self, inputs: str | Sequence[str], target: str | None = "labels") -> None:
        names = (inputs,) if isinstance(inputs, str) else tuple(inputs)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"KeywordInputs.inputs must name one or more keyword arguments; "
                             f"got {inputs!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"KeywordInputs.inputs names an argument twice: {names!r}")
        if target is not None and (not isinstance(target, str) or not target or
                                   target in names):
            raise ValueError(f"KeywordInputs.target must be a key other than the inputs, or "
                             f"None; got {target!r}")
        self.inputs, self.target = names, target

    def _select(self, batch: Any) -> dict[str, Any]:
        if not isinstance(batch, Mapping):
            raise ValueError(f"KeywordInputs expects mapping batches (a dict per batch); got "
                             f"{type(batch).__name__}")
        missing = [n for n in self.inputs if n not in batch]
        if missing:
            raise ValueError(f"KeywordInputs: the batch has no {missing}; its keys are "
                             f"{sorted(map(str, batch))}")
        return {n: batch[n] for n in self.inputs}

    def split(self, batch: Any) -> Split:
        kwargs = self._select(batch)
        return (), kwargs, None if self.target is None else batch.get(self.target)

    def predict_inputs(self, data: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (), self._select(data)

    def __repr__(self) -> str:
        return f"KeywordInputs({self.inputs!r}, target={self.target!r})"


class UnpackBatch(BatchAdapter):
    """The module's own ``unpack_batch(batch) -> ((inputs...), target)`` (built-in nets)."""

    def __init__(self, unpack: Callable[[Any], tuple[Sequence[Any], Any]]) -> None:
        self.unpack = unpack

    def split(self, batch: Any) -> Split:
        inputs, target = self.unpack(batch)
        return tuple(inputs), {}, target

    def predict_inputs(self, data: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return tuple(data.values()), {}  # a built-in net's mapping: its inputs in order


def default_batch_adapter(module: nn.Module) -> BatchAdapter:
    """The adapter the module's ``batch_adapter()`` returns when it defines one, else its
    own ``unpack_batch``, else ``PositionalInputs()``."""
    own = getattr(module, "batch_adapter", None)
    if callable(own):
        adapter = own()
        if not isinstance(adapter, BatchAdapter):
            raise TypeError(f"{type(module).__name__}.batch_adapter() must return a "
                            f"BatchAdapter; got {type(adapter).__name__}")
        return adapter
    unpack = getattr(module, "unpack_batch", None)
    return UnpackBatch(unpack) if callable(unpack) else PositionalInputs()
