"""The three parts of an offline report, summed over TeacherBatch values (spec §10.1).

Teacher agreement, imitation loss and labelled quality, each over its own records
(module :mod:`~nnx.paradigms.offline_distillation.report` says why they are kept apart),
and :func:`offline_eval_step`, the same sums as a training-loop ``eval_step_fn``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nnx import NNEvaluationDataPoint
from nnx.extend import preserved_state
from nnx.paradigms.offline_distillation.batch import TeacherBatch, imitation_sums, student_logits

__all__ = [
    "ImitationLoss",
    "LabelledQuality",
    "OfflineReport",
    "Student",
    "TeacherAgreement",
    "offline_eval_step",
    "score",
]


@dataclass(frozen=True)
class TeacherAgreement:
    """Student argmax == teacher argmax, over every record."""

    records: int
    agreement: float


@dataclass(frozen=True)
class ImitationLoss:
    """Mean KL(teacher ‖ student), over every record."""

    records: int
    loss: float


@dataclass(frozen=True)
class LabelledQuality:
    """Accuracy and NLL against the labels, over the labelled records only."""

    records: int
    accuracy: float | None
    nll: float | None


@dataclass(frozen=True)
class OfflineReport:
    """What :func:`evaluate_offline` returns: the three parts, kept apart."""

    agreement: TeacherAgreement
    imitation: ImitationLoss
    labelled: LabelledQuality

    def text(self) -> str:
        lines = [f"teacher agreement: {self.agreement.agreement:.4f} over "
                 f"{self.agreement.records} records",
                 f"imitation loss (KL teacher || student): {self.imitation.loss:.6f} over "
                 f"{self.imitation.records} records"]
        q = self.labelled
        if q.records:
            lines.append(f"labelled quality: accuracy {q.accuracy:.4f}, NLL {q.nll:.6f} over "
                         f"{q.records} labelled records")
        else:
            lines.append("labelled quality: no labelled records")
        return "\n".join(lines)


@dataclass
class _Sums:
    rows: int = 0
    agree: int = 0
    kl: float = 0.0
    labelled: int = 0
    correct: int = 0
    nll: float = 0.0

    def add(self, logits: torch.Tensor, batch: TeacherBatch) -> None:
        guess = logits.argmax(dim=1).cpu()
        self.rows += int(logits.shape[0])
        self.agree += int((guess == batch.probabilities.argmax(dim=1)).sum())
        self.kl += float(imitation_sums(logits, batch.probabilities).sum())
        mask = batch.labelled
        if bool(mask.any()):
            labels = batch.labels[mask]
            self.labelled += int(mask.sum())
            self.correct += int((guess[mask] == labels).sum())
            self.nll += float(F.cross_entropy(logits[mask.to(logits.device)],
                                              labels.to(logits.device), reduction="sum"))

    def report(self) -> OfflineReport:
        n, m = self.rows, self.labelled
        return OfflineReport(
            TeacherAgreement(n, self.agree / n if n else float("nan")),
            ImitationLoss(n, self.kl / n if n else float("nan")),
            LabelledQuality(m, self.correct / m if m else None, self.nll / m if m else None))


class Student:
    """An NNModel or an nn.Module as the evaluated student (forward_raw and device)."""

    def __init__(self, student: Any) -> None:
        net = getattr(student, "net", student)
        if not isinstance(net, nn.Module):
            raise TypeError(f"evaluate_offline's student must be an NNModel or an nn.Module; "
                            f"got {type(student).__name__}")
        self.model, self.net = student, net
        self.device = getattr(student, "device", None) or next(
            net.parameters(), torch.empty(0)).device

    def forward_raw(self, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
        if hasattr(self.model, "forward_raw"):
            out: torch.Tensor = self.model.forward_raw(inputs)
            return out
        result: torch.Tensor = self.net(*inputs)
        return result


def score(student: Student, batches: Iterable[Any], candidates: tuple[str, ...],
          who: str) -> _Sums:
    sums = _Sums()
    with torch.no_grad(), preserved_state(student.net, mode="eval"):
        for batch in batches:
            sums.add(student_logits(student, batch, candidates, who), batch)
    return sums


def offline_eval_step(candidates: tuple[str, ...]) -> Callable[[Any], NNEvaluationDataPoint]:
    """An ``eval_step_fn`` over a TeacherDataset val loader (see the module docstring)."""

    def offline_eval_step(ctx: Any) -> NNEvaluationDataPoint:
        sums = score(Student(ctx.model), ctx.val_loader, candidates,
                     "TeacherDataset.eval_step")
        report = sums.report()
        q = report.labelled
        metrics: dict[str, float] = {}
        if q.accuracy is not None and q.nll is not None:
            metrics = {"label_accuracy": q.accuracy, "label_nll": q.nll}
        return NNEvaluationDataPoint(loss=report.imitation.loss, metrics=metrics,
                                     extra={"teacher_agreement": report.agreement.agreement})

    return offline_eval_step
