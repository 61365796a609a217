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

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nnx._foundation.validation import POSITIVE, PROBABILITY, check_real
from nnx.objectives._core import LossTerm, Objective, ObjectiveContext, ObjectiveResult
from nnx.objectives.supervised import supervised_term

__all__ = ["KDObjective", "kd_objective"]


class KDObjective(Objective):
    def __init__(self, teacher: Any, alpha: float, temperature: float) -> None:
        self.alpha = check_real("kd_objective alpha", alpha, PROBABILITY)
        self.temperature = check_real("kd_objective temperature", temperature, POSITIVE)
        net = getattr(teacher, "net", teacher)
        if not isinstance(net, nn.Module):
            raise TypeError(f"kd_objective's teacher must be an NNModel or an nn.Module; got "
                            f"{type(teacher).__name__}")
        self.teacher = teacher
        self.teacher_net = net
        self._frozen = False

    def _freeze(self) -> None:
        """Freeze the teacher (it never drifts while the student trains) once, at the
        run's start: never at construction, before the run's checks could refuse it."""
        if not self._frozen:
            for p in self.teacher_net.parameters():
                p.requires_grad_(False)
            self.teacher_net.eval()
            self._frozen = True

    def check_run(self, model: Any, *, optimizers: Mapping[str | None, Any],
                  callbacks: Sequence[Any]) -> None:
        if self.teacher_net is model.net:
            raise ValueError("kd_objective: the teacher must not be the student's own net")
        student = {id(p) for p in model.net.parameters()}
        if any(id(p) in student for p in self.teacher_net.parameters()):
            raise ValueError("kd_objective: the teacher shares parameters with the student")
        self._freeze()

    @contextlib.contextmanager
    def _teacher_precision(self) -> Iterator[None]:
        """Leave the student's autocast and enter the teacher's own inference policy."""
        device = next(self.teacher_net.parameters(), torch.empty(0)).device
        with torch.autocast(device_type=device.type, enabled=False):
            if hasattr(self.teacher, "inference_precision"):
                with self.teacher.inference_precision().autocast():
                    yield
            else:
                yield

    def _teacher_logits(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad(), self._teacher_precision():
            self.teacher_net.eval()
            if hasattr(self.teacher, "forward_raw"):
                out = self.teacher.forward_raw((x.to(self.teacher.device),))
            else:
                out = self.teacher_net(x)
        assert isinstance(out, torch.Tensor)
        return out.float().to(x.device)

    def __call__(self, ctx: ObjectiveContext) -> ObjectiveResult:
        inputs, target = ctx.split()
        if len(inputs) != 1 or getattr(inputs, "kwargs", None):
            raise ValueError("kd_objective needs batches with exactly one positional input; "
                             "use a custom objective for other layouts")
        if target is None:
            raise ValueError("kd_objective needs (X, Y) batches; got no target")
        self._freeze()
        output = ctx.full_precision(ctx.forward(inputs))
        hard, detached = supervised_term(ctx, output, target, weight=1.0 - self.alpha)
        if self.alpha == 0:
            return ObjectiveResult((hard,), output=detached, target=target)
        teacher = self._teacher_logits(inputs[0])
        if teacher.shape != output.shape:
            raise ValueError(f"kd_objective: teacher output {tuple(teacher.shape)} does not "
                             f"match the student's {tuple(output.shape)}")
        t = self.temperature
        soft = F.kl_div(F.log_softmax(output / t, dim=-1), F.softmax(teacher / t, dim=-1),
                        reduction="sum") * (t * t)
        rows = math.prod(output.shape[:-1])
        kd = LossTerm("distillation", soft, float(rows), self.alpha)
        metrics = {"distillation": float(soft.detach()) / rows if rows else math.nan}
        return ObjectiveResult((kd, hard), metrics=metrics, output=detached, target=target)

    def __repr__(self) -> str:
        return f"kd_objective(alpha={self.alpha}, temperature={self.temperature})"


def kd_objective(teacher: Any, alpha: float, temperature: float) -> KDObjective:
    """Distill ``teacher`` (an NNModel or nn.Module) into the trained model."""
    return KDObjective(teacher, alpha, temperature)
