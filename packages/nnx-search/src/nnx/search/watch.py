"""The callback each trial's fit carries: update caps, the deadline, pruning reports.

Non-preemptive (spec §29): it never interrupts a step. A cap or a passed deadline sets
``ctx.stop_at_update`` from an update listener, so training stops right after that
committed update; an epoch that has not completed is discarded and LAST stays the last
completed epoch's (§6.1). At each validated epoch it reports the monitor's value to the
trial and stops at that epoch boundary when the pruner says so or the deadline passed.
"""

from __future__ import annotations

import math
import time
from typing import Any

import optuna

from nnx import Callback, CallbackContext

__all__ = ["RUN_ID_ATTR", "TrialWatch"]

RUN_ID_ATTR = "nnx.search.run_id"


class TrialWatch(Callback):
    def __init__(self, trial: optuna.Trial, *, updates: int | None,
                 deadline: float | None) -> None:
        self.trial = trial
        self.updates_cap = updates
        self.deadline = deadline  # a time.monotonic() instant, or None
        self.reason: str | None = None  # "updates_cap", "deadline" or "pruned"
        self.overrun: float | None = None
        self.observations: list[tuple[int, float]] = []
        self.updates = 0
        # The run's links and committed epochs, kept as training goes so that a fit that
        # raises still reports the run it left behind.
        self.run_id: str | None = None
        self.run_path: str | None = None
        self.checkpoints_dir: str | None = None
        self.epochs = 0

    def _past_deadline(self) -> bool:
        if self.deadline is None:
            return False
        late = time.monotonic() - self.deadline
        if late < 0:
            return False
        self.reason, self.overrun = "deadline", late
        return True

    def on_train_begin(self, ctx: CallbackContext) -> None:
        self.run_id, self.run_path = str(ctx.run.id), str(ctx.run.path)
        # Recorded in the study as soon as the run exists: a worker killed mid-trial
        # leaves its orphan linked to the run it was training.
        self.trial.set_user_attr(RUN_ID_ATTR, self.run_id)
        self.checkpoints_dir = str(ctx.run.checkpoints_dir)
        if self.updates_cap is not None or self.deadline is not None:
            ctx.update_listeners.append(self._after_update)

    def _after_update(self, ctx: CallbackContext) -> None:
        self.updates = ctx.committed_updates
        if self.updates_cap is not None and ctx.committed_updates >= self.updates_cap:
            self.reason = "updates_cap"
            ctx.stop_at_update = True
        elif self._past_deadline():
            ctx.stop_at_update = True

    def _committed(self, ctx: CallbackContext) -> None:
        self.epochs = ctx.epoch + 1

    def on_epoch_end(self, ctx: CallbackContext) -> None:
        ctx.defer(self._committed)  # counted once the epoch has committed, not before
        record: Any = None if ctx.idp is None else ctx.idp.selection
        if record is not None and record.value is not None and math.isfinite(record.value):
            # Only the run's own validated monitor value is ever reported (never a
            # training or last-batch value).
            self.observations.append((ctx.epoch, record.value))
            self.trial.report(record.value, step=ctx.epoch)
            if self.trial.should_prune():
                self.reason = "pruned"
                ctx.should_stop = True
                return
        if self._past_deadline():
            ctx.should_stop = True

    def on_train_end(self, ctx: CallbackContext) -> None:
        self.updates = ctx.committed_updates
