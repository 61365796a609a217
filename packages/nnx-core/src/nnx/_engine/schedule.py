"""Scheduler clocks and budgets (spec §2.5): when a schedule steps, and how far it may go.

An ``"epoch"``-clock schedule steps once per completed epoch (a plateau
schedule reads the epoch's control signal). An ``"optimizer_update"``-clock
schedule steps once per committed optimizer update, never per microbatch,
masked window or skipped AMP step. Budgets count the clock's unit; without
an explicit budget the horizon is the planned one (epochs, or epochs × updates
per epoch when NNx owns the windows and the loader has a length).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.optim import lr_scheduler

from nnx._contracts.components import ComponentSpec
from nnx.enums.schedulers import Schedulers
from nnx.params.scheduler import NNSchedulerParams

__all__ = ["ScheduleDriver", "ScheduleExhaustedError", "SchedulerClock", "build_scheduler",
           "planned_updates_per_epoch"]

Builder = Callable[..., Any]


class ScheduleExhaustedError(RuntimeError):
    """A one-cycle / warmup-decay schedule was asked to go past its total_steps."""


def planned_updates_per_epoch(loader: Any, accumulate: int) -> int | None:
    """ceil(batches / accumulate_grad_batches), or None for a loader without a length."""
    try:
        batches = len(loader)
    except TypeError:
        return None
    return math.ceil(batches / accumulate)


_BOUNDED = (Schedulers.ONE_CYCLE, Schedulers.LINEAR_WARMUP_DECAY)


def _check_covers(kind: Schedulers, total_steps: int, clock: str, n_epochs: int,
                  updates_per_epoch: int | None) -> None:
    """Refuse, before any run is reserved, an explicit total_steps the plan's steps pass.

    Known on the epoch clock, and on the update clock when NNx owns the windows and the
    loader has a length; otherwise the run stops at the first step past it (§2.5).
    """
    if clock == "epoch":
        planned, unit = n_epochs, "epoch(s)"
    elif updates_per_epoch is not None:
        planned, unit = n_epochs * updates_per_epoch, (
            f"optimizer update(s) ({n_epochs} epoch(s) x {updates_per_epoch})")
    else:
        return
    if total_steps < planned:
        raise ValueError(f"NNSchedulerParams.total_steps ({total_steps}) is shorter than the "
                         f"plan: the {kind.name} schedule would take {planned} {unit}; set "
                         f"total_steps >= {planned} or train fewer epochs")


def build_scheduler(optimizer: torch.optim.Optimizer, params: NNSchedulerParams, n_epochs: int,
                    *, updates_per_epoch: int | None = None,
                    plateau_rule: tuple[str, float, str] | None = None) -> Any:
    """The torch scheduler ``params`` describes (NNModel._build_scheduler's default)."""
    kind = params.resolved_kind
    if kind is Schedulers.REDUCE_LR_ON_PLATEAU:
        mode, threshold, threshold_mode = plateau_rule or ("min", params.threshold, "rel")
        plateau: Any = lr_scheduler.ReduceLROnPlateau
        return plateau(optimizer, mode=mode, factor=params.factor, patience=params.patience,
                       threshold=threshold, threshold_mode=threshold_mode,
                       cooldown=params.cooldown, min_lr=params.min_lr)
    return kind(optimizer, params, n_epochs, updates_per_epoch=updates_per_epoch)


def _check_built(scheduler: Any, clock: str) -> None:
    """What a _build_scheduler override returned must be steppable on ``clock``."""
    if not all(callable(getattr(scheduler, name, None))
               for name in ("step", "state_dict", "load_state_dict")):
        raise TypeError(f"_build_scheduler must return a scheduler (step / state_dict / "
                        f"load_state_dict); got {type(scheduler).__name__}")
    if clock != "optimizer_update":
        return
    if isinstance(scheduler, lr_scheduler.ReduceLROnPlateau):
        raise ValueError("a ReduceLROnPlateau reads a monitored metric at the epoch boundary "
                         "and cannot run on the 'optimizer_update' clock")
    if not hasattr(scheduler, "last_epoch"):
        raise ValueError(f"a {type(scheduler).__name__} has no last_epoch position, so it "
                         "cannot run on the 'optimizer_update' clock (its position would not "
                         "count updates); use the 'epoch' clock or a single LRScheduler")


class ScheduleDriver:
    """Builds a run's scheduler (through ``build``: NNModel._build_scheduler) and steps it
    on its clock."""

    def __init__(
        self,
        params: NNSchedulerParams,
        optimizer: torch.optim.Optimizer,
        n_epochs: int,
        *,
        updates_per_epoch: int | None,
        plateau_rule: tuple[str, float, str] | None = None,
        build: Builder = build_scheduler,
    ) -> None:
        self.params = params
        self.kind = params.resolved_kind
        self.clock = params.clock
        explicit = {Schedulers.STEP: params.step_size, Schedulers.COSINE_ANNEALING: params.T_max,
                    Schedulers.ONE_CYCLE: params.total_steps,
                    Schedulers.LINEAR_WARMUP_DECAY: params.total_steps}.get(self.kind)
        self.explicit_budget = explicit is not None
        needs_budget = self.clock == "optimizer_update" and not self.explicit_budget
        if needs_budget and updates_per_epoch is None:
            raise ValueError(
                f"a {self.kind.name} schedule on the 'optimizer_update' clock needs an explicit "
                "budget (total_steps / T_max) when the loader has no length or a custom step "
                "owns the updates"
            )
        self.updates_per_epoch = updates_per_epoch  # None: a custom step owns the updates
        horizon_unit = 1 if self.clock == "epoch" else (updates_per_epoch or 0)
        self.horizon = explicit if explicit is not None else n_epochs * horizon_unit
        if self.kind in _BOUNDED and explicit is not None:
            _check_covers(self.kind, explicit, self.clock, n_epochs, updates_per_epoch)
        self.scheduler: Any = build(optimizer, params, n_epochs,
                                    updates_per_epoch=updates_per_epoch,
                                    plateau_rule=plateau_rule)
        _check_built(self.scheduler, self.clock)
        self.steps = 0
        self._warned_cosine = False

    @property
    def is_plateau(self) -> bool:
        """A plateau scheduler reads the epoch's signal (whatever built it)."""
        return isinstance(self.scheduler, lr_scheduler.ReduceLROnPlateau)

    def on_epoch_end(self, signal: float | None) -> None:
        """Step an epoch-clock schedule; a plateau schedule reads ``signal``."""
        if self.clock != "epoch":
            return
        if self.is_plateau:
            if signal is None:
                warnings.warn("no metric available this epoch: the plateau scheduler does not "
                              "step", RuntimeWarning, stacklevel=2)
                return
            worse = math.inf if self.scheduler.mode == "min" else -math.inf
            self.scheduler.step(signal if math.isfinite(signal) else worse)
            return
        self._advance()

    def on_update(self) -> None:
        """Step an update-clock schedule after one committed optimizer update."""
        if self.clock == "optimizer_update":
            self._advance()

    def _advance(self) -> None:
        self.steps += 1
        if self.kind in _BOUNDED:
            if self.steps > self.horizon:
                raise ScheduleExhaustedError(
                    f"the {self.kind.name} schedule's total_steps ({self.horizon}) is exhausted: "
                    f"{self.clock} {self.steps} is past it. Set total_steps to cover the run "
                    "(a loader yielding more batches than its len() needs an explicit one)"
                )
            if self.steps == self.horizon:
                return  # the last position is final; stepping past it is refused above
        if (self.kind is Schedulers.COSINE_ANNEALING and self.steps > self.horizon
                and not self.explicit_budget and not self._warned_cosine):
            self._warned_cosine = True
            warnings.warn(f"the cosine schedule passed its T_max ({self.horizon}); its rate now "
                          "climbs back up. Set T_max to the run's length", RuntimeWarning,
                          stacklevel=3)
        self.scheduler.step()

    def state_dict(self) -> dict[str, Any]:
        return {"scheduler": self.scheduler.state_dict(), "steps": self.steps,
                "clock": self.clock, "horizon": self.horizon, "kind": self.kind.name,
                "explicit": self.explicit_budget}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(state["scheduler"])
        self.steps = state["steps"]
        if not self.explicit_budget and state.get("horizon") is not None:
            # A default budget keeps the checkpoint's period (§2.5: "a stateful resume keeps
            # the checkpoint's T_max"); the scheduler state just loaded already counts in it.
            self.horizon = int(state["horizon"])
            self.explicit_budget = bool(state.get("explicit", False))


class SchedulerClock:
    """An update-clock schedule's clock, owner and budget, checkpointed as the required
    component ``nnx.scheduler_clock`` (``nnx.scheduler_clock.<name>`` per Trainer
    optimizer) beside the scheduler's own state and position (spec §2.5).

    A stateful resume refuses, before anything is restored, a checkpoint saved on another
    clock, for another optimizer or with another budget; the budget is the horizon the
    schedule counts in updates (explicit, or the planned default).
    """

    def __init__(self, driver: ScheduleDriver, owner: str | None) -> None:
        self.driver, self.owner = driver, owner

    def component_spec(self) -> ComponentSpec:
        name = "nnx.scheduler_clock" if self.owner is None else (
            f"nnx.scheduler_clock.{self.owner}")
        return ComponentSpec(name, 1, required=True)

    def component_state(self) -> dict[str, Any]:
        return {"clock": self.driver.clock, "owner": self.owner, "budget": self.driver.horizon,
                "explicit": self.driver.explicit_budget, "steps": self.driver.steps}

    def check_component_state(self, state: dict[str, Any], *, version: int) -> list[str]:
        problems = []
        for key, now in (("clock", self.driver.clock), ("owner", self.owner)):
            if state.get(key) != now:
                problems.append(f"{key}: saved {state.get(key)!r}, now {now!r}")
        if state.get("budget") != self.driver.horizon:
            how = "explicit" if self.driver.explicit_budget else "the planned default"
            problems.append(f"budget: saved {state.get('budget')} update(s), now "
                            f"{self.driver.horizon} ({how}); resume with the original budget "
                            "(set total_steps / T_max / step_size explicitly), "
                            "resume_epochs='planned', or resume_mode='weights_only'")
        return problems

    def load_component_state(self, state: dict[str, Any], *, version: int) -> None:
        self.driver.steps = int(state["steps"])

