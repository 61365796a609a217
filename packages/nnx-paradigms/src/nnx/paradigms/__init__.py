"""Training paradigms (spec §10): step factories and objectives on nnx-core's one
update engine."""

from nnx.paradigms.jepa import JEPATrainStep, jepa_train_step_factory
from nnx.paradigms.jepa_objective import JEPAObjective, jepa_objective

__all__: list[str] = [
    "JEPAObjective",
    "JEPATrainStep",
    "jepa_objective",
    "jepa_train_step_factory",
]
