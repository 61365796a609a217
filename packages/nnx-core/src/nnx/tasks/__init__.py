"""Task declarations (spec §6.3): categorical, multilabel and regression, the ``Task``
protocol a task object implements and the runtime core builds around one."""

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
from nnx.tasks.runtime import TaskRuntime, resolve_task

__all__ = [
    "CategoricalAdapter",
    "LossOnlyAdapter",
    "MultilabelAdapter",
    "RegressionAdapter",
    "Task",
    "TaskAccumulator",
    "TaskAdapter",
    "TaskRuntime",
    "TaskSpec",
    "TaskValidationError",
    "resolve_task",
    "task_adapter",
]
