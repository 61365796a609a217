"""Trainer: one model, several named optimizers (spec §8, §8.1–§8.4).

There is no default trainer step: the update owner is a ``trainer_step_fn``
(which owns every optimizer update, in full precision) or an ``objective``
run by the shared update engine (which steps every named optimizer holding
gradients once per committed update). Each optimizer is built with strict
param groups, so it owns only the parameters its specs match. The epoch loop,
checkpoints, run directory and resume protocol are the same as
``NNModel.train``'s; run.yaml records the whole configuration in its
``trainer`` block.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from nnx._contracts.precision import ResolvedPrecision
from nnx._contracts.trainable import TrainableModel, TrainingContextBase
from nnx._engine.fit_loop import EvalFn
from nnx._engine.fit_run import run_fit_loop
from nnx._engine.optimizers import build_optimizer
from nnx._engine.schedule import ScheduleDriver, planned_updates_per_epoch
from nnx._engine.steps import UpdateWindow
from nnx._engine.update_engine import OptimizerSlot
from nnx._engine.update_owner import LoopView, OwnerBuild
from nnx._foundation.records import NNEvaluationDataPoint
from nnx._persistence.run import DEFAULT_ROOT, NNRun
from nnx._surface.live_changes import recording_live_changes
from nnx._surface.model import NNModel
from nnx.callbacks.base import CallbackContext
from nnx.enums.precision import Precision
from nnx.objectives.ownership import check_strict_ownership, check_update_owner
from nnx.params.trainer import NNTrainerParams

__all__ = ["Trainer", "TrainerStepContext"]


@dataclass(eq=False)
class TrainerStepContext(TrainingContextBase):
    """What one batch's ``trainer_step_fn`` sees.

    The step owns every update: zero_grad, backward and step per named
    optimizer. Call :meth:`report_update` with the optimizer's name after each
    ``step()`` so its update-clock schedule advances. Run the model with
    :meth:`forward` (under DDP through the wrapper, ``train_net``;
    ``ctx.model.forward_raw`` does the same).
    """

    model: TrainableModel
    batch: Any
    batch_idx: int
    epoch: int
    optimizers: Mapping[str, torch.optim.Optimizer]
    schedulers: Mapping[str, Any]
    precision: ResolvedPrecision
    trainer: Trainer
    _on_update: Callable[[str], None] = field(repr=False, default=lambda name: None)
    # The DistributedDataParallel wrapper of model.net under DDP, None otherwise.
    train_net: nn.Module | None = field(repr=False, default=None)

    def report_update(self, name: str) -> None:
        """Tell NNx optimizer ``name`` committed an update (steps its update clock)."""
        if name not in self.optimizers:
            raise ValueError(f"report_update: no optimizer named {name!r} (optimizers: "
                             f"{', '.join(map(repr, self.optimizers))})")
        self._on_update(name)


TrainerStepFn = Callable[[TrainerStepContext], NNEvaluationDataPoint]


class Trainer:
    """Train ``model`` with the named optimizers of an :class:`NNTrainerParams`."""

    def __init__(self, model: NNModel) -> None:
        if not isinstance(model, NNModel):
            raise TypeError(f"Trainer needs an NNModel; got {type(model).__name__}")
        self.model = model

    def train(self, params: NNTrainerParams, *, trainer_step_fn: TrainerStepFn | None = None,
              objective: Any = None, eval_step_fn: EvalFn | None = None,
              callbacks: Sequence[Any] | None = None, salt: str | None = None,
              verbose: bool | None = None, root: str | os.PathLike[str] = DEFAULT_ROOT,
              components: Sequence[Any] | None = None, history: Any = None,
              provenance: Any = None, distributed: Any = None) -> NNRun:
        """Train; writes ``runs/<id>/`` exactly as NNModel.train does and returns the run.
        ``distributed=nnx.distributed.DDP(...)`` trains on every rank of a torchrun launch.
        ``callbacks`` / ``components`` None mean none; ``verbose=False`` prints nothing."""
        owner = TrainerOwner(self, params, step_fn=trainer_step_fn, objective=objective)
        # A net changed in place is recorded (or refused) as NNModel.train does (§11.1).
        with recording_live_changes(self.model, salt=salt, what="Trainer.train"):
            return run_fit_loop(owner, self.model, params, objective=objective,
                                eval_step_fn=eval_step_fn, callbacks=list(callbacks or ()),
                                salt=salt, verbose=verbose, root=os.fspath(root),
                                components=list(components or ()), history=history,
                                provenance=provenance, distributed=distributed)

    def __repr__(self) -> str:
        return f"Trainer(model={self.model!r})"


class TrainerOwner:
    """Trainer.train's update owner (:class:`~nnx._engine.update_owner.UpdateOwner`):
    named optimizers, updated by a ``trainer_step_fn`` that owns every update or by an
    objective through the shared update engine."""

    kind = "trainer"
    custom_step = True  # neither owner records declared metrics on training batches

    def __init__(self, trainer: Trainer, params: NNTrainerParams, *,
                 step_fn: TrainerStepFn | None, objective: Any) -> None:
        if not isinstance(params, NNTrainerParams):
            raise TypeError(f"Trainer.train needs an NNTrainerParams; got "
                            f"{type(params).__name__}")
        check_update_owner(step_fn, objective, step_name="trainer_step_fn")
        if step_fn is None and objective is None:
            raise ValueError("Trainer has no default step: multi-optimizer updates are "
                             "scenario-specific, so pass trainer_step_fn=... (which owns every "
                             "update) or objective=... (the shared update engine)")
        if step_fn is not None and not callable(step_fn):
            raise TypeError("trainer_step_fn must be callable")
        self.trainer, self.params, self.step_fn, self.objective = (
            trainer, params, step_fn, objective)
        self.component = objective if objective is not None else step_fn

    # -- building (every refusal of §8.2 happens here, before any reservation) --------
    def build(self, loop: LoopView) -> OwnerBuild:
        params, model = self.params, loop.model
        built = self._step_fn_run() if self.objective is None else self._objective_run()
        for name, config in params.optims.items():  # insertion order builds
            optimizer = build_optimizer(model.net, config, strict_param_groups=True)
            built.slots[name] = OptimizerSlot(name, optimizer, config)
        # Every owner steps each optimizer it holds, so a shared parameter would update
        # twice: refused for step-function and objective runs alike (§8.1).
        check_strict_ownership(model.net,
                               {str(n): s.optimizer for n, s in built.slots.items()})
        per_epoch = None if self.objective is None else planned_updates_per_epoch(
            params.train_loader, built.accumulate)
        for name, schedule in params.schedulers.items():
            slot = built.slots[name]
            slot.schedule = ScheduleDriver(schedule, slot.optimizer, params.n_epochs,
                                           updates_per_epoch=per_epoch,
                                           plateau_rule=loop.plateau_rule(),
                                           build=model._build_scheduler)
        return built

    def _step_fn_run(self) -> OwnerBuild:
        for name, config in self.params.optims.items():
            if config.grad_clip_norm is not None or config.accumulate_grad_batches != 1:
                raise ValueError(
                    f"optimizer {name!r}: a trainer_step_fn run cannot apply grad_clip_norm or "
                    "accumulate_grad_batches to the step's own updates; clip or accumulate "
                    "inside the step function, or pass objective= instead")
        model = self.trainer.model
        policy = model.params.precision
        if policy is not None and policy.is_reduced:
            raise ValueError(f"a trainer_step_fn owns every update in full precision; "
                             f"precision={policy.name} needs objective= (the shared update "
                             "engine applies autocast and the FP16 scaler)")
        return OwnerBuild(slots={}, precision=ResolvedPrecision(Precision.FP32,
                                                                model.device.type),
                          scaler=None, accumulate=1,
                          auto_step_schedulers=self.params.auto_step_schedulers)

    def _objective_run(self) -> OwnerBuild:
        params, model = self.params, self.trainer.model
        if not params.auto_step_schedulers:
            raise ValueError("an objective run has no step function to take scheduler timing "
                             "over: auto_step_schedulers=False would leave every schedule "
                             "unstepped")
        windows = {config.accumulate_grad_batches for config in params.optims.values()}
        if len(windows) > 1:
            raise ValueError(f"the named optimizers share one update window in an objective "
                             f"run; got accumulate_grad_batches {sorted(windows)}")
        policy = model.params.precision
        if policy is None and model.params.mixed_precision and model.device.type == "cuda":
            warnings.warn("Trainer does not apply the legacy mixed_precision flag: the objective "
                          "runs in full precision; set NNModelParams.precision instead",
                          RuntimeWarning, stacklevel=7)
        precision = ResolvedPrecision(policy or Precision.FP32, model.device.type)
        return OwnerBuild(slots={}, precision=precision, scaler=precision.make_scaler(),
                          accumulate=windows.pop())

    def new_run(self, loop: LoopView, salt: str | None, root: str) -> NNRun:
        model = loop.model
        return NNRun(model_params=model.params, net_params=model.net_params,
                     trainer_params=self.params, salt=salt, transforms=loop.transforms,
                     root=root)

    def schedule_params(self) -> list[Any]:
        return list(self.params.schedulers.values())

    def context(self, loop: LoopView) -> CallbackContext:
        primary = loop.primary
        return CallbackContext(model=loop.model, run=loop.run, optimizer=primary.optimizer,
                               optimizers={str(n): s.optimizer for n, s in loop.slots.items()},
                               trainer=self.trainer, scheduler=None)  # named: none is "the"

    def begin(self, loop: LoopView) -> None:
        if loop.ctx.update_listeners:
            raise ValueError("Trainer.train refuses a callback that registers an update "
                             "listener (ctx.update_listeners, an NNModel.train feature); use "
                             "Callback.on_optimizer_update in an objective run")

    # -- one batch of a trainer_step_fn run -------------------------------------------
    def run_batch(self, loop: LoopView, batch: Any, batch_idx: int, epoch: int,
                  window: UpdateWindow) -> NNEvaluationDataPoint:
        assert self.step_fn is not None
        ctx = TrainerStepContext(
            model=loop.model, batch=batch, batch_idx=batch_idx, epoch=epoch,
            optimizers={str(n): s.optimizer for n, s in loop.slots.items()},
            schedulers={str(n): s.schedule.scheduler for n, s in loop.slots.items()
                        if s.schedule is not None},
            precision=loop.precision, trainer=self.trainer, _on_update=loop.report_update,
            train_net=loop.train_net)
        return self.step_fn(ctx)
