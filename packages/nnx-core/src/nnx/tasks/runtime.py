"""The model's task as the engine sees it: a task object resolved around core's defaults.

``NNModel(..., task=obj)`` accepts any :class:`nnx.tasks.Task`. The engine asks the
model's ``task_adapter`` for both the protocol's answers (objective, eval step,
refusals, sample ids, identity) and the per-batch machinery (validation, loss parts,
records, accumulators, decoding). :func:`resolve_task` builds that one object:

* no task object: the built-in adapter of the declared :class:`TaskSpec` (or the
  implicit default for the loss), which answers the protocol itself;
* a task object that is a :class:`TaskAdapter` (a built-in adapter or a subclass):
  the object itself, since it brings its own machinery;
* any other task object: a :class:`TaskRuntime`, whose protocol members are the
  object's and whose per-batch machinery is the default adapter of the model's loss,
  exactly what the model would use without the task. So a task never has to inherit
  anything from core to plug in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from torch import Tensor, nn

from nnx._foundation.records import NNEvaluationDataPoint
from nnx.params.task import TaskSpec
from nnx.tasks._base import Arrays, Stats, TaskAccumulator, TaskAdapter, TrainingBatch
from nnx.tasks.adapters import task_adapter
from nnx.tasks.protocol import Task, check_train, task_identity

__all__ = ["TaskRuntime", "check_task_object", "resolve_task", "task_source"]


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


def resolve_task(task: Any, spec: TaskSpec | None, loss_fn: nn.Module) -> TaskAdapter:
    """The engine's view of a model's task (see the module docstring).

    ``task`` was checked by :func:`check_task_object`. Raises ``ValueError`` when
    ``loss_fn`` does not suit the task's per-batch machinery.
    """
    if task is None:
        return task_adapter(spec, loss_fn)
    if isinstance(task, TaskAdapter):
        task.check_loss(loss_fn)
        return task
    return TaskRuntime(task, task_adapter(None, loss_fn))


def task_source(adapter: Any) -> Any:
    """The task object behind ``adapter`` (the adapter itself unless a TaskRuntime):
    what is registered as a component when it is one."""
    return adapter.source if isinstance(adapter, TaskRuntime) else adapter


class TaskRuntime(TaskAdapter):
    """A protocol-only task with core's per-batch machinery built around it.

    ``source`` is the task object: every :class:`Task` member (and the optional
    ``identity()`` / ``check_train(params)`` hooks) is answered by it. ``default``
    is the adapter the model's loss gets without a task; validation, loss parts,
    records, accumulators and decoding are its, so the default paths a task does
    not refuse behave exactly as on a model without the task.
    """

    def __init__(self, source: Any, default: TaskAdapter) -> None:
        super().__init__(None, default.loss_fn)
        self.source, self.default = source, default
        self.kind, self.metric_kind = default.kind, default.metric_kind

    def __repr__(self) -> str:
        return f"TaskRuntime({self.source!r})"

    # -- the Task protocol: the task object's answers ---------------------------------
    def objective(self) -> Any | None:
        return self.source.objective()

    def eval_step(self) -> Any | None:
        return self.source.eval_step()

    def metric_specs(self) -> Any:
        return self.source.metric_specs()

    def sample_ids(self, data: Any, rows: int) -> Any | None:
        return self.source.sample_ids(data, rows)

    def refuse_default(self, path: str) -> None:
        self.source.refuse_default(path)

    def identity(self) -> dict[str, Any] | None:
        return task_identity(self.source)

    def check_train(self, params: Any) -> None:
        check_train(self.source, params)

    # -- the per-batch machinery: the default adapter's -------------------------------
    @property
    def num_outputs(self) -> int | None:
        return self.default.num_outputs

    @property
    def metric_inputs(self) -> frozenset[str]:
        return self.default.metric_inputs

    @property
    def description(self) -> str:
        return f"{self.default.description}, with the task {type(self.source).__name__}"

    def reduction(self, loss_fn: nn.Module) -> str:
        return self.default.reduction(loss_fn)

    def check_loss(self, loss_fn: nn.Module) -> None:
        self.default.check_loss(loss_fn)

    def validate(self, output: Tensor, target: Tensor) -> None:
        self.default.validate(output, target)

    def loss_parts(self, output: Tensor, target: Tensor,
                   loss_fn: nn.Module) -> tuple[Tensor, Tensor]:
        return self.default.loss_parts(output, target, loss_fn)

    def decode(self, output: Tensor) -> Tensor:
        return self.default.decode(output)

    def probabilities(self, output: Tensor) -> Tensor:
        return self.default.probabilities(output)

    def extra_metric_inputs(self, output: Tensor, target: Tensor) -> Arrays:
        return self.default.extra_metric_inputs(output, target)

    def metric_input(self, input: str, output: Tensor, target: Tensor) -> Arrays:
        return self.default.metric_input(input, output, target)

    def new_stats(self) -> Stats:
        return self.default.new_stats()

    def training_batch(self, output: Tensor, target: Tensor, loss_fn: nn.Module, *,
                       normalize: bool = False) -> TrainingBatch:
        return self.default.training_batch(output, target, loss_fn, normalize=normalize)

    def accumulator(self, metrics: Iterable[Any] = ()) -> TaskAccumulator:
        return self.default.accumulator(metrics)

    def record(self, output: Tensor, target: Tensor, loss: Any = None, *,
               validate: bool = True) -> NNEvaluationDataPoint:
        return self.default.record(output, target, loss=loss, validate=validate)

    def stats_record(self, stats: Stats, loss: float | None,
                     metrics: Mapping[str, float] | None = None) -> NNEvaluationDataPoint:
        return self.default.stats_record(stats, loss, metrics)

    def fields_record(self, count: int, fields: dict[str, Any], loss: float | None,
                      metrics: Mapping[str, float] | None = None) -> NNEvaluationDataPoint:
        return self.default.fields_record(count, fields, loss, metrics)
