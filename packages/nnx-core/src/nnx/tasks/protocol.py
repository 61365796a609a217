"""The ``Task`` protocol: what a task object provides (spec §6.3, issues 14 and 25).

``NNModel(net_params=..., task=task)`` takes any object implementing it; the
engine then uses the task only through these members (docs/extending.md, "The
Task protocol", documents each). The built-in adapters (categorical, multilabel,
regression, loss-only) satisfy it with "nothing special" answers; an add-on task
(language modelling, ranking, graph or link tasks) answers with its own
objective, evaluation step and metrics, and may refuse the default paths its
batches do not fit. The per-batch machinery (validation, loss parts, records,
accumulators, decoding) is not part of the protocol: core puts it beside the
task, built from the model's loss (:mod:`nnx.tasks.runtime`; add-ons use it as
:class:`nnx.tasks.batch_ops.TaskBatchOps`).

Required members, all wired by ``NNModel``:

* ``objective()`` — ``NNModel.train`` runs it through the shared update engine
  when neither ``objective=`` nor ``train_step_fn=`` is given (None: the
  default supervised step). The objective names the task that built it in its
  ``source_task`` attribute (:func:`objective_task`), so ``objective=task.objective()``
  trains under the task exactly as ``task=task`` does: the task's identity,
  ``check_train`` and component state come with it;
* ``eval_step()`` — ``NNModel.train`` validates with it when no
  ``eval_step_fn=`` is given (None: ``NNModel.evaluate``);
* ``refuse_default(path)`` — called with ``"train"``, ``"evaluate"`` or
  ``"predict"`` before the default step, ``evaluate()`` or ``predict()`` /
  ``predict_proba()`` touch anything; it raises to refuse;
* ``sample_ids(data, rows)`` — the ids ``predict_proba`` gives its rows
  (None: iteration positions ``0..rows-1``);
* ``metric_specs()`` — the metrics a task records natively, for add-ons and tools
  to read; the loop does not declare them. The metric check reads it for
  ``TASK_METRIC_INPUT`` metrics only: one is served where the task lists it.

Optional members (looked up by name; absent means the default):

* ``identity()`` — the task's configuration as plain data. It changes what
  trains, so ``NNModel.train`` hashes it into the run id as the run's ``task``
  block (run.yaml keeps it); a task without the hook, or one answering None,
  adds nothing, so the built-in tasks' run ids never move;
* ``check_train(params)`` — called first by ``NNModel.train`` with its
  ``NNTrainParams``, before anything is built or reserved; it raises to refuse
  (nnx-lm scans every batch there);
* the :class:`nnx.components.Component` members — a task that is a component is
  registered as one of the run, so its state is checkpointed and resumed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from nnx.params.metric import MetricSpec

__all__ = ["DEFAULT_PATHS", "Task", "check_train", "objective_task", "refuse_default_path",
           "task_identity"]

#: The default paths a task may refuse.
DEFAULT_PATHS = ("train", "evaluate", "predict")


@runtime_checkable
class Task(Protocol):
    """What the loop, evaluate() and predict() may ask of a model's task."""

    def objective(self) -> Any | None:
        """The task's :class:`nnx.objectives.Objective`, or None for the default step."""
        ...

    def eval_step(self) -> Callable[..., Any] | None:
        """An ``eval_step_fn(ctx) -> NNEvaluationDataPoint``, or None for ``evaluate()``."""
        ...

    def metric_specs(self) -> Sequence[MetricSpec]:
        """The metrics this task records natively (may be empty)."""
        ...

    def sample_ids(self, data: Any, rows: int) -> Any | None:
        """One integer id per predicted row of ``data``, or None for ``0..rows-1``."""
        ...

    def refuse_default(self, path: str) -> None:
        """Raise when the default ``path`` ("train" / "evaluate" / "predict") cannot
        handle this task's batches; return to accept it."""
        ...


def task_identity(task: Any) -> dict[str, Any] | None:
    """``task.identity()`` when the task has the hook and answers, else None."""
    hook = getattr(task, "identity", None)
    if not callable(hook):
        return None
    value = hook()
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"{type(task).__name__}.identity() must return a mapping or None; "
                        f"got {type(value).__name__}")
    return dict(value)


def objective_task(objective: Any) -> Any | None:
    """The task that built ``objective`` (its ``source_task``), or None.

    Spec §10.1's rule for the offline objective, for every task objective: an
    objective a task built carries that task's identity and component state.
    """
    task = getattr(objective, "source_task", None)
    if task is not None and not isinstance(task, Task):
        raise TypeError(f"{type(objective).__name__}.source_task must be the Task that built "
                        f"the objective, or None; got {type(task).__name__}")
    return task


def refuse_default_path(task: Any, path: str) -> None:
    """Ask ``task`` whether the default ``path`` may run; a task without the hook accepts."""
    if path not in DEFAULT_PATHS:
        raise ValueError(f"path must be one of {DEFAULT_PATHS}; got {path!r}")
    hook = getattr(task, "refuse_default", None)
    if callable(hook):
        hook(path)


def check_train(task: Any, params: Any) -> None:
    """Let ``task`` refuse a training run's ``params`` first; a task without the hook
    accepts."""
    hook = getattr(task, "check_train", None)
    if callable(hook):
        hook(params)
