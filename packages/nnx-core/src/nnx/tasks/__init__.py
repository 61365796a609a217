"""Task declarations (spec §6.3): categorical, multilabel and regression, the ``Task``
protocol a task object implements, the per-batch machinery beside it (``TaskBatchOps``,
the part add-ons may call) and the runtime holding both."""

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
from nnx.tasks.batch_ops import TaskBatchOps, task_batch_ops
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
    "TaskBatchOps",
    "TaskRuntime",
    "TaskSpec",
    "TaskValidationError",
    "resolve_task",
    "task_adapter",
    "task_batch_ops",
]
