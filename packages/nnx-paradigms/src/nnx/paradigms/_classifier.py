"""What every classifier step of nnx-paradigms shares (spec §3.1, §6.5, §10.1).

* the one-input batch rule: the batch is split by the model's batch adapter, which
  must yield exactly one positional input (and a target);
* the hard-label loss through the model's task adapter, so a native NLLLoss gets the
  same log-softmax adaptation as the supervised loop (CE and NLL students train
  identically from the same weights), and class weights / ignore_index / reduction
  stay authoritative;
* the student's top-1 error for the record.

An offline teacher batch (:class:`~nnx.paradigms.offline_distillation.TeacherBatch`)
carries probabilities, not logits: the live steps refuse it (§10.1 "Offline").
"""

from __future__ import annotations

from typing import Any

import torch

from nnx.paradigms.offline_distillation.dataset import TeacherBatch

__all__ = ["hard_loss", "one_input", "refuse_teacher_records", "top1_error"]


def refuse_teacher_records(batch: Any, who: str) -> None:
    """A TypeError for an offline teacher batch handed to a live-logit path."""
    if isinstance(batch, TeacherBatch):
        raise TypeError(f"{who} distills live teacher logits at a temperature; it got a "
                        "TeacherDataset batch (stored teacher probabilities): train it with "
                        "objective=dataset.objective(alpha) instead")


def one_input(model: Any, batch: Any, who: str) -> tuple[torch.Tensor, Any]:
    """``(x, target)`` of ``batch`` on the model's device: the adapter's one positional
    input and the target (refused when absent)."""
    refuse_teacher_records(batch, who)
    inputs, target = model.split_batch(batch)
    if len(inputs) != 1 or getattr(inputs, "kwargs", None):
        raise ValueError(f"{who} needs batches with exactly one positional input; the batch "
                         f"adapter yielded {len(inputs)} positional and "
                         f"{len(getattr(inputs, 'kwargs', None) or {})} keyword input(s)")
    if target is None:
        raise ValueError(f"{who} needs (X, Y) batches; got no target")
    return inputs[0], target


def hard_loss(model: Any, output: torch.Tensor, target: Any) -> torch.Tensor:
    """The student's own loss of ``output`` (float32 logits), reduced as the supervised
    loop reduces it: Σ numerator / its denominator, or Σ numerator for a sum loss."""
    adapter = model.task_adapter
    adapter.validate(output, target)
    numerator, denominator = adapter.loss_parts(output, target, model.loss_fn)
    if adapter.reduction(model.loss_fn) == "sum":
        return numerator  # type: ignore[no-any-return]
    return numerator / denominator  # type: ignore[no-any-return]


def top1_error(output: torch.Tensor, target: Any, loss_fn: Any) -> float | None:
    """The fraction of scored rows whose argmax misses the label (None when none is
    scored): class-index targets skip the loss's ignore_index, soft targets compare
    argmaxes."""
    if not isinstance(target, torch.Tensor) or output.dim() < 2:
        return None
    guess = output.detach().argmax(dim=1)
    if target.is_floating_point():
        if target.shape != output.shape:
            return None
        label = target.argmax(dim=1)
        valid = torch.ones_like(label, dtype=torch.bool)
    else:
        label = target.long()
        valid = label != int(getattr(loss_fn, "ignore_index", -100))
    count = int(valid.sum())
    if count == 0:
        return None
    return float(((guess != label) & valid).sum()) / count
