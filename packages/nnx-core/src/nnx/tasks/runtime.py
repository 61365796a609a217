"""The model's task as the engine sees it: the task object next to its per-batch machinery.

``NNModel(..., task=obj)`` accepts any :class:`nnx.tasks.Task`. The engine asks two
objects, held side by side in a :class:`TaskRuntime` (composition: neither wraps the
other):

* ``runtime.task`` answers the protocol (objective, eval step, refusals, sample ids,
  identity, ``check_train``);
* ``runtime.batch_ops`` is the per-batch machinery (validation, loss parts, records,
  accumulators, decoding): a :class:`TaskAdapter`, public to add-ons through the
  narrower :class:`nnx.tasks.batch_ops.TaskBatchOps`.

:func:`resolve_task` builds the pair:

* no task object: the built-in adapter of the declared :class:`TaskSpec` (or the
  implicit default for the loss) is both, since it answers the protocol itself;
* a task object that is a :class:`TaskAdapter` (a built-in adapter or a subclass):
  the object is both, since it brings its own machinery;
* any other task object: the object answers the protocol, and the per-batch
  machinery is the default adapter of the model's loss, exactly what the model would
  use without the task. So a task never has to inherit anything from core to plug in.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from nnx.params.task import TaskSpec
from nnx.tasks._base import TaskAdapter
from nnx.tasks.adapters import task_adapter
from nnx.tasks.protocol import Task

__all__ = ["TaskRuntime", "check_task_object", "resolve_task"]


def check_task_object(task: Any, spec: TaskSpec | None) -> None:
    """Refuse what ``NNModel(..., task=task)`` cannot take, before anything is built.

    ``task`` must implement :class:`Task`; a model declares its task once: a
    :class:`TaskSpec` on ``NNModelParams.task`` or a task object, never both.
    """
    if task is None:
        return
    if isinstance(task, TaskSpec):
        raise TypeError("NNModel(task=...) takes a task object; declare a TaskSpec on "
                        "NNModelParams(task=...) instead")
    if not isinstance(task, Task):
        missing = [name for name in ("objective", "eval_step", "metric_specs", "sample_ids",
                                     "refuse_default") if not callable(getattr(task, name, None))]
        raise TypeError(f"task must implement nnx.tasks.Task; {type(task).__name__} lacks "
                        f"{', '.join(missing)} (docs/extending.md, 'The Task protocol')")
    if spec is not None:
        raise ValueError(f"the model declares {spec.kind} task {spec!r} on NNModelParams and "
                         f"the task object {type(task).__name__}: declare it once (drop "
                         "NNModelParams.task, or pass no task object)")


def resolve_task(task: Any, spec: TaskSpec | None, loss_fn: nn.Module) -> TaskRuntime:
    """The engine's view of a model's task (see the module docstring).

    ``task`` was checked by :func:`check_task_object`. Raises ``ValueError`` when
    ``loss_fn`` does not suit the task's per-batch machinery.
    """
    if task is None:
        adapter = task_adapter(spec, loss_fn)
        return TaskRuntime(adapter, adapter)
    if isinstance(task, TaskAdapter):
        task.check_loss(loss_fn)
        return TaskRuntime(task, task)
    return TaskRuntime(task, task_adapter(None, loss_fn))


class TaskRuntime:
    """A model's task: ``task`` answers the :class:`Task` protocol (the task object, or
    the adapter when it answers for itself) and ``batch_ops`` does the per-batch work.

    Nothing is forwarded: the engine asks each object what it owns. ``own_machinery``
    says whether one object is both (no task object, or one that is an adapter).
    """

    __slots__ = ("batch_ops", "task")

    def __init__(self, task: Any, batch_ops: TaskAdapter) -> None:
        self.task = task
        self.batch_ops = batch_ops

    @property
    def own_machinery(self) -> bool:
        """Whether the task is its own per-batch machinery (a :class:`TaskAdapter`)."""
        return self.task is self.batch_ops

    def __repr__(self) -> str:
        return f"TaskRuntime(task={self.task!r}, batch_ops={self.batch_ops!r})"
