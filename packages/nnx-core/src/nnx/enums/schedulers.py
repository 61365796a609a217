"""Schedulers: ``Schedulers.COSINE_ANNEALING(opt, params, n_epochs)`` → ``CosineAnnealingLR``.

The horizon a schedule counts in follows ``params.clock`` (spec §2.5): epochs
on the default ``"epoch"`` clock, committed optimizer updates on
``"optimizer_update"``. An explicit budget (``step_size``, ``T_max``,
``total_steps``) wins; otherwise the planned horizon is used, which on the
update clock needs ``updates_per_epoch``.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

# torch is imported on first use, not at import: ``nnx runs show`` renders a run's typed
# configuration (these members) and must run without torch (docs/architecture.md).

__all__ = ["ScheduleKnobs", "Schedulers", "default_warmup_steps"]


class ScheduleKnobs(Protocol):
    """The knobs a schedule is built from: what :class:`nnx.NNSchedulerParams` carries.

    Typed structurally so this enum needs nothing from ``nnx.params`` (which builds
    on the enum): the two modules would otherwise import each other.
    """

    @property
    def clock(self) -> str: ...
    @property
    def min_lr(self) -> float: ...
    @property
    def factor(self) -> float: ...
    @property
    def patience(self) -> int: ...
    @property
    def cooldown(self) -> int: ...
    @property
    def threshold(self) -> float: ...
    @property
    def step_size(self) -> int | None: ...
    @property
    def T_max(self) -> int | None: ...
    @property
    def total_steps(self) -> int | None: ...
    @property
    def warmup_steps(self) -> int | None: ...
    @property
    def max_lr(self) -> float | None: ...


class Schedulers(enum.Enum):
    REDUCE_LR_ON_PLATEAU = "reduce_lr_on_plateau"
    STEP = "step"
    COSINE_ANNEALING = "cosine_annealing"
    ONE_CYCLE = "one_cycle"
    LINEAR_WARMUP_DECAY = "linear_warmup_decay"

    def __call__(
        self,
        optimizer: torch.optim.Optimizer,
        params: ScheduleKnobs,
        n_epochs: int,
        *,
        updates_per_epoch: int | None = None,
    ) -> Any:
        """Build the torch scheduler for ``params`` over ``n_epochs`` of training."""
        # Imported on first use (module comment): both load torch.
        from torch.optim import lr_scheduler

        from nnx.enums._lr_schedules import LinearWarmupDecayLR  # subclasses torch's

        p = params
        if self is Schedulers.REDUCE_LR_ON_PLATEAU:
            return lr_scheduler.ReduceLROnPlateau(
                optimizer,
                mode="min",
                factor=p.factor,
                patience=p.patience,
                threshold=p.threshold,
                cooldown=p.cooldown,
                min_lr=p.min_lr,
            )
        if self is Schedulers.STEP:
            assert p.step_size is not None  # NNSchedulerParams requires it for STEP
            return lr_scheduler.StepLR(optimizer, step_size=p.step_size, gamma=p.factor)
        if self is Schedulers.COSINE_ANNEALING:
            t_max = p.T_max or _horizon(p, n_epochs, updates_per_epoch)
            return lr_scheduler.CosineAnnealingLR(optimizer, T_max=t_max, eta_min=p.min_lr)
        total = p.total_steps or _horizon(p, n_epochs, updates_per_epoch)
        if self is Schedulers.ONE_CYCLE:
            max_lr: Any = p.max_lr
            if max_lr is None:
                max_lr = [group["lr"] for group in optimizer.param_groups]
            return lr_scheduler.OneCycleLR(optimizer, max_lr=max_lr, total_steps=total)
        warmup = p.warmup_steps
        if warmup is None:
            warmup = default_warmup_steps(p, n_epochs, updates_per_epoch, total)
        return LinearWarmupDecayLR(optimizer, warmup_steps=warmup, total_steps=total,
                                   min_lr=p.min_lr)


def _horizon(p: ScheduleKnobs, n_epochs: int, updates_per_epoch: int | None) -> int:
    if p.clock == "epoch":
        return n_epochs
    if updates_per_epoch is None:
        raise ValueError(
            "an optimizer_update-clock schedule without an explicit budget needs the "
            "planned updates per epoch (a loader with a length); set total_steps / T_max"
        )
    return n_epochs * updates_per_epoch


def default_warmup_steps(p: ScheduleKnobs, n_epochs: int, updates_per_epoch: int | None,
                         total: int) -> int:
    """A warm-up-decay schedule's warm-up when ``warmup_steps`` is None (spec §14.2).

    A tenth of this session's horizon in the clock's unit, rounded down and at least
    one step: ``max(1, n_epochs // 10)`` epochs on the epoch clock, and on the update
    clock ``max(1, planned_updates // 10)`` with ``planned_updates = n_epochs ×
    updates_per_epoch`` (``total_steps`` when a custom step owns the updates). It never
    exceeds ``total_steps``.
    """
    if p.clock == "epoch":
        span = n_epochs
    else:
        span = total if updates_per_epoch is None else n_epochs * updates_per_epoch
    return min(total, max(1, span // 10))

