"""``summary``: torchinfo's parameter table of a net, tied parameters counted once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from nnx.viz.extras import torchinfo
from nnx.viz.guard import untouched
from nnx.viz.inputs import batch_splitter, device_of, network, split_on_device

__all__ = ["summary"]

_OWNER = "nnx.viz.summary"


def _batch_inputs(model: object, net: nn.Module, batch: Any,
                  batch_adapter: Any) -> tuple[list[Any], dict[str, Any]]:
    """The forward's ``(args, kwargs)`` of one loader batch, split as training splits it."""
    adapter = batch_splitter(_OWNER, model, net, batch_adapter)
    args, kwargs, _target = split_on_device(adapter, batch, device_of(net))
    return args, kwargs


def _count_unique(stats: Any, net: nn.Module) -> Any:
    """torchinfo sums each module's parameters, so a tensor two modules share (tied
    embeddings) is counted twice; ``net.parameters()`` yields each tensor once."""
    params = list(net.parameters())
    stats.total_params = sum(p.numel() for p in params)
    stats.trainable_params = sum(p.numel() for p in params if p.requires_grad)
    stats.total_param_bytes = sum(p.numel() * p.element_size() for p in params)
    return stats


def summary(model: object, input_size: Sequence[int] | Sequence[Sequence[int]] | None = None,
            *, batch: Any = None, batch_adapter: Any = None, **torchinfo_kwargs: Any) -> Any:
    """torchinfo's ``ModelStatistics`` of ``model`` (an NNModel's ``net``, or a module).

    ``input_size`` (with the batch axis) or one loader ``batch`` (split by
    ``batch_adapter``, the model's own adapter by default) runs one forward pass for the
    shapes and mult-adds; with neither, only the parameters are listed. ``total_params``
    / ``trainable_params`` count a shared (tied) tensor once. The forward runs in eval
    mode; every submodule's mode, flags and hooks are put back, also on error (§13.2).
    Other keywords go to ``torchinfo.summary`` (``depth``, ``col_names``, ...). Needs the
    ``torchinfo`` extra.
    """
    info = torchinfo(_OWNER)
    net = network(_OWNER, model)
    if input_size is not None and batch is not None:
        raise ValueError(f"{_OWNER}: pass input_size or batch, not both")
    if batch_adapter is not None and batch is None:
        raise ValueError(f"{_OWNER}: batch_adapter splits a batch; pass batch= too")
    for key in ("input_data", "mode", "verbose"):
        if key in torchinfo_kwargs:
            raise TypeError(f"{_OWNER}: {key}= is set by nnx.viz (pass input_size or "
                            f"batch; the forward runs in eval mode, nothing is printed)")
    # torchinfo's own mode handling puts back only the root's flag (mode="eval" then
    # train(saved)); untouched() puts back every submodule's.
    with untouched(net, mode="eval"):
        if batch is not None:
            args, kwargs = _batch_inputs(model, net, batch, batch_adapter)
            # torchinfo passes a dict input_data as keywords and a list as positionals.
            data: Any = kwargs if kwargs and not args else args
            if args and kwargs:
                torchinfo_kwargs = {**kwargs, **torchinfo_kwargs}
            stats = info.summary(net, input_data=data, mode="eval", verbose=0,
                                 device=device_of(net), **torchinfo_kwargs)
        else:
            stats = info.summary(net, input_size=input_size, mode="eval", verbose=0,
                                 device=device_of(net), **torchinfo_kwargs)
    return _count_unique(stats, net)
