"""Everything an LR sweep changes, recorded before it and put back after (spec §13.1).

The sweep trains the caller's net for real: it moves every parameter, updates BatchNorm
statistics, draws dropout masks and shuffles the loader. :func:`sweep_guard` records
what it will change and restores it in ``finally``, so the real run starts as though
the sweep never happened, also when the sweep raises:

* modes, ``requires_grad`` flags, ``.grad`` and hooks: nnx.viz's §13.2 guard
  (:func:`nnx.viz.guard.untouched`), here with ``mode="train"`` (the sweep trains);
* every parameter's and buffer's value, copied back into the same tensor object (an
  optimizer the caller built over ``net.parameters()`` keeps pointing at them; the sweep
  itself only steps values, it never replaces a tensor);
* the Python, NumPy, torch and CUDA global RNG streams (core's snapshot,
  ``nnx.extend.capture_rng_state``, the one resume restores);
* the loader's own ``torch.Generator`` objects (the DataLoader's ``generator`` and its
  samplers'), which a shuffling epoch advances without touching the global stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from nnx.extend import capture_rng_state, restore_rng_state
from nnx.viz.guard import untouched

__all__ = ["loader_generators", "sweep_guard"]


def loader_generators(loader: Any) -> list[torch.Generator]:
    """The distinct ``torch.Generator`` objects a loader iterates with: its own, its
    sampler's and its batch sampler's sampler's (a ``RandomSampler`` given one)."""
    sampler = getattr(loader, "sampler", None)
    batch_sampler = getattr(loader, "batch_sampler", None)
    holders = (loader, sampler, batch_sampler, getattr(batch_sampler, "sampler", None))
    found: dict[int, torch.Generator] = {}
    for holder in holders:
        generator = getattr(holder, "generator", None)
        if isinstance(generator, torch.Generator):
            found.setdefault(id(generator), generator)
    return list(found.values())


def _tensor_values(net: nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Every parameter and buffer (a shared tensor once) beside a copy of its value."""
    return [(tensor, tensor.detach().clone()) for tensor in (*net.parameters(), *net.buffers())]


def _restore_tensors(values: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    with torch.no_grad():
        for tensor, value in values:
            tensor.copy_(value)


@contextmanager
def sweep_guard(net: nn.Module, loader: Any) -> Iterator[nn.Module]:
    """Run the body with ``net`` in train mode; afterwards (also on error) its values,
    modes, flags, grads and hooks, the loader's generators and the RNG streams are as
    they were before."""
    rng = capture_rng_state()
    generators = [(g, g.get_state()) for g in loader_generators(loader)]
    values = _tensor_values(net)
    try:
        with untouched(net, mode="train"):
            yield net
    finally:
        _restore_tensors(values)
        for generator, state in generators:
            generator.set_state(state)
        restore_rng_state(rng)
