"""kd_objective(teacher, alpha, temperature): distillation as an objective (§6.5, §10.1).

Two terms: "distillation", the softened KL(teacher ‖ student) at temperature T
summed over rows and scaled by T², normalized by the row count, with weight
alpha; and "supervised", the student's own loss, with weight 1 − alpha. So the
combined update is exactly alpha · T² · KL_batchmean + (1 − alpha) · L_hard of
the full batch however its rows are split into microbatches. At alpha=0 only
"supervised" is returned.

The teacher is frozen and in eval mode from the run's start, and runs in its own inference
precision (its explicit policy, or full precision), never the student's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nnx._foundation.validation import POSITIVE, PROBABILITY, check_real
from nnx.objectives._core import LossTerm, Objective, ObjectiveContext, ObjectiveResult
from nnx.objectives.supervised import supervised_term
from nnx.objectives.teacher import FrozenTeacher

__all__ = ["KDObjective", "distillation_loss", "kd_objective"]


def distillation_loss(student: torch.Tensor, teacher: torch.Tensor, temperature: float, *,
                      reduction: str = "sum", who: str = "knowledge distillation"
                      ) -> torch.Tensor:
    """The soft KD term, T² · KL(softmax(teacher/T) ‖ softmax(student/T)) over the last dim.

    The one home of the formula: ``kd_objective`` takes it summed over rows (its
    LossTerm normalizes by the row count); nnx-paradigms' KD steps take it
    ``reduction="batchmean"``. The teacher's logits are detached; a shape mismatch is a
    ValueError naming ``who``.
    """
    if teacher.shape != student.shape:
        raise ValueError(f"{who}: the teacher's output {tuple(teacher.shape)} does not match "
                         f"the student's {tuple(student.shape)}")
    t = temperature
    return F.kl_div(F.log_softmax(student / t, dim=-1), F.softmax(teacher.detach() / t, dim=-1),
                    reduction=reduction) * (t * t)


class KDObjective(Objective):
    def __init__(self, teacher: Any, alpha: float, temperature: float) -> None:
        self.alpha = check_real("kd_objective alpha", alpha, PROBABILITY)
        self.temperature = check_real("kd_objective temperature", temperature, POSITIVE)
        self.frozen = FrozenTeacher(teacher, "kd_objective")

    @property
    def teacher(self) -> Any:
        return self.frozen.teacher

    @property
    def teacher_net(self) -> nn.Module:
        return self.frozen.net

    def check_run(self, model: Any, *, optimizers: Mapping[str | None, Any],
                  callbacks: Sequence[Any]) -> None:
        self.frozen.check_student(model.net)
        # Frozen at the run's start: never at construction, before the run's checks
        # could refuse it.
        self.frozen.freeze()

    def __call__(self, ctx: ObjectiveContext) -> ObjectiveResult:
        inputs, target = ctx.split()
        if len(inputs) != 1 or getattr(inputs, "kwargs", None):
            raise ValueError("kd_objective needs batches with exactly one positional input; "
                             "use a custom objective for other layouts")
        if target is None:
            raise ValueError("kd_objective needs (X, Y) batches; got no target")
        self.frozen.freeze()
        output = ctx.full_precision(ctx.forward(inputs))
        hard, detached = supervised_term(ctx, output, target, weight=1.0 - self.alpha)
        if self.alpha == 0:
            return ObjectiveResult((hard,), output=detached, target=target)
        soft = distillation_loss(output, self.frozen.logits(inputs[0]), self.temperature,
                                 who="kd_objective")
        rows = math.prod(output.shape[:-1])
        kd = LossTerm("distillation", soft, float(rows), self.alpha)
        metrics = {"distillation": float(soft.detach()) / rows if rows else math.nan}
        return ObjectiveResult((kd, hard), metrics=metrics, output=detached, target=target)

    def __repr__(self) -> str:
        return f"kd_objective(alpha={self.alpha}, temperature={self.temperature})"


def kd_objective(teacher: Any, alpha: float, temperature: float) -> KDObjective:
    """Distill ``teacher`` (an NNModel or nn.Module) into the trained model."""
    return KDObjective(teacher, alpha, temperature)
