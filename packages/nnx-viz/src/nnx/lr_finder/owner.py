"""The sweep as a run of core's epoch loop: an :class:`~nnx.extend.UpdateOwner` given to
``nnx.extend.run_fit_loop`` (the loop's public seam; never a subclass of the loop).

One epoch of ``num_iter`` batches, one rate per batch. The owner builds the sweep's
optimizer, sets each batch's rate, steps it and reports every update to the loop (so
the loop's update hooks and records see the sweep as any step function's run). The
sweep has no epoch to commit: after its last batch, or once the loss diverges, the
owner raises :class:`SweepEnded`, which the loop treats as a run that ended before its
first commit, so its reservation is released and nothing of it stays on disk.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch import nn

from nnx import NNEvaluationDataPoint, NNRun
from nnx.extend import LoopView, OptimizerSlot, OwnerBuild, resolve_precision
from nnx.lr_finder.curve import Smoother
from nnx.lr_finder.errors import LRSweepError
from nnx.viz.inputs import split_on_device

__all__ = ["OptimizerFactory", "SweepBatches", "SweepEnded", "SweepOwner"]

OptimizerFactory = Callable[[list[nn.Parameter], float], torch.optim.Optimizer]


class SweepEnded(Exception):  # a signal, not an error: the sweep is done
    """Raised by the owner when the sweep has measured what it will measure."""


class SweepBatches:
    """``count`` batches of ``loader``, starting it over when it runs out: the sweep's
    one epoch (sized, so the loop knows the epoch's length)."""

    def __init__(self, loader: Iterable[Any], count: int, owner: str) -> None:
        self.loader, self.count, self.owner = loader, count, owner

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Any]:
        produced = 0
        while True:
            empty = True
            for batch in self.loader:
                empty = False
                yield batch
                produced += 1
                if produced == self.count:
                    return
            if empty:
                raise LRSweepError(f"{self.owner}: the loader yielded no batch")


class SweepOwner:
    """The LR range test's update owner: plain steps of the caller's optimizer (SGD by
    default) at rising rates, the loss of each batch recorded and smoothed."""

    kind = "model"
    custom_step = True  # records no declared metric per batch: the loop summarises none

    def __init__(self, *, owner: str, loss_fn: Callable[..., torch.Tensor], adapter: Any,
                 optimizer: OptimizerFactory, lrs: list[float], smoother: Smoother,
                 train_params: Any) -> None:
        self.owner, self.loss_fn, self.adapter = owner, loss_fn, adapter
        self.optimizer_factory, self.lrs, self.smoother = optimizer, lrs, smoother
        self.train_params = train_params
        self.component = None  # nothing of the sweep is a checkpointed component
        self.swept: list[float] = []
        self.losses: list[float] = []
        self.smoothed: list[float] = []
        self.diverged = False

    # -- what the loop asks before the run --------------------------------------------
    def build(self, loop: LoopView) -> OwnerBuild:
        model = loop.model
        params = [p for p in model.net.parameters() if p.requires_grad]
        optimizer = self.optimizer_factory(params, self.lrs[0])
        slot = OptimizerSlot(None, optimizer, self.train_params.optim, None)
        return OwnerBuild(slots={None: slot},
                          precision=resolve_precision(model.params, model.device),
                          scaler=None, accumulate=1)

    def new_run(self, loop: LoopView, salt: str | None, root: str) -> NNRun:
        model = loop.model
        return NNRun(model_params=model.params, net_params=None,
                     train_params=self.train_params, salt=salt, transforms=loop.transforms,
                     root=root)

    def schedule_params(self) -> list[Any]:
        return []  # the rate is set per batch by the owner, never by a schedule

    # -- one batch: one rate, one step --------------------------------------------------
    def run_batch(self, loop: LoopView, batch: Any, batch_idx: int, epoch: int,
                  window: Any) -> NNEvaluationDataPoint:
        lr = self.lrs[batch_idx]
        optimizer = loop.primary.optimizer
        for group in optimizer.param_groups:
            group["lr"] = lr
        net = loop.model.net
        args, kwargs, target = split_on_device(self.adapter, batch, loop.model.device)
        loss = self.loss_fn(self.adapter.output(net(*args, **kwargs)), target)
        value = float(loss.detach())
        if not math.isfinite(value):
            if not self.swept:
                raise LRSweepError(f"{self.owner}: the loss at start_lr={lr:.3g} is {value}; "
                                   "check the model and loss_fn before sweeping rates")
            self.diverged = True
            raise SweepEnded
        optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)
        optimizer.step()
        loop.report_update(None)
        self.swept.append(lr)
        self.losses.append(value)
        self.smoothed.append(self.smoother.add(value))
        if self.smoother.diverged(self.smoothed[-1]):
            self.diverged = True
            raise SweepEnded
        if len(self.swept) == len(self.lrs):
            raise SweepEnded  # measured every rate: no epoch to commit
        return NNEvaluationDataPoint(loss=value)
