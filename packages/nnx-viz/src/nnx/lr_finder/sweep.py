"""``lr_range_test``, what ``nnx.lr_finder(...)`` runs: Smith's LR range test (spec
§13.1), non-destructive.

The sweep's steps are driven by core's epoch loop through its public seam
(``nnx.extend.run_fit_loop`` with :class:`~nnx.lr_finder.owner.SweepOwner`): one epoch
of ``num_iter`` batches in a scratch runs root, ended by the owner before any commit, so
no run and no file is left behind (docs/architecture.md, "The loop is composed").
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from nnx import Devices, NNModel, NNModelParams, NNOptimParams, NNTrainParams
from nnx.extend import POSITIVE, Domain, check_count, check_real, run_fit_loop
from nnx.lr_finder.curve import Smoother, lr_schedule, steepest_descent
from nnx.lr_finder.owner import OptimizerFactory, SweepBatches, SweepEnded, SweepOwner
from nnx.lr_finder.report import LRFinderResult, sweep_figure
from nnx.lr_finder.restore import sweep_guard
from nnx.viz.extras import plotly
from nnx.viz.inputs import batch_splitter, network

__all__ = ["lr_range_test"]

_OWNER = "nnx.lr_finder"
_ABOVE_ONE = Domain(low=1.0, low_inclusive=False)
_SMOOTHING = Domain(low=0.0, high=1.0, high_inclusive=False)

def _sgd(params: list[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=lr)


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
    lrs = lr_schedule(start, end, count)
    with sweep_guard(module, loader):
        for param in params:
            param.grad = None  # the caller's gradients are kept aside, never accumulated into
        owner = _sweep(module, loader, loss_fn, adapter, optimizer or _sgd, lrs,
                       Smoother(beta, threshold))
    suggested = steepest_descent(owner.swept, owner.smoothed)
    return LRFinderResult(lrs=tuple(owner.swept), losses=tuple(owner.losses),
                          smoothed_losses=tuple(owner.smoothed), suggested_lr=suggested,
                          diverged=owner.diverged,
                          figure=sweep_figure(go, owner.swept, owner.losses, owner.smoothed,
                                              suggested))


def _sweep(module: nn.Module, loader: Iterable[Any], loss_fn: Callable[..., torch.Tensor],
           adapter: Any, optimizer: OptimizerFactory, lrs: list[float],
           smoother: Smoother) -> SweepOwner:
    """One epoch of core's loop over ``len(lrs)`` batches, one rate each; the owner holds
    what was measured. The module is wrapped as it stands (its device, in place), the
    loop writes only under a scratch root that is removed afterwards."""
    model = NNModel(module=module, params=NNModelParams(device=Devices.AUTO))
    train = NNTrainParams(n_epochs=1, train_loader=SweepBatches(loader, len(lrs), _OWNER),
                          scheduler=None, seed=None,
                          optim=NNOptimParams.builder().sgd(max_lr=lrs[0]).build())
    owner = SweepOwner(owner=_OWNER, loss_fn=loss_fn, adapter=adapter, optimizer=optimizer,
                       lrs=lrs, smoother=smoother, train_params=train)
    # SweepEnded is how every sweep ends: before a commit, so the loop keeps nothing.
    with (tempfile.TemporaryDirectory(prefix="nnx-lr-finder-") as scratch,
          contextlib.suppress(SweepEnded)):
        run_fit_loop(owner, model, train, root=scratch, verbose=False)
    return owner
