"""What the classifier step factories share (spec §3.1, §10).

* the one-input batch rule: the batch is split by the model's batch adapter, which
  must yield exactly one positional input (and a target, for the labelled steps);
* the student's own loss through the task's per-batch machinery
  (:func:`nnx.extend.task_batch_ops`, typed :class:`nnx.extend.TaskBatchOps`): a native
  ``NLLLoss`` gets ``log_softmax`` over the class axis first, exactly as the default
  step does, so CE and NLL students train identically from the same weights; class
  weights, ``ignore_index`` and ``reduction`` stay the loss module's;
* the λ-weighted correctness of a mixed batch, for the record (KD's steps record
  through :func:`nnx.extend.supervised_loss`, as the default step does);
* the live steps' refusal of an offline teacher batch
  (:class:`~nnx.paradigms.offline_distillation.TeacherBatch` carries probabilities,
  not logits; §10.1 "Offline").
"""

from __future__ import annotations

from typing import Any

import torch

from nnx.extend import TrainableModel, task_batch_ops
from nnx.paradigms.offline_distillation.batch import TeacherBatch

__all__ = ["classifier_batch", "labelled_input", "mixed_accuracy", "one_input",
           "refuse_teacher_records", "supervised_loss"]


def refuse_teacher_records(batch: Any, who: str) -> None:
    """A TypeError for an offline teacher batch handed to a live-logit path."""
    if isinstance(batch, TeacherBatch):
        raise TypeError(f"{who} distills live teacher logits at a temperature; it got a "
                        "TeacherDataset batch (stored teacher probabilities): train it with "
                        "objective=dataset.objective(alpha) instead")


def one_input(model: TrainableModel, batch: Any, who: str) -> tuple[torch.Tensor, Any]:
    """``(x, target)`` of ``batch`` on the model's device, split by the model's batch
    adapter, which must yield exactly one positional input (and no keyword input)."""
    refuse_teacher_records(batch, who)
    inputs, target = model.split_batch(batch)
    kwargs = getattr(inputs, "kwargs", None) or {}
    if len(inputs) != 1 or kwargs:
        raise ValueError(f"{who} needs batches with exactly one positional input; the batch "
                         f"adapter yielded {len(inputs)} positional and {len(kwargs)} keyword "
                         "input(s)")
    x = inputs[0]
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        got = f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{who} needs the input as a tensor of shape (B, ...); got {got}")
    return x, target


def labelled_input(model: TrainableModel, batch: Any, who: str) -> tuple[torch.Tensor, Any]:
    """:func:`one_input` of an (X, Y) batch: the target is required (class indices or
    soft targets, whatever the student's loss takes)."""
    x, target = one_input(model, batch, who)
    if target is None:
        raise ValueError(f"{who} needs (X, Y) batches; got no target")
    return x, target


def classifier_batch(model: TrainableModel, batch: Any,
                     who: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)`` of an (X, Y) batch whose Y holds integer class indices, one per row."""
    x, target = one_input(model, batch, who)
    if target is None:
        raise ValueError(f"{who} needs (X, Y) batches; got no target")
    if (not isinstance(target, torch.Tensor) or target.is_floating_point()
            or target.is_complex() or target.dtype == torch.bool):
        got = target.dtype if isinstance(target, torch.Tensor) else type(target).__name__
        raise ValueError(f"{who} needs integer class-index targets; got {got}")
    if target.dim() < 1 or target.shape[0] != x.shape[0]:
        raise ValueError(f"{who}: the target's shape {tuple(target.shape)} does not have the "
                         f"input's {x.shape[0]} rows")
    return x, target


def supervised_loss(model: TrainableModel, output: torch.Tensor,
                    target: torch.Tensor) -> torch.Tensor:
    """The student's ``loss_fn`` on ``output`` (float32): its summed loss over the valid
    targets over their weight (the loss's mean), or the sum for ``reduction="sum"``.

    Validates the batch against the task first, before anything is back-propagated.
    """
    ops, loss_fn = task_batch_ops(model), model.loss_fn
    ops.validate(output, target)
    numerator, denominator = ops.loss_parts(output, target, loss_fn)
    if ops.reduction(loss_fn) == "sum":
        return numerator
    # Every target ignored: the numerator is an exact 0 on the graph (no update), not 0/0.
    return numerator / denominator if float(denominator) > 0 else numerator


def mixed_accuracy(model: TrainableModel, output: torch.Tensor, y_a: torch.Tensor,
                   y_b: torch.Tensor, lam: float) -> float | None:
    """λ-weighted top-1 correctness against ``y_a`` and ``y_b`` over the valid targets
    (those not the loss's ``ignore_index``); None when every target is ignored."""
    pred = task_batch_ops(model).decode(output.detach())
    ignore = getattr(model.loss_fn, "ignore_index", None)
    total = torch.zeros((), dtype=torch.float64, device=pred.device)
    weight = torch.zeros((), dtype=torch.float64, device=pred.device)
    for y, share in ((y_a, lam), (y_b, 1.0 - lam)):
        valid = torch.ones_like(y, dtype=torch.bool) if ignore is None else y != ignore
        total = total + share * ((pred == y) & valid).sum().double()
        weight = weight + share * valid.sum().double()
    if float(weight) <= 0:
        return None
    return float(total / weight)
