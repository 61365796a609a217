"""What follows every committed optimizer update (spec §6.1, §6.5, §14.3).

The counters move, the update-clock schedules step, the callbacks' update listeners
run, and the rate the update used is kept for the batch's record. A step function
reports its updates (``ctx.report_update()``, :meth:`UpdateHooks.report`); the shared
update engine reports each window it commits (:meth:`UpdateHooks.engine_committed`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nnx._engine.loop_state import LoopState

if TYPE_CHECKING:
    from nnx._engine.update_engine import OptimizerSlot
    from nnx.objectives import UpdateEvent

__all__ = ["UpdateHooks"]


class UpdateHooks:
    """The loop's bookkeeping after each update. ``step_schedules`` is False when a
    ``trainer_step_fn`` took scheduler timing over."""

    def __init__(self, state: LoopState, callbacks: Sequence[Any], *,
                 step_schedules: bool) -> None:
        self.state, self.ctx, self.callbacks = state, state.ctx, callbacks
        self.primary = state.primary
        self.step_schedules = step_schedules
        self.lr_used: float | None = None  # the primary's rate at its last update (a batch)
        self.clocked = step_schedules and any(
            s.schedule is not None and s.schedule.clock == "optimizer_update"
            for s in state.slots.values())

    def report(self, name: str | None) -> None:
        """A step function committed an update of optimizer ``name``."""
        slot = self.state.slots[name]
        slot.updates += 1
        self.state.committed_updates += 1
        self.state.updates_this_epoch += 1
        self._after([slot])

    def engine_committed(self, events: list[UpdateEvent],
                         stepped: list[OptimizerSlot]) -> None:
        """The update engine committed a window (it counted the updates itself)."""
        self.state.updates_this_epoch += 1
        for event in events:  # every event of a commit fires before any schedule steps
            for cb in self.callbacks:
                cb.on_optimizer_update(self.ctx, event)
        self._after(stepped)

    def _after(self, stepped: list[OptimizerSlot]) -> None:
        primary = self.primary
        if primary in stepped:
            # The rate this update used, read before its update-clock schedule moves on
            # to the next update's: what the batch's record shows.
            self.lr_used = float(primary.optimizer.param_groups[0]["lr"])
        if self.step_schedules:
            for slot in stepped:
                if slot.schedule is not None:
                    slot.schedule.on_update()
                    if slot is primary and slot.schedule.clock == "optimizer_update":
                        for listener in list(self.ctx.clock_listeners):
                            listener(self.ctx)
        for listener in list(self.ctx.update_listeners):
            listener(self.ctx)

    def record_lr(self, group: Mapping[str, Any]) -> float:
        """The LR a batch's record shows: the rate its last update of the primary
        optimizer used, else (no update yet in an open window) the rate the window's
        update will use. On the update clock the schedule has already moved past it."""
        return self.lr_used if self.lr_used is not None else float(group["lr"])

    def check_epoch(self, epoch: int) -> None:
        """An epoch without a reported update leaves an update-clock schedule unstepped:
        said once, at the epoch's end."""
        if self.clocked and self.state.updates_this_epoch == 0:
            warnings.warn(f"epoch {epoch} reported no optimizer update: the update-clock "
                          "schedule did not step (call ctx.report_update() after each "
                          "optimizer.step() in a custom step)", RuntimeWarning, stacklevel=3)
