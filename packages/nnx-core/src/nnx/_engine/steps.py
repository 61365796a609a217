"""The training-step hook contract (spec §6, §6.1) and the default supervised step.

A step function receives a :class:`TrainStepContext` per microbatch and
returns that microbatch's :class:`NNEvaluationDataPoint`. The default step
owns the whole update: forward under the run's autocast, the task's masked
loss, the inline NaN guard, accumulation over windows of
``accumulate_grad_batches`` microbatches normalized by the window's total
loss weight (uneven batches and a short last window reduce exactly like one
full batch), and the window's close (unscale, clipping, step,
``report_update``, zero_grad), which is :mod:`nnx._engine.update_window`'s, shared
with the update engine and ``finalize_step``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from nnx._contracts.precision import ResolvedPrecision
from nnx._contracts.trainable import TrainableModel, TrainingContextBase
from nnx._engine.update_window import WindowStepper, holds_gradients
from nnx._foundation.records import NNEvaluationDataPoint
from nnx.objectives.ownership import imperative_step

__all__ = ["EvalStepContext", "TrainStepContext", "UpdateWindow", "batch_extra_metrics",
           "default_train_step", "with_extra"]


@dataclass(eq=False)
class UpdateWindow:
    """The accumulation window the current microbatch belongs to."""

    size: int
    position: int = 0  # microbatches already in the window
    closes: bool = False  # this microbatch ends the window
    denominator: float = 0.0  # Σ weights of the window's batches that are not normalized
    has_targets: bool = False  # some batch of the window has a valid target
    poisoned: bool = False
    summed: bool = False  # a reduction="sum" loss: the window's update is Σ numerators
    normalized: bool = False  # a one-microbatch window back-propagated numerator / weight
    global_denominator: float = 0.0  # under DDP: the window's weight summed over every rank
    # Why the NaN guard dropped the window ("training loss"), None when it did not: the
    # loop counts such windows and warns once per epoch (nnx._engine.nonfinite).
    nonfinite: str | None = None


@dataclass(eq=False)
class TrainStepContext(TrainingContextBase):
    """What one training microbatch's step sees.

    Honor ``grad_clip_norm``, ``accumulate_grad_batches``, ``scaler`` and
    ``precision`` (``precision.autocast()`` is the forward context) in a
    custom step, and call :meth:`report_update` after each optimizer step you
    take yourself. Run the training forward with :meth:`forward`: under DDP it
    goes through the wrapper (``train_net``), whose backward averages the
    gradients over ranks; ``ctx.model.forward_raw`` does the same.
    """

    model: TrainableModel
    batch: Any
    batch_idx: int
    epoch: int
    optimizer: torch.optim.Optimizer
    precision: ResolvedPrecision
    scaler: torch.amp.GradScaler | None
    grad_clip_norm: float | None
    accumulate_grad_batches: int
    window: UpdateWindow
    _on_update: Callable[[], None] = field(repr=False, default=lambda: None)
    summary: Any = None  # the epoch's training-summary accumulator, when declared
    distributed: Any = None  # the DistributedSession under DDP (nnx.distributed)
    _stepper: WindowStepper | None = field(repr=False, default=None)  # built at first close
    # The DistributedDataParallel wrapper of model.net under DDP, None otherwise: the
    # context carries it, so the model itself never holds a wrapper.
    train_net: nn.Module | None = field(repr=False, default=None)
    # The run's extra_metrics (name -> fn(y_true, y_pred)): the default step scores each
    # batch with them (§20); a custom step decides whether to (§8.3).
    extra_metrics: Mapping[str, Callable[..., Any]] = field(repr=False, default_factory=dict)

    def report_update(self, name: str | None = None) -> None:
        """Tell NNx an optimizer update was committed (steps update-clock schedules)."""
        if name is not None:
            raise ValueError("NNModel.train has one optimizer: call report_update() without "
                             "a name")
        self._on_update()

    def _report_stepped(self, stepped: Sequence[int]) -> None:
        self._on_update()  # the default step's one optimizer stepped: one update


@dataclass(eq=False)
class EvalStepContext:
    """What a custom evaluation sees: the whole validation loader, once per epoch."""

    model: TrainableModel
    val_loader: Any
    extra_metrics: Any
    epoch_idx: int
    metrics: tuple[Any, ...] = ()

    @property
    def epoch(self) -> int:
        """``epoch_idx`` under the name the training contexts use; read-only."""
        return self.epoch_idx


def _stepper(ctx: TrainStepContext) -> WindowStepper:
    """The context's one-optimizer stepper, built at its first window close."""
    stepper = ctx._stepper
    if stepper is None or stepper.optimizers[0] is not ctx.optimizer:
        stepper = ctx._stepper = WindowStepper(
            (ctx.optimizer,), (ctx.grad_clip_norm,), ctx.scaler, report=ctx._report_stepped)
    return stepper


def _close_window(ctx: TrainStepContext) -> None:
    """Close the default step's window through the one update window (nnx._engine.update_window):
    the NaN guard or an all-masked window takes no update; otherwise the gradients, which
    hold Σ numerators, are divided by the window's Σ weights."""
    window = ctx.window
    dist = ctx.distributed
    weighted = window.has_targets if dist is None else window.global_denominator > 0
    takes_update = weighted and not window.poisoned
    coefficient = 1.0
    if takes_update and dist is not None:  # DDP averaged Σ numerators: × world / global weight
        coefficient = float(dist.world_size) if window.summed else (
            dist.world_size / window.global_denominator)
    elif takes_update and not window.summed and not window.normalized:
        coefficient = 1.0 / window.denominator  # Σ numerators / Σ weights over the window
    _stepper(ctx).close(takes_update=takes_update, coefficient=coefficient)


