"""One trial: apply the parameters to the base plan, fit it, score it by its BEST epoch."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import optuna

from nnx.extend import ExperimentPlan, PlanError, canonical_bytes, sha256_hex
from nnx.search.budget import SearchBudget
from nnx.search.inputs import plan_problems
from nnx.search.report import TrialOutcome
from nnx.search.watch import TrialWatch

__all__ = ["TrialRunner", "attempt_for"]

# apply receives a fresh dict of the trial's parameters each time.
Apply = Callable[[ExperimentPlan, dict[str, Any]], Any]


def attempt_for(token: str, number: int) -> str:
    """The trial's attempt id, from the study's token and the trial's number alone, so its
    run id never depends on the worker that trained it."""
    return sha256_hex(canonical_bytes({"study": token, "trial": number}))[:32]


def _score(run: Any) -> tuple[float | None, int | None, int]:
    """(value, epoch) of the run's BEST decision (the last epoch whose monitor record
    improved: min_delta and ties as the run decided them) and the committed epochs."""
    records = run.epoch_records()
    best = None
    for record in records:
        selection = record.selection
        if selection is not None and selection.improved:
            best = record
    if best is None:
        return None, None, len(records)
    return float(best.selection.value), int(best.epoch), len(records)


def _links(run_id: str | None, run_path: str | None, checkpoints: str | None
           ) -> dict[str, Any]:
    best = None if checkpoints is None else Path(checkpoints) / "best.pt"
    return {"run_id": run_id, "run_path": run_path,
            "checkpoint": str(best) if best is not None and best.is_file() else None}


class ConfigurationFailure(Exception):
    """Internal: the trial met a configuration error (it is recorded, then the search
    stops with SearchConfigurationError)."""


class TrialRunner:
    def __init__(self, base: ExperimentPlan, apply: Apply, monitor: Any,
                 budget: SearchBudget, deadline: float | None) -> None:
        self.base, self.apply, self.monitor = base, apply, monitor
        self.budget, self.deadline = budget, deadline
        # The exception the last trial's fit raised, for Optuna's log of that failure.
        self.raised: BaseException | None = None

    def _plan(self, params: Mapping[str, Any]) -> ExperimentPlan:
        try:
            plan = self.apply(self.base, dict(params))
        except Exception as exc:
            raise ConfigurationFailure(f"apply raised {type(exc).__name__}: {exc}") from exc
        problems = plan_problems(plan, self.monitor, self.budget)
        if problems:
            raise ConfigurationFailure("the plan apply returned cannot be searched:\n  - "
                                       + "\n  - ".join(problems))
        assert isinstance(plan, ExperimentPlan)  # plan_problems refuses anything else
        return plan

    def run(self, trial: optuna.Trial, params: Mapping[str, Any], attempt: str
            ) -> TrialOutcome:
        """The trial's outcome; KeyboardInterrupt propagates (the fit has cleaned up)."""
        started = time.monotonic()
        self.raised = None
        base: dict[str, Any] = {"number": trial.number, "params": params, "attempt_id": attempt}
        try:
            plan = self._plan(params)
        except ConfigurationFailure as exc:
            return TrialOutcome(**base, state="failed", reason="configuration",
                                error=str(exc))
        watch = TrialWatch(trial, updates=self.budget.updates_per_trial,
                           deadline=self.deadline)
        plan = plan.with_callback_factories(*plan.callback_factories, lambda: watch)
        try:
            fit = plan.fit(attempt=attempt, verbose=False)
        except PlanError as exc:  # a factory returned something the plan cannot use
            return TrialOutcome(**base, state="failed", reason="configuration",
                                error=str(exc), seconds=time.monotonic() - started)
        except Exception as exc:  # the run it left (if any) stays linked
            self.raised = exc
            return TrialOutcome(**base, **_links(watch.run_id, watch.run_path,
                                                 watch.checkpoints_dir),
                                state="failed", reason="error",
                                error=f"{type(exc).__name__}: {exc}", updates=watch.updates,
                                epochs=watch.epochs, seconds=time.monotonic() - started,
                                observations=tuple(watch.observations),
                                overrun_seconds=watch.overrun)
        run = fit.run
        value, best_epoch, epochs = _score(run)
        links = _links(str(run.id), str(run.path), str(run.checkpoints_dir))
        used: dict[str, Any] = {"epochs": epochs, "updates": watch.updates,
                "seconds": time.monotonic() - started, "overrun_seconds": watch.overrun,
                "observations": tuple(watch.observations)}
        if watch.reason == "pruned":
            return TrialOutcome(**base, **links, **used, state="pruned", reason="pruned",
                                value=value, best_epoch=best_epoch)
        if value is None or not math.isfinite(value):
            why = ("the trial committed no epoch" if epochs == 0 else
                   f"the monitor {self.monitor.key} never had a finite value")
            # A cap or the deadline that stopped it before any scored epoch stays its reason.
            return TrialOutcome(**base, **links, **used, state="failed",
                                reason=watch.reason or "no_value", error=why)
        return TrialOutcome(**base, **links, **used, state="completed",
                            reason=watch.reason or "completed", value=value,
                            best_epoch=best_epoch)
