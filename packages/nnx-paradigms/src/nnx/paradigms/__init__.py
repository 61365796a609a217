"""Training paradigms (spec §10): step factories and objectives on nnx-core's one
update engine."""

from nnx.paradigms.born_again import BornAgainGeneration, born_again_train
from nnx.paradigms.dpo import DPOTrainStep, dpo_train_step_factory
from nnx.paradigms.jepa import JEPATrainStep, jepa_train_step_factory
from nnx.paradigms.jepa_objective import JEPAObjective, jepa_objective
from nnx.paradigms.kd import feature_kd_train_step_factory, kd_train_step_factory
from nnx.paradigms.mixing import cutmix_train_step_factory, mixup_train_step_factory
from nnx.paradigms.moe import moe_train_step_factory
from nnx.paradigms.offline_distillation import (
    TeacherDataset,
    TeacherRecord,
    TeacherRecordError,
    evaluate_offline,
    read_teacher_records,
)
from nnx.paradigms.preference import NNPreferenceDataset
from nnx.paradigms.simclr import nt_xent_loss, simclr_train_step_factory

__all__: list[str] = [
    "BornAgainGeneration",
    "DPOTrainStep",
    "JEPAObjective",
    "JEPATrainStep",
    "NNPreferenceDataset",
    "TeacherDataset",
    "TeacherRecord",
    "TeacherRecordError",
    "born_again_train",
    "cutmix_train_step_factory",
    "dpo_train_step_factory",
    "evaluate_offline",
    "feature_kd_train_step_factory",
    "jepa_objective",
    "jepa_train_step_factory",
    "kd_train_step_factory",
    "mixup_train_step_factory",
    "moe_train_step_factory",
    "nt_xent_loss",
    "read_teacher_records",
    "simclr_train_step_factory",
]
