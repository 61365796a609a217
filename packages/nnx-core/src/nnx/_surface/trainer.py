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
from nnx._engine.fit_loop import EvalFn, FitLoop
from nnx._engine.optimizers import build_optimizer
from nnx._engine.schedule import ScheduleDriver, planned_updates_per_epoch
from nnx._engine.steps import UpdateWindow
from nnx._engine.update_engine import OptimizerSlot
from nnx._foundation.records import NNEvaluationDataPoint
from nnx._persistence.run import DEFAULT_ROOT, NNRun
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
        loop = _TrainerLoop(self, params, step_fn=trainer_step_fn, objective=objective,
                            eval_fn=eval_step_fn, callbacks=list(callbacks or ()), salt=salt,
                            verbose=verbose, root=os.fspath(root),
                            components=list(components or ()),
                            history=history, provenance=provenance, distributed=distributed)
        return loop.execute()

    def __repr__(self) -> str:
        return f"Trainer(model={self.model!r})"


class _TrainerLoop(FitLoop):
    kind = "trainer"
    custom_step = True  # neither owner records declared metrics on training batches

    def __init__(self, trainer: Trainer, params: NNTrainerParams, *,
                 step_fn: TrainerStepFn | None, objective: Any, **kwargs: Any) -> None:
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
        self.trainer, self.step_fn = trainer, step_fn
        super().__init__(trainer.model, params, objective=objective, **kwargs)

    # -- building (every refusal of §8.2 happens here, before any reservation) --------
    def _build(self) -> None:
        params, model = self.params, self.model
        self.auto_step_schedulers = params.auto_step_schedulers
        if self.objective is None:
            self._check_step_fn_run()
        else:
            self._check_objective_run()
        slots: dict[str | None, OptimizerSlot] = {}
        for name, config in params.optims.items():  # insertion order builds
            optimizer = build_optimizer(model.net, config, strict_param_groups=True)
            slots[name] = OptimizerSlot(name, optimizer, config)
        # Every owner steps each optimizer it holds, so a shared parameter would update
        # twice: refused for step-function and objective runs alike (§8.1).
        check_strict_ownership(model.net, {str(n): s.optimizer for n, s in slots.items()})
        per_epoch = None if self.objective is None else planned_updates_per_epoch(
            params.train_loader, self.accumulate)
        for name, schedule in params.schedulers.items():
            slot = slots[name]
            slot.schedule = ScheduleDriver(schedule, slot.optimizer, params.n_epochs,
                                           updates_per_epoch=per_epoch,
                                           plateau_rule=self.plateau_rule(),
                                           build=model._build_scheduler)
        self.slots = slots

    def _check_step_fn_run(self) -> None:
        for name, config in self.params.optims.items():
            if config.grad_clip_norm is not None or config.accumulate_grad_batches != 1:
                raise ValueError(
                    f"optimizer {name!r}: a trainer_step_fn run cannot apply grad_clip_norm or "
                    "accumulate_grad_batches to the step's own updates; clip or accumulate "
                    "inside the step function, or pass objective= instead")
        policy = self.model.params.precision
        if policy is not None and policy.is_reduced:
            raise ValueError(f"a trainer_step_fn owns every update in full precision; "
                             f"precision={policy.name} needs objective= (the shared update "
                             "engine applies autocast and the FP16 scaler)")
        self.precision = ResolvedPrecision(Precision.FP32, self.model.device.type)
        self.scaler = None
        self.accumulate = 1

    def _check_objective_run(self) -> None:
        params, model = self.params, self.model
        if not params.auto_step_schedulers:
            raise ValueError("an objective run has no step function to take scheduler timing "
                             "over: auto_step_schedulers=False would leave every schedule "
                             "unstepped")
        windows = {config.accumulate_grad_batches for config in params.optims.values()}
        if len(windows) > 1:
            raise ValueError(f"the named optimizers share one update window in an objective "
                             f"run; got accumulate_grad_batches {sorted(windows)}")
        self.accumulate = windows.pop()
        policy = model.params.precision
        if policy is None and model.params.mixed_precision and model.device.type == "cuda":
            warnings.warn("Trainer does not apply the legacy mixed_precision flag: the objective "
                          "runs in full precision; set NNModelParams.precision instead",
                          RuntimeWarning, stacklevel=4)
        self.precision = ResolvedPrecision(policy or Precision.FP32, model.device.type)
        self.scaler = self.precision.make_scaler()

    def _new_run(self, salt: str | None, root: str) -> NNRun:
        model = self.model
        return NNRun(model_params=model.params, net_params=model.net_params,
                     trainer_params=self.params, salt=salt, transforms=self.transforms,
                     root=root)

    def _update_owner(self) -> Any:
        return self.objective if self.objective is not None else self.step_fn

    def schedule_params(self) -> list[Any]:
        return list(self.params.schedulers.values())

    def _context(self) -> CallbackContext:
        primary = self.primary
        return CallbackContext(model=self.model, run=self.run, optimizer=primary.optimizer,
                               optimizers={str(n): s.optimizer for n, s in self.slots.items()},
                               trainer=self.trainer, scheduler=None)  # named: none is "the"

    def _begin(self) -> None:
        if self.ctx.update_listeners:
            raise ValueError("Trainer.train refuses a callback that registers an update "
                             "listener (ctx.update_listeners, an NNModel.train feature); use "
                             "Callback.on_optimizer_update in an objective run")

    # -- one batch --------------------------------------------------------------------
    def run_batch(self, batch: Any, batch_idx: int, epoch: int,
                  window: UpdateWindow) -> NNEvaluationDataPoint:
        if self.engine is not None:
            return super().run_batch(batch, batch_idx, epoch, window)
        assert self.step_fn is not None
        ctx = TrainerStepContext(
            model=self.model, batch=batch, batch_idx=batch_idx, epoch=epoch,
            optimizers={str(n): s.optimizer for n, s in self.slots.items()},
            schedulers={str(n): s.schedule.scheduler for n, s in self.slots.items()
                        if s.schedule is not None},
            precision=self.precision, trainer=self.trainer, _on_update=self.report_update,
            train_net=self.ddp_net)
        return self.step_fn(ctx)
