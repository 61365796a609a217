"""finalize_step: how an imperative paradigm step finishes its update (spec §6.1, §2.5).

The paradigm, diffusion and embeddings step factories compute a loss their
own way and hand it here. ``finalize_step`` runs the NaN guard before
backward, back-propagates, and closes the window through the one update
window (:mod:`nnx._engine.update_window`, the default step's and the update engine's
too): clip by ``ctx.grad_clip_norm``, step, ``ctx.report_update()`` (so an
update-clock schedule steps once per batch), zero_grad.

These steps train in full precision, one microbatch per update: a scaler, a
reduced ``ctx.precision`` or ``accumulate_grad_batches > 1`` is refused with
a ValueError instead of silently dropped. Mark the step function with
:func:`full_precision_only` so NNModel.train refuses a reduced precision
before any run is reserved; an objective (§6.5) gets both from the engine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from nnx._contracts.trainable import TrainableModel
from nnx._engine.steps import TrainStepContext
from nnx._engine.update_window import WindowStepper, holds_gradients
from nnx._foundation.records import NNEvaluationDataPoint, with_extra_now
from nnx.objectives.ownership import full_precision_only, is_full_precision_only

__all__ = ["FinalizedStep", "SupervisedLoss", "finalize_step", "full_precision_only",
           "is_full_precision_only", "supervised_loss", "train_mode"]


@dataclass(frozen=True)
class FinalizedStep:
    """What finalize_step did: the loss value read once (the guard and the record) and
    whether the optimizer stepped (False when the NaN guard dropped the batch)."""

    loss: float
    stepped: bool
    #: The ``values`` tensors finalize_step was given, read back with the loss.
    values: tuple[float, ...] = ()

    def record(self, **extra: float) -> NNEvaluationDataPoint:
        """The batch's record: the loss, as error too (BEST tracking stays meaningful)."""
        return NNEvaluationDataPoint(loss=self.loss, error=self.loss, extra=dict(extra))


class SupervisedLoss:
    """A step's supervised term through the model's task adapter, as the default step
    computes it (:func:`supervised_loss`).

    ``loss`` is what to back-propagate: the loss module's mean over the scored targets
    (torch's own mean where the adapter's fast path applies; the summed loss over
    their weight otherwise), the sum for ``reduction="sum"``, and an exact 0 on the
    graph when every target is ignored. ``value`` is its value (already read back
    once by the adapter; 0.0 when every target is ignored).
    """

    __slots__ = ("_batch", "loss", "value")

    def __init__(self, batch: Any) -> None:
        self._batch = batch
        self.loss: torch.Tensor = batch.numerator
        self.value: float = float(batch.value) if batch.has_targets else 0.0

    def record(self, loss: float, **extra: float) -> NNEvaluationDataPoint:
        """The batch's record with ``loss`` (the step's own) and ``extra``: the top-1
        error / accuracy (and the task's scores) the default step records, computed as
        it does, on the CPU when the record is first read (at the epoch's commit)."""
        return with_extra_now(self._batch.record(loss), extra)


def supervised_loss(model: TrainableModel, output: torch.Tensor,
                    target: torch.Tensor) -> SupervisedLoss:
    """``model.loss_fn`` on ``output`` through the model's task adapter, exactly as the
    default step evaluates one microbatch that is its own window (spec §3.1, §6.3): a
    native NLLLoss gets ``log_softmax`` first, class weights, ``ignore_index``,
    ``label_smoothing`` and ``reduction`` stay the module's. A target that does not fit
    the task (a class index out of range, a float target for class indices) raises
    TaskValidationError before anything is back-propagated.

    For an add-on step whose loss adds a supervised term (KD's hard loss): one
    call, the loss value read once, and the record's label counting left to the
    commit where the default step leaves it.
    """
    return SupervisedLoss(model.task_adapter.training_batch(output, target, model.loss_fn,
                                                            normalize=True))


def train_mode(ctx: TrainStepContext) -> None:
    """Put the net in train mode at the first batch of each epoch, as the loop does for
    the built-in step and objectives.

    An imperative step owns its mode (§11): the loop leaves it alone, so adapters
    injected into an ``eval()`` net keep their eval behaviour under a step that never
    calls ``train()``. nnx's own step factories train in train mode, and call this
    first thing.
    """
    if ctx.batch_idx == 0:
        ctx.model.net.train()


def _refuse_unsupported(ctx: TrainStepContext, loss: object) -> None:
    if ctx.scaler is not None:
        raise ValueError("finalize_step trains in full precision and cannot apply ctx.scaler "
                         "(an FP16 GradScaler); train the objective counterpart instead")
    if ctx.precision.is_reduced:
        raise ValueError(f"finalize_step trains in full precision; ctx.precision is "
                         f"{ctx.precision.policy.name}: set NNModelParams.precision=FP32, or "
                         "train the objective counterpart")
    if ctx.accumulate_grad_batches != 1:
        raise ValueError(f"finalize_step steps once per batch and cannot accumulate: "
                         f"accumulate_grad_batches={ctx.accumulate_grad_batches}; set it to 1, "
                         "or train the objective counterpart")
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ValueError(f"finalize_step: loss must be a scalar tensor; got {shape}")


def finalize_step(ctx: TrainStepContext, loss: torch.Tensor,
                  values: Sequence[torch.Tensor] = ()) -> FinalizedStep:
    """Guard, back-propagate and step ``ctx.optimizer`` on ``loss`` (a scalar tensor).

    A non-finite loss is never back-propagated: the batch's gradients are dropped and
    the loop warns once per epoch (and refuses an epoch left without updates), as the
    default step's guard does. The step reports its own update, so the calling step
    function must not call ``ctx.report_update()`` for it. ``values`` (scalar tensors
    the step records, e.g. its loss terms) come back as ``FinalizedStep.values``, read
    in the loss's one transfer from a device, before the update.
    """
    _refuse_unsupported(ctx, loss)
    value, read = _read(loss, values)
    bad = not math.isfinite(value)
    if ctx.distributed is not None:
        bad = ctx.distributed.any(bad)  # every rank drops the batch, or none does
    window = ctx.window
    if bad:
        window.poisoned = True
        window.nonfinite = window.nonfinite or "training loss"
    else:
        if holds_gradients(ctx.optimizer):
            # Gradients left from before this batch never join its update (every window
            # this helper closes zeroes its own).
            ctx.optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)
    stepper = WindowStepper((ctx.optimizer,), (ctx.grad_clip_norm,), None,
                            report=_Report(ctx))
    closed = stepper.close(takes_update=not bad)
    return FinalizedStep(loss=value, stepped=closed == "stepped", values=read)


def _read(loss: torch.Tensor, values: Sequence[torch.Tensor]) -> tuple[float, tuple[float, ...]]:
    """The loss's value and ``values``'; one device-to-host transfer off the CPU (on the
    CPU, reading each is cheaper than stacking them)."""
    if not values:
        return float(loss.detach()), ()
    if loss.is_cpu:
        return float(loss.detach()), tuple(float(v.detach()) for v in values)
    both = torch.stack([loss.detach().float(), *(v.detach().float().reshape(())
                                                 for v in values)]).tolist()
    return both[0], tuple(both[1:])


@dataclass(frozen=True)
class _Report:
    ctx: TrainStepContext

    def __call__(self, stepped: Sequence[int]) -> None:
        self.ctx.report_update()
