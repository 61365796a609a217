"""Training paradigms (spec §10): step factories and objectives on nnx-core's one
update engine."""

from nnx.paradigms.dpo import DPOTrainStep, dpo_train_step_factory
from nnx.paradigms.jepa import JEPATrainStep, jepa_train_step_factory
from nnx.paradigms.jepa_objective import JEPAObjective, jepa_objective
from nnx.paradigms.preference import NNPreferenceDataset

__all__: list[str] = [
    "DPOTrainStep",
    "JEPAObjective",
    "JEPATrainStep",
    "NNPreferenceDataset",
    "dpo_train_step_factory",
    "jepa_objective",
    "jepa_train_step_factory",
]
