"""UpdateOwner: what one kind of training run gives the epoch loop (spec §6, §6.5, §8).

The loop (:class:`nnx._engine.fit_loop.FitLoop`) is one class, never subclassed:
the reservation, the epochs, the commit and resume are the same for every run.
What differs between ``NNModel.train`` (one optimizer, a step function or an
objective) and ``Trainer.train`` (named optimizers) is handed to the loop as one
object satisfying :class:`UpdateOwner`:

* ``build`` — the optimizer slots, precision, scaler and update window, with
  every refusal, before anything is reserved;
* ``new_run`` — the run the configuration addresses (its id);
* ``schedule_params`` — the schedules a resume checks the budgets of;
* ``run_batch`` — one microbatch of a step-function run (an objective run goes
  through the shared update engine, which the loop drives itself).

The optional members (``context``, ``begin``, ``begin_epoch``) have defaults
in the loop. A tool that needs its own kind of run (nnx-viz's LR sweep) passes
its own owner to :func:`nnx.extend.run_fit_loop` instead
of subclassing the loop. Owners read the loop through :class:`LoopView`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

    from nnx._contracts.precision import ResolvedPrecision
    from nnx._contracts.trainable import TrainableModel
    from nnx._engine.distributed import DistributedSession
    from nnx._engine.steps import UpdateWindow
    from nnx._engine.update_engine import OptimizerSlot
    from nnx._foundation.records import NNEvaluationDataPoint
    from nnx._persistence.run import NNRun
    from nnx.callbacks.base import CallbackContext

__all__ = ["LoopView", "OwnerBuild", "UpdateOwner"]


@dataclass
class OwnerBuild:
    """What :meth:`UpdateOwner.build` returns: the run's optimizer slots (keyed by name,
    ``None`` for NNModel.train's one optimizer), its resolved precision and FP16 scaler,
    the microbatches of one update window, and whether the loop steps the schedules
    (False: a ``trainer_step_fn`` takes scheduler timing over)."""

    slots: dict[str | None, OptimizerSlot]
    precision: ResolvedPrecision
    scaler: torch.amp.GradScaler | None
    accumulate: int = 1
    auto_step_schedulers: bool = True


class LoopView(Protocol):
    """What an owner reads of the loop it was given: all set before the owner is asked,
    except ``run`` and ``ctx`` (set after ``build`` and ``new_run``) and ``train_net`` (set
    when the fit starts)."""

    model: TrainableModel
    metrics: Any  # the run's declared metrics (params.metrics)
    monitor: Any  # its named monitor, or None
    transforms: Any  # the model's transform recipes, as the run id records them
    precision: ResolvedPrecision
    scaler: torch.amp.GradScaler | None
    accumulate: int
    slots: dict[str | None, OptimizerSlot]
    run: NNRun
    ctx: CallbackContext
    train_net: Any  # the module the training forward goes through (DDP's wrapper), or None

    @property
    def primary(self) -> OptimizerSlot: ...

    @property
    def distributed(self) -> DistributedSession | None:
        """What a step sums gradients and counts across processes through; None alone."""
        ...

    def plateau_rule(self) -> tuple[str, float, str] | None: ...

    def report_update(self, name: str | None) -> None: ...


@runtime_checkable
class UpdateOwner(Protocol):
    """One kind of training run, as the epoch loop uses it (module docstring).

    ``kind`` is what LAST records (``"model"`` or ``"trainer"``); ``custom_step``
    says the owner records no declared metric on training batches (the loop then
    summarises nothing per batch for them); ``component`` is the step function or
    objective, discovered as a checkpointed component when it is one.
    """

    kind: str
    custom_step: bool
    component: Any

    def build(self, loop: LoopView) -> OwnerBuild: ...

    def new_run(self, loop: LoopView, salt: str | None, root: str) -> NNRun: ...

    def schedule_params(self) -> Sequence[Any]: ...

    def run_batch(self, loop: LoopView, batch: Any, batch_idx: int, epoch: int,
                  window: UpdateWindow) -> NNEvaluationDataPoint: ...
