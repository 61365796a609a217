"""Training paradigms (spec §10): step factories and objectives on nnx-core's one
update engine."""

from nnx.paradigms.born_again import BornAgainGeneration, born_again_train
from nnx.paradigms.kd import feature_kd_train_step_factory, kd_train_step_factory
from nnx.paradigms.offline_distillation import (
    TeacherDataset,
    TeacherRecord,
    TeacherRecordError,
    evaluate_offline,
    read_teacher_records,
)

__all__: list[str] = [
    "BornAgainGeneration",
    "TeacherDataset",
    "TeacherRecord",
    "TeacherRecordError",
    "born_again_train",
    "evaluate_offline",
    "feature_kd_train_step_factory",
    "kd_train_step_factory",
    "read_teacher_records",
]
