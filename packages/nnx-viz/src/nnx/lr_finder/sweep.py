"""``lr_range_test``, what ``nnx.lr_finder(...)`` runs: Smith's LR range test (spec
§13.1), non-destructive.

The sweep is a plain step loop of its own, not a run of core's epoch loop
(``nnx.extend.run_fit_loop`` with an ``UpdateOwner``): that loop's unit is a run (an
NNModel and its NNTrainParams, a reserved run directory, a committed epoch), while a
sweep takes a bare module and a loss function, changes the rate every batch, stops
mid-epoch and must leave no run behind (docs/architecture.md, "The loop is composed").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch import nn

from nnx.extend import POSITIVE, Domain, check_count, check_real
from nnx.lr_finder.curve import Smoother, lr_schedule, steepest_descent
from nnx.lr_finder.errors import LRSweepError
from nnx.lr_finder.report import LRFinderResult, sweep_figure
from nnx.lr_finder.restore import sweep_guard
from nnx.viz.extras import plotly
from nnx.viz.inputs import batch_splitter, device_of, network, split_on_device

__all__ = ["lr_range_test"]

_OWNER = "nnx.lr_finder"
_ABOVE_ONE = Domain(low=1.0, low_inclusive=False)
_SMOOTHING = Domain(low=0.0, high=1.0, high_inclusive=False)

OptimizerFactory = Callable[[list[nn.Parameter], float], torch.optim.Optimizer]


def _sgd(params: list[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=lr)


def _batches(loader: Iterable[Any], count: int) -> Iterator[Any]:
    """``count`` batches, starting the loader over when it runs out."""
    produced = 0
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
            produced += 1
            if produced == count:
                return
        if empty:
            raise LRSweepError(f"{_OWNER}: the loader yielded no batch")


def lr_range_test(net: Any, loader: Iterable[Any], *, loss_fn: Callable[..., torch.Tensor],
                  start_lr: float = 1e-7, end_lr: float = 10.0, num_iter: int = 100,
                  diverge_threshold: float = 4.0, smoothing: float = 0.98,
                  optimizer: OptimizerFactory | None = None,
                  batch_adapter: Any = None) -> LRFinderResult:
    """Train ``net`` (a module, or an NNModel's ``net``) for ``num_iter`` batches of
    ``loader`` at rates rising geometrically from ``start_lr`` to ``end_lr``, one rate per
    batch, and suggest the rate where the smoothed loss falls fastest (spec §13.1).

    ``loss_fn(output, target)`` scores each batch, split by ``batch_adapter`` (the
    model's own adapter, else core's default: ``(x, y)`` batches). ``optimizer(params,
    lr)`` builds the sweep's optimizer over the trainable parameters (plain SGD by
    default). ``smoothing`` is the EMA's weight on the past. The sweep stops early once
    the smoothed loss rises more than ``(diverge_threshold - 1) * |lowest|`` above its
    lowest, or a loss is not finite. The loader starts over when it has fewer batches.

    Non-destructive: every parameter and buffer value, submodule mode, ``requires_grad``
    flag, ``.grad``, hook, the loader's generators and the Python / NumPy / torch (and
    CUDA) RNG streams are put back on return and when the sweep raises. Without Plotly it
    raises ImportError before anything is touched; argument errors come before the net
    is touched too.
    """
    go, _ = plotly(_OWNER)  # first: without Plotly nothing else runs
    module = network(_OWNER, net)
    start = float(check_real(f"{_OWNER} start_lr", start_lr, POSITIVE))
    end = float(check_real(f"{_OWNER} end_lr", end_lr, Domain(low=start, low_inclusive=False)))
    count = check_count(f"{_OWNER} num_iter", num_iter, minimum=2)
    threshold = float(check_real(f"{_OWNER} diverge_threshold", diverge_threshold, _ABOVE_ONE))
    beta = float(check_real(f"{_OWNER} smoothing", smoothing, _SMOOTHING))
    if not callable(loss_fn):
        raise TypeError(f"{_OWNER}: loss_fn must be callable (output, target) -> loss; got "
                        f"{type(loss_fn).__name__}")
    if not isinstance(loader, Iterable):
        raise TypeError(f"{_OWNER}: loader must be iterable; got {type(loader).__name__}")
    adapter = batch_splitter(_OWNER, net, module, batch_adapter)
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise ValueError(f"{_OWNER}: {type(module).__name__} has no trainable parameter")
    build = optimizer or _sgd
    lrs = lr_schedule(start, end, count)
    with sweep_guard(module, loader):
        for param in params:
            param.grad = None  # the caller's gradients are kept aside, never accumulated into
        seen = _sweep(module, loader, loss_fn, adapter, build(params, start), lrs,
                      Smoother(beta, threshold))
    swept, losses, smoothed, diverged = seen
    suggested = steepest_descent(swept, smoothed)
    return LRFinderResult(lrs=tuple(swept), losses=tuple(losses),
                          smoothed_losses=tuple(smoothed), suggested_lr=suggested,
                          diverged=diverged,
                          figure=sweep_figure(go, swept, losses, smoothed, suggested))


def _sweep(module: nn.Module, loader: Iterable[Any], loss_fn: Callable[..., torch.Tensor],
           adapter: Any, opt: torch.optim.Optimizer, lrs: list[float],
           smoother: Smoother) -> tuple[list[float], list[float], list[float], bool]:
    """One optimizer step per rate; ``(lrs run, losses, smoothed losses, diverged)``."""
    device = device_of(module)
    swept: list[float] = []
    losses: list[float] = []
    smoothed: list[float] = []
    for lr, batch in zip(lrs, _batches(loader, len(lrs)), strict=True):
        for group in opt.param_groups:
            group["lr"] = lr
        args, kwargs, target = split_on_device(adapter, batch, device)
        loss = loss_fn(adapter.output(module(*args, **kwargs)), target)
        value = float(loss.detach())
        if not math.isfinite(value):
            if not swept:
                raise LRSweepError(f"{_OWNER}: the loss at start_lr={lr:.3g} is {value}; "
                                   "check the model and loss_fn before sweeping rates")
            return swept, losses, smoothed, True
        opt.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)
        opt.step()
        swept.append(lr)
        losses.append(value)
        smoothed.append(smoother.add(value))
        if smoother.diverged(smoothed[-1]):
            return swept, losses, smoothed, True
    return swept, losses, smoothed, False
