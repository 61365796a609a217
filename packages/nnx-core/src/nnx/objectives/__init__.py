"""Objectives (spec §6.5): describe the loss, and let the shared update engine own the update.

An objective is any callable ``(ObjectiveContext) -> ObjectiveResult``;
subclass :class:`Objective` to declare ``nonfinite`` and the ``check_run`` /
``after_update`` hooks. Pass it as ``objective=`` to ``NNModel.train`` or
``Trainer.train``.
"""

from nnx.objectives._core import (
    LossTerm,
    Objective,
    ObjectiveContext,
    ObjectiveResult,
    UpdateEvent,
)
from nnx.objectives.kd import KDObjective, kd_objective
from nnx.objectives.ownership import imperative_step
from nnx.objectives.stream import ObjectiveStream
from nnx.objectives.supervised import SupervisedObjective, supervised_objective
from nnx.objectives.teacher import FrozenTeacher

__all__ = [
    "FrozenTeacher",
    "KDObjective",
    "LossTerm",
    "Objective",
    "ObjectiveContext",
    "ObjectiveResult",
    "ObjectiveStream",
    "SupervisedObjective",
    "UpdateEvent",
    "imperative_step",
    "kd_objective",
    "supervised_objective",
]
