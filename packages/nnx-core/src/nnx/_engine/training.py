"""NNModel.train (spec §6, §6.1, §6.5): one optimizer, and a step function or an
objective as the update owner (:class:`ModelStepOwner`). The epoch loop, the commit
and resume are :class:`nnx._engine.fit_loop.FitLoop`'s, given that owner.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from nnx._contracts.components import is_component
from nnx._contracts.precision import resolve_precision
from nnx._contracts.trainable import TrainableModel
from nnx._engine.fit_loop import EvalFn
from nnx._engine.fit_run import RunExistsError, RunLeaseError, run_fit_loop
from nnx._engine.loop_support import phase_epochs
from nnx._engine.optimizers import build_optimizer
from nnx._engine.schedule import ScheduleDriver, planned_updates_per_epoch
from nnx._engine.steps import TrainStepContext, UpdateWindow, default_train_step
from nnx._engine.update_engine import OptimizerSlot
from nnx._engine.update_owner import LoopView, OwnerBuild
from nnx._foundation.records import NNEvaluationDataPoint
from nnx._persistence.run import NNRun
from nnx.metrics import row_metrics
from nnx.objectives.ownership import (
    check_precision_owner,
    check_step_model,
    check_update_owner,
)
from nnx.params.train import NNTrainParams
from nnx.tasks.protocol import check_train, objective_task, refuse_default_path, task_identity
from nnx.tasks.runtime import TaskRuntime

__all__ = ["ModelStepOwner", "RunExistsError", "RunLeaseError", "phase_epochs",
           "train_model"]

StepFn = Callable[[TrainStepContext], NNEvaluationDataPoint]


class ModelStepOwner:
    """NNModel.train's update owner (:class:`~nnx._engine.update_owner.UpdateOwner`):
    one optimizer, updated by a step function (the default step or the caller's) or by
    an objective through the shared update engine."""

    kind = "model"

    def __init__(self, params: NNTrainParams, *, step_fn: StepFn | None,
                 objective: Any = None, task: Any = None) -> None:
        if not isinstance(params, NNTrainParams):
            raise TypeError(f"NNModel.train needs an NNTrainParams; got {type(params).__name__}")
        check_update_owner(step_fn, objective, step_name="train_step_fn")
        if step_fn is not None and not callable(step_fn):
            raise TypeError("train_step_fn must be callable")
        self.params, self.objective = params, objective
        self.task = task  # the run's task for its id (None: the model's own)
        self.step_fn: StepFn = step_fn or default_train_step
        self.custom_step = objective is not None or (
            step_fn is not None and step_fn is not default_train_step)
        self.owns_windows = objective is not None or not self.custom_step
        self.component = objective if objective is not None else self.step_fn
        self.step_summary: Any = None  # the default step's task accumulator, fed per microbatch
        self._step_ctx: TrainStepContext | None = None  # the default step's context this epoch
        self._report: Callable[[], None] = lambda: None

    def build(self, loop: LoopView) -> OwnerBuild:
        params, model = self.params, loop.model
        check_step_model(self.step_fn if self.objective is None else None, model)
        optimizer = build_optimizer(model.net, params.optim)
        precision = resolve_precision(model.params, model.device)
        if self.custom_step:  # before any run is reserved (§6.1)
            check_precision_owner(self.step_fn, precision, step_name="train_step_fn",
                                  accumulate=params.optim.accumulate_grad_batches)
        accumulate = params.optim.accumulate_grad_batches
        schedule = None
        if params.scheduler is not None:
            per_epoch = planned_updates_per_epoch(params.train_loader, accumulate) if (
                self.owns_windows) else None
            schedule = ScheduleDriver(params.scheduler, optimizer, params.n_epochs,
                                      updates_per_epoch=per_epoch,
                                      plateau_rule=loop.plateau_rule(),
                                      build=model._build_scheduler)
        self._report = functools.partial(loop.report_update, None)  # one per run, not batch
        return OwnerBuild(slots={None: OptimizerSlot(None, optimizer, params.optim, schedule)},
                          precision=precision, scaler=precision.make_scaler(),
                          accumulate=accumulate)

    def new_run(self, loop: LoopView, salt: str | None, root: str) -> NNRun:
        model = loop.model
        return NNRun(model_params=model.params, net_params=model.net_params,
                     train_params=self.params, salt=salt, transforms=loop.transforms,
                     root=root, task=task_identity(
                         model.task_runtime.task if self.task is None else self.task))

    def schedule_params(self) -> list[Any]:
        return [] if self.params.scheduler is None else [self.params.scheduler]

    def begin_epoch(self, loop: LoopView) -> Any:
        """The default step feeds the task accumulator with every microbatch (§6.4)."""
        self.step_summary = self._step_ctx = None
        declared = bool(loop.metrics) or loop.monitor is not None
        if declared and self.objective is None and not self.custom_step:
            # A metric the task computes over its validation stream has no training value.
            self.step_summary = loop.model.task_adapter.accumulator(
                metrics=row_metrics(loop.metrics))
        return self.step_summary

    def end_fit(self) -> None:
        """Drop the cached step context, which carries the DDP wrapper (train_net)."""
        self.step_summary = self._step_ctx = None

    def run_batch(self, loop: LoopView, batch: Any, batch_idx: int, epoch: int,
                  window: UpdateWindow) -> NNEvaluationDataPoint:
        ctx = self._step_ctx
        if ctx is None:
            ctx = TrainStepContext(
                model=loop.model, batch=batch, batch_idx=batch_idx, epoch=epoch,
                optimizer=loop.primary.optimizer, precision=loop.precision,
                scaler=loop.scaler, grad_clip_norm=self.params.optim.grad_clip_norm,
                accumulate_grad_batches=loop.accumulate, window=window,
                _on_update=self._report, summary=self.step_summary, distributed=loop.distributed,
                train_net=loop.train_net, extra_metrics=self.params.extra_metrics)
            if not self.custom_step:  # the default step keeps no context: one per epoch
                self._step_ctx = ctx
        else:
            ctx.batch, ctx.batch_idx, ctx.window = batch, batch_idx, window
        return self.step_fn(ctx)


def train_model(model: TrainableModel, params: NNTrainParams, *,
                train_step_fn: StepFn | None = None, objective: Any = None,
                eval_step_fn: EvalFn | None = None,
                callbacks: Sequence[Any] = (), salt: str | None = None,
                verbose: bool | None = None, root: str = "runs", components: Sequence[Any] = (),
                history: Any = None, provenance: Any = None, distributed: Any = None,
                compile: Any = None) -> NNRun:
    train_step_fn, objective, eval_step_fn, components, task = _task_hooks(
        model, params, train_step_fn, objective, eval_step_fn, components)
    owner = ModelStepOwner(params, step_fn=train_step_fn, objective=objective, task=task)
    return run_fit_loop(owner, model, params, objective=objective, eval_step_fn=eval_step_fn,
                        callbacks=callbacks, salt=salt, verbose=verbose, root=root,
                        components=components, history=history, provenance=provenance,
                        distributed=distributed, compile=compile)


def _task_hooks(model: TrainableModel, params: NNTrainParams, step_fn: StepFn | None,
                objective: Any, eval_fn: EvalFn | None, components: Sequence[Any]
                ) -> tuple[StepFn | None, Any, EvalFn | None, Sequence[Any], Any]:
    """What the model's task (nnx.tasks.protocol.Task) supplies where the caller gave
    nothing; last, the task whose identity the run id records (None: the model's).

    Runs before the loop is built, so a task refusing a default path leaves no run
    directory, reservation or changed weight behind.
    """
    runtime = model.task_runtime
    task = runtime.task  # what answers the Task protocol: the task object, or the adapter
    check_train(task, params)  # the task's own look at the run, before anything else
    built_by = _objective_task(runtime, objective)
    if built_by is not None:  # objective=task.objective(): trained under that task
        check_train(built_by, params)
        if is_component(built_by) and all(c is not built_by for c in components):
            components = [*components, built_by]
    if step_fn is None and objective is None:
        hook = getattr(task, "objective", None)
        objective = hook() if callable(hook) else None
        if objective is None:
            refuse_default_path(task, "train")
    if eval_fn is None:
        hook = getattr(task, "eval_step", None)
        eval_fn = hook() if callable(hook) else None
        if eval_fn is None and getattr(params, "val_loader", None) is not None:
            refuse_default_path(task, "evaluate")
    if built_by is None and is_component(task) and all(c is not task for c in components):
        components = [*components, task]
    return step_fn, objective, eval_fn, components, built_by


def _objective_task(runtime: TaskRuntime, objective: Any) -> Any | None:
    """The task that built an explicit ``objective`` when the run takes its identity and
    component from it: the model has no task object of its own, or that same object.

    An objective built by another task than the model's trains one configuration while
    the run would record another: refused unless both tasks have one identity.
    """
    built_by = None if objective is None else objective_task(objective)
    own = runtime.task
    if built_by is None or built_by is own or runtime.own_machinery:  # no protocol-only task
        return built_by
    if task_identity(built_by) != task_identity(own):
        raise ValueError(
            f"objective= was built by the task {built_by!r}, but the model's task is {own!r}: "
            "train under one task (drop objective= to use the model's, or build the model "
            "with task= the objective's task)")
    return None  # the same configuration: the model's task stands for both
