"""Task declarations (spec §6.3): categorical, multilabel and regression."""

from nnx.params.task import TaskSpec
from nnx.tasks.adapters import (
    CategoricalAdapter,
    LossOnlyAdapter,
    MultilabelAdapter,
    RegressionAdapter,
    TaskAccumulator,
    TaskAdapter,
    TaskValidationError,
    task_adapter,
)
from nnx.tasks.protocol import Task

__all__ = [
    "CategoricalAdapter",
    "LossOnlyAdapter",
    "MultilabelAdapter",
    "RegressionAdapter",
    "Task",
    "TaskAccumulator",
    "TaskAdapter",
    "TaskSpec",
    "TaskValidationError",
    "task_adapter",
]
