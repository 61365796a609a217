"""search(): a budgeted Optuna study over an experiment plan (spec §29).

Every refusal comes before any trial: the multi-rank refusal first, then the plan, the
space, the budget and the monitor, then the stored study's identity. Each trial runs as
``study.optimize(objective, n_trials=1)``, so Optuna's own trial bookkeeping applies
(the heartbeat of an RDB storage that has one, stale trials failed, a cancelled trial
marked failed) and the loop decides between trials: deadline, exhausted sampler, budget.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import optuna

from nnx import MonitorSpec
from nnx.extend import ExperimentPlan, metric_modes, refuse_multi_rank
from nnx.search import ledger
from nnx.search.budget import SearchBudget
from nnx.search.errors import SearchConfigurationError, StudyMismatchError
from nnx.search.inputs import plan_problems
from nnx.search.optuna_log import Recorded, quiet_refusals
from nnx.search.report import SearchResult, TrialOutcome
from nnx.search.space import SearchSpace
from nnx.search.storage import derived_study_name, open_storage
from nnx.search.study_record import claim_identity, study_identity, verify_identity
from nnx.search.trial import Apply, TrialRunner, attempt_for
from nnx.search.watch import RUN_ID_ATTR

__all__ = ["search"]


class _Objective:
    """One trial: the budget claim, the sampled parameters, the fit; keeps the outcome."""

    def __init__(self, study: optuna.Study, space: SearchSpace, runner: TrialRunner,
                 trials: int, token: str) -> None:
        self.study, self.space, self.runner = study, space, runner
        self.trials, self.token = trials, token
        self.outcome: TrialOutcome | None = None

    def _outcome(self, trial: optuna.Trial, attempt: str) -> TrialOutcome:
        try:
            params = self.space.suggest(trial)
        except Exception as exc:  # the sampler cannot serve this space
            return TrialOutcome(number=trial.number, params={}, state="failed",
                                reason="configuration", attempt_id=attempt,
                                error=f"the sampler could not sample the space: "
                                      f"{type(exc).__name__}: {exc}")
        try:
            return self.runner.run(trial, params, attempt)
        except KeyboardInterrupt:
            trial.set_user_attr("nnx.search.reason", "cancelled")
            raise  # Optuna records the trial as failed, then re-raises

    def __call__(self, trial: optuna.Trial) -> float:
        if not ledger.may_run(self.study, trial.number, self.trials):
            trial.set_user_attr(ledger.UNRUN_ATTR, True)  # lost the race: never ran
            raise Recorded("over the budget: another worker took the last trial", quiet=True)
        attempt = attempt_for(self.token, trial.number)
        trial.set_user_attr("nnx.search.attempt_id", attempt)
        outcome = self.outcome = self._outcome(trial, attempt)
        trial.set_user_attr("nnx.search.reason", outcome.reason)
        if outcome.run_id is not None:
            trial.set_user_attr(RUN_ID_ATTR, outcome.run_id)
        if outcome.error is not None:
            trial.set_user_attr("nnx.search.error", outcome.error)
        if outcome.state == "completed":
            assert outcome.value is not None
            return outcome.value
        if outcome.state == "pruned":
            raise optuna.TrialPruned(f"pruned at epoch {outcome.observations[-1][0]}")
        # A configuration error is raised by search() itself; any other failure is
        # Optuna's to log, with the fit's own exception where there was one.
        raise Recorded(str(outcome.error), quiet=outcome.reason == "configuration",
                       cause=self.runner.raised)


def _check(plan: Any, space: Any, apply: Any, monitor: Any, budget: Any
           ) -> tuple[SearchSpace, MonitorSpec, str]:
    if not isinstance(plan, ExperimentPlan):
        raise TypeError(f"search needs an ExperimentPlan; got {type(plan).__name__}")
    if not isinstance(budget, SearchBudget):
        raise TypeError(f"budget must be a SearchBudget; got {type(budget).__name__}")
    if not callable(apply):
        raise TypeError(f"apply must be a callable apply(plan, params) -> plan; got "
                        f"{type(apply).__name__}")
    space = space if isinstance(space, SearchSpace) else SearchSpace(space)
    if monitor is None:
        monitor = plan.train.monitor
    if not isinstance(monitor, MonitorSpec) or monitor.split != "val":
        raise ValueError(f"search scores trials by a validation MonitorSpec (the plan's own "
                         f"train.monitor); got {monitor!r}")
    plan.validate().raise_for_errors()
    problems = plan_problems(plan, monitor, budget)
    if problems:
        raise ValueError("the plan cannot be searched:\n  - " + "\n  - ".join(problems))
    direction = monitor.direction(metric_modes(plan.train.metrics))
    return space, monitor, direction


def _exhausted(sampler: Any, study: optuna.Study) -> bool:
    """A sampler that can run out of points (GridSampler) and has."""
    check = getattr(sampler, "is_exhausted", None)
    return bool(check(study)) if callable(check) else False


def search(plan: ExperimentPlan, space: SearchSpace | Mapping[str, Any], *, apply: Apply,
           budget: SearchBudget, monitor: MonitorSpec | None = None,
           study_name: str | None = None, storage: Any = None, sampler: Any = None,
           pruner: Any = None) -> SearchResult:
    """Run trials of ``apply(plan, params)`` until the budget, the deadline or the sampler
    ends the search; several processes may call it on one stored study (``storage``: an
    RDB URL or storage, or a JournalStorage) and share its budget. See docs/search.md."""
    refuse_multi_rank("nnx.search.search()")
    started = time.monotonic()
    space, monitor, direction = _check(plan, space, apply, monitor, budget)
    mine = study_identity(space, monitor, direction, plan)
    storage = open_storage(storage)
    if storage is not None and study_name is None:
        study_name = derived_study_name(mine)
    # No pruner means no pruning (Optuna's own default would be a MedianPruner): a pruned
    # trial spends budget without a score, so pruning is asked for, never implied.
    study = optuna.create_study(
        study_name=study_name, storage=storage, sampler=sampler,
        pruner=optuna.pruners.NopPruner() if pruner is None else pruner,
        direction="minimize" if direction == "min" else "maximize", load_if_exists=True)
    wanted = optuna.study.StudyDirection.MINIMIZE if direction == "min" else \
        optuna.study.StudyDirection.MAXIMIZE
    if study.direction != wanted:  # a study made elsewhere, for the other direction
        raise StudyMismatchError(study.study_name, ("direction",))
    token = claim_identity(study, mine, storage)
    deadline = None if budget.deadline_seconds is None else started + budget.deadline_seconds
    runner = TrialRunner(plan, apply, monitor, budget, deadline)
    outcomes: list[TrialOutcome] = []

    def result(stop: str) -> SearchResult:
        # The study is done ("budget", "exhausted"): wait for its orphans to be failed;
        # a deadline only fails the ones already stale.
        ledger.settle(study, storage, wait=stop in ("budget", "exhausted"))
        return SearchResult(study.study_name, direction, stop, ledger.counted(study),
                            tuple(outcomes))

    while True:
        if deadline is not None and time.monotonic() >= deadline:
            return result("deadline")
        if _exhausted(study.sampler, study):
            return result("exhausted")
        if ledger.counted(study) >= budget.trials:
            return result("budget")
        verify_identity(study, mine, token)  # the study is still this search's
        objective = _Objective(study, space, runner, budget.trials, token)
        with quiet_refusals():
            study.optimize(objective, n_trials=1, catch=(Recorded,))
        outcome = objective.outcome
        if outcome is None:  # the trial was over the budget: look again
            continue
        outcomes.append(outcome)
        if outcome.reason == "configuration":
            raise SearchConfigurationError(
                f"trial {outcome.number}: {outcome.error}", result=result("configuration"),
                outcome=outcome)