def _distributed_backward(ctx: TrainStepContext, batch: Any, output: torch.Tensor) -> None:
    """Under DDP every rank takes the same decision and joins the same all-reduce: the
    microbatch's weight and NaN guard are agreed first, a rank whose targets are all
    masked back-propagates zeros, and gradients are normalized by the global weight."""
    window, weight = ctx.window, batch.weight
    bad = weight > 0 and not math.isfinite(batch.value)
    total, poisoned = ctx.distributed.sum([weight, float(bad)])
    # FSDP reduces a window's gradients at its last backward only, which must then run
    # on every rank even without a loss: it carries what the earlier ones left unsharded.
    flush = ctx.distributed.window_backward(ctx.train_net, window.closes)
    if poisoned > 0 or window.poisoned:
        if poisoned > 0 and window.nonfinite is None:
            window.nonfinite = "training loss (on some rank)"
        window.poisoned = True
        if not flush:
            return
        total = 0.0  # the dropped window's gradients are zeroed when it closes
    window.global_denominator += total
    if total <= 0 and not flush:
        return  # masked on every rank: nobody back-propagates
    loss = batch.numerator if weight > 0 and total > 0 else (output * 0).sum()
    torch.autograd.backward(loss if ctx.scaler is None else ctx.scaler.scale(loss))


@imperative_step  # it steps the optimizer itself: never an objective (§6.5)
def default_train_step(ctx: TrainStepContext) -> NNEvaluationDataPoint:
    """The supervised step: ``loss_fn(net(X), Y)`` → backward → (window end) step.

    Per microbatch it reads the loss value back from the device (the NaN guard
    and the record) and, on a GPU, the labels (the target's value check and the
    record). On the CPU the labels of a batch with a finite mean loss are
    counted when its record is first read, at the epoch's commit: torch's own
    loss has already refused a class index out of range (docs/architecture.md).
    A window of one microbatch back-propagates the normalized loss (Σ numerator
    / Σ weight of the window, as a mean loss does) instead of rescaling the
    gradients at the window's end.
    """
    model, window = ctx.model, ctx.window
    inputs, target = model.split_batch(ctx.batch)
    if window.position == 0 and holds_gradients(ctx.optimizer):
        ctx.optimizer.zero_grad(set_to_none=True)
    if ctx.precision.is_reduced:
        with ctx.precision.autocast():
            raw = ctx.forward(inputs)
    else:  # full precision: no autocast context to enter
        raw = ctx.forward(inputs)
    # Loss bookkeeping and records in full precision.
    output = raw if raw.dtype is torch.float32 else raw.float()
    if target is None:
        raise ValueError("the default training step needs (X, Y) batches; got no target")
    # Validates the batch before anything is back-propagated.
    batch = model.task_adapter.training_batch(
        output, target, model.loss_fn,
        normalize=window.position == 0 and window.closes and ctx.distributed is None)
    window.summed = batch.summed
    has_targets, loss_value = batch.has_targets, batch.value
    if ctx.distributed is not None:
        _distributed_backward(ctx, batch, output)
    elif has_targets and not math.isfinite(loss_value):
        # The inline NaN guard: never back-propagate a non-finite loss; drop the window
        # (the loop warns once per epoch, and refuses an epoch it left without updates).
        window.poisoned = True
        window.nonfinite = window.nonfinite or "training loss"
    elif has_targets:
        window.normalized = batch.normalized
        numerator = batch.numerator
        torch.autograd.backward(numerator if ctx.scaler is None else ctx.scaler.scale(numerator))
    window.has_targets = window.has_targets or has_targets
    if not batch.normalized:  # a normalized batch's window is never rescaled by its weight
        window.denominator += batch.weight
    if window.closes:
        if ctx.distributed is not None and window.global_denominator <= 0:
            window.poisoned = True  # masked on every rank: no update anywhere
        _close_window(ctx)
    if ctx.summary is not None:
        ctx.summary.update(batch.output, target, loss_numerator=batch.total,
                           loss_denominator=batch.weight, validate=False)
    record = batch.record(loss_value if has_targets else None)
    if ctx.extra_metrics and has_targets:
        record = with_extra(record, batch_extra_metrics(model, batch.output, target,
                                                        ctx.extra_metrics))
    return record


def batch_extra_metrics(model: TrainableModel, output: torch.Tensor, target: Any,
                        extra_metrics: Mapping[str, Callable[..., Any]]) -> dict[str, float]:
    """The run's extra_metrics on one training batch (§20: the loop computes them per
    batch), each ``fn(y_true, y_pred)`` over the batch's valid targets only (§6.3), as
    evaluate() calls them over a whole loader; nothing when every target is masked."""
    if not extra_metrics or target is None:
        return {}
    y_true, y_pred = model.task_adapter.extra_metric_inputs(output.detach(), target)
    if len(y_true) == 0:
        return {}
    return {name: float(fn(y_true, y_pred)) for name, fn in extra_metrics.items()}


def with_extra(record: NNEvaluationDataPoint, values: Mapping[str, float]
               ) -> NNEvaluationDataPoint:
    """``record`` with ``values`` added to its ``extra`` (they win a name clash, as in
    evaluate())."""
    if not values:
        return record
    return dataclasses.replace(record, extra={**record.extra, **values})
