"""Offline distillation (spec §10.1): train a student on stored teacher probabilities.

Read ``nnx.teacher-record/1`` JSONL with :func:`read_teacher_records`, join the
records to inputs in a :class:`TeacherDataset` (by sample id; by candidate id,
never position), train with ``objective=dataset.objective(alpha)`` and evaluate
with :func:`evaluate_offline`. Modules, lowest first: ``records`` and ``batch``
(the TeacherBatch every other module reads), ``objective`` and ``scoring``, ``dataset``,
``report``.
"""

from nnx.paradigms.offline_distillation.batch import TeacherBatch
from nnx.paradigms.offline_distillation.dataset import (
    TeacherDataset,
    TeacherDatasetError,
    TeacherLoader,
)
from nnx.paradigms.offline_distillation.objective import OfflineDistillationObjective
from nnx.paradigms.offline_distillation.records import (
    FORMAT,
    SEMANTICS,
    TeacherRecord,
    TeacherRecordError,
    read_teacher_records,
    write_teacher_records,
)
from nnx.paradigms.offline_distillation.report import (
    ImitationLoss,
    LabelledQuality,
    OfflineReport,
    TeacherAgreement,
    evaluate_offline,
)

__all__ = [
    "FORMAT",
    "SEMANTICS",
    "ImitationLoss",
    "LabelledQuality",
    "OfflineDistillationObjective",
    "OfflineReport",
    "TeacherAgreement",
    "TeacherBatch",
    "TeacherDataset",
    "TeacherDatasetError",
    "TeacherLoader",
    "TeacherRecord",
    "TeacherRecordError",
    "evaluate_offline",
    "read_teacher_records",
    "write_teacher_records",
]
