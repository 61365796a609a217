"""Objectives (spec §6.5): describe the loss, and let the shared update engine own the update.

An objective is any callable ``(ObjectiveContext) -> ObjectiveResult``;
subclass :class:`Objective` to declare ``nonfinite`` and the ``check_run`` /
``after_update`` hooks. Pass it as ``objective=`` to ``NNModel.train`` or
``Trainer.train``. Each name is imported on first use (issue 38): a fit with the
default step loads no objective's module.
"""

from typing import TYPE_CHECKING

from nnx._foundation.lazy_exports import lazy_package

#: name -> the module it is read from; the TYPE_CHECKING block below lists the same.
_EXPORTS: dict[str, str] = {
    "FrozenTeacher": "nnx.objectives.teacher",
    "KDObjective": "nnx.objectives.kd",
    "LossTerm": "nnx.objectives._core",
    "Objective": "nnx.objectives._core",
    "ObjectiveContext": "nnx.objectives._core",
    "ObjectiveResult": "nnx.objectives._core",
    "ObjectiveStream": "nnx.objectives.stream",
    "SupervisedObjective": "nnx.objectives.supervised",
    "UpdateEvent": "nnx.objectives._core",
    "imperative_step": "nnx.objectives.ownership",
    "kd_objective": "nnx.objectives.kd",
    "supervised_objective": "nnx.objectives.supervised",
}

__all__ = sorted(_EXPORTS)

lazy_package(__name__)

if TYPE_CHECKING:
    from nnx.objectives._core import LossTerm as LossTerm
    from nnx.objectives._core import Objective as Objective
    from nnx.objectives._core import ObjectiveContext as ObjectiveContext
    from nnx.objectives._core import ObjectiveResult as ObjectiveResult
    from nnx.objectives._core import UpdateEvent as UpdateEvent
    from nnx.objectives.kd import KDObjective as KDObjective
    from nnx.objectives.kd import kd_objective as kd_objective
    from nnx.objectives.ownership import imperative_step as imperative_step
    from nnx.objectives.stream import ObjectiveStream as ObjectiveStream
    from nnx.objectives.supervised import SupervisedObjective as SupervisedObjective
    from nnx.objectives.supervised import supervised_objective as supervised_objective
    from nnx.objectives.teacher import FrozenTeacher as FrozenTeacher
