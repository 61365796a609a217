"""Evaluating a student on stored teacher distributions (spec §10.1 "Reports").

Three parts, each with its own denominator, never blended: imitating a teacher
is not being right.

* teacher agreement — the fraction of every record whose student argmax is the
  teacher's argmax (the first maximum on a tie);
* imitation loss — the mean KL(teacher ‖ student) over every record;
* labelled quality — accuracy and NLL against the labels, over the labelled
  records only (absent when none is labelled).

``TeacherDataset.eval_step()`` is the same computation as a training-loop
``eval_step_fn``: its record loss is the imitation loss whatever alpha, and
``label_accuracy`` / ``label_nll`` ride in ``metrics`` so a MonitorSpec can select
or stop on quality by name.
"""

from __future__ import annotations

from typing import Any

from nnx.extend import check_count
from nnx.paradigms.offline_distillation.dataset import TeacherDataset
from nnx.paradigms.offline_distillation.scoring import (
    ImitationLoss,
    LabelledQuality,
    OfflineReport,
    Student,
    TeacherAgreement,
    offline_eval_step,
    score,
)

__all__ = ["ImitationLoss", "LabelledQuality", "OfflineReport", "TeacherAgreement",
           "evaluate_offline", "offline_eval_step"]


def evaluate_offline(student: Any, dataset: TeacherDataset, *,
                     batch_size: int = 256) -> OfflineReport:
    """The student's teacher agreement, imitation loss and labelled quality on
    ``dataset``; the student's weights, gradients and modes are left as they were."""
    if not isinstance(dataset, TeacherDataset):
        raise TypeError(f"evaluate_offline needs a TeacherDataset; got {type(dataset).__name__}")
    size = check_count("evaluate_offline batch_size", batch_size)
    loader = dataset.loader(size)
    return score(Student(student), loader, dataset.candidates, "evaluate_offline").report()
