"""Task adapters (spec §6.3): validation, loss units, decoding and records per task.

``task_adapter(task, loss_fn)`` returns the adapter the default training step,
evaluate() and predict() use. A declared :class:`TaskSpec` gets the adapter of
its kind (its loss is checked first); a model without a task gets the
implicit default: categorical argmax for CrossEntropyLoss / NLLLoss,
logit >= 0 indicators for BCEWithLogitsLoss, and loss-only records otherwise.
"""

from __future__ import annotations

from torch import nn

from nnx.params.task import TaskSpec
from nnx.tasks._base import Stats, TaskAccumulator, TaskAdapter
from nnx.tasks._categorical import CategoricalAdapter
from nnx.tasks._losses import (
    CATEGORICAL_LOSSES,
    MULTILABEL_LOSSES,
    TaskValidationError,
    family,
)
from nnx.tasks._multilabel import MultilabelAdapter
from nnx.tasks._regression import LossOnlyAdapter, RegressionAdapter

__all__ = [
    "CategoricalAdapter",
    "LossOnlyAdapter",
    "MultilabelAdapter",
    "RegressionAdapter",
    "Stats",
    "TaskAccumulator",
    "TaskAdapter",
    "TaskValidationError",
    "task_adapter",
]

_BY_KIND: dict[str, type[TaskAdapter]] = {
    "categorical": CategoricalAdapter,
    "multilabel": MultilabelAdapter,
    "regression": RegressionAdapter,
}


def task_adapter(task: TaskSpec | None, loss_fn: nn.Module) -> TaskAdapter:
    """The adapter for ``task`` trained with ``loss_fn``.

    Raises ``ValueError`` when the loss does not suit the declared task.
    """
    if task is not None and not isinstance(task, TaskSpec):
        raise ValueError(f"task must be a TaskSpec or None; got {task!r}")
    if task is None:
        name = family(loss_fn) if isinstance(loss_fn, nn.Module) else None
        if name in CATEGORICAL_LOSSES:
            adapter: TaskAdapter = CategoricalAdapter(None, loss_fn)
        elif name in MULTILABEL_LOSSES:
            adapter = MultilabelAdapter(None, loss_fn)
        else:
            adapter = LossOnlyAdapter(None, loss_fn)
    else:
        adapter = _BY_KIND[task.kind](task, loss_fn)
    adapter.check_loss(loss_fn)
    return adapter
