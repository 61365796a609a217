"""supervised_objective(): the model's own loss as an objective (spec §6.5).

The term is the task adapter's summed loss over valid targets with its own
denominator (non-ignored targets, class weights; a TaskSpec's masked loss),
or a plain sum for a ``reduction="sum"`` loss: exactly what the default step
back-propagates, so the engine reproduces it and adds accumulation,
precision and clipping.
"""

from __future__ import annotations

from typing import Any

import torch

from nnx.objectives._core import LossTerm, Objective, ObjectiveContext, ObjectiveResult

__all__ = ["SupervisedObjective", "supervised_objective"]


class SupervisedObjective(Objective):
    """``loss_fn(net(X), Y)`` normalized by its own denominator; one term, "supervised"."""

    def __call__(self, ctx: ObjectiveContext) -> ObjectiveResult:
        inputs, target = ctx.split()
        if target is None:
            raise ValueError("supervised_objective needs (X, Y) batches; got no target")
        output = ctx.full_precision(ctx.forward(inputs))
        term, detached = supervised_term(ctx, output, target)
        return ObjectiveResult((term,), output=detached, target=target)

    def __repr__(self) -> str:
        return "supervised_objective()"


def supervised_term(ctx: ObjectiveContext, output: torch.Tensor, target: Any,
                    weight: float = 1.0) -> tuple[LossTerm, torch.Tensor]:
    """The "supervised" term of ``output`` (float32) against ``target``, and the
    detached output for the record."""
    model = ctx.model
    adapter = model.task_adapter
    adapter.validate(output, target)
    numerator, denominator = adapter.loss_parts(output, target, model.loss_fn)
    summed = adapter.reduction(model.loss_fn) == "sum"
    term = LossTerm("supervised", numerator, None if summed else denominator, weight)
    return term, output.detach()


def supervised_objective() -> SupervisedObjective:
    """The model's loss function as an objective."""
    return SupervisedObjective()
