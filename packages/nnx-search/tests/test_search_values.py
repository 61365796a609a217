"""SearchSpace and SearchBudget: what they accept and refuse."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from nnx.search import SearchBudget, SearchResult, SearchSpace, TrialOutcome


def test_budget_refuses_what_is_not_a_count_or_a_positive_deadline() -> None:
    for bad in (0, -1, 2.0, True, None):
        with pytest.raises(ValueError, match=r"SearchBudget\.trials"):
            SearchBudget(trials=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="updates_per_trial"):
        SearchBudget(trials=1, updates_per_trial=0)
    for bad_deadline in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="deadline_seconds"):
            SearchBudget(trials=1, deadline_seconds=bad_deadline)
    assert SearchBudget(trials=3, updates_per_trial=2, deadline_seconds=1).deadline_seconds == 1


def test_space_refuses_empty_unnamed_or_foreign_distributions() -> None:
    with pytest.raises(ValueError, match="non-empty mapping"):
        SearchSpace({})
    with pytest.raises(ValueError, match="name"):
        SearchSpace({"": IntDistribution(1, 2)})
    with pytest.raises(ValueError, match=r"SearchSpace\['lr'\]"):
        SearchSpace({"lr": (0.1, 0.2)})  # type: ignore[dict-item]


def test_space_identity_follows_the_distributions_not_their_order() -> None:
    a = SearchSpace({"lr": FloatDistribution(0.01, 0.1, log=True),
                     "act": CategoricalDistribution(("relu", "tanh"))})
    b = SearchSpace({"act": CategoricalDistribution(("relu", "tanh")),
                     "lr": FloatDistribution(0.01, 0.1, log=True)})
    c = SearchSpace({"lr": FloatDistribution(0.01, 0.2, log=True),
                     "act": CategoricalDistribution(("relu", "tanh"))})
    assert a.identity == b.identity != c.identity
    assert list(a) == ["act", "lr"] and len(a) == 2


def test_space_suggests_every_kind_through_the_trial() -> None:
    space = SearchSpace({"lr": FloatDistribution(0.01, 0.1, log=True),
                         "width": IntDistribution(4, 32, step=4),
                         "act": CategoricalDistribution(("relu", "tanh"))})
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    params = space.suggest(study.ask())
    assert set(params) == {"lr", "width", "act"}
    assert 0.01 <= params["lr"] <= 0.1 and params["width"] % 4 == 0
    assert params["act"] in ("relu", "tanh")


def test_best_is_the_completed_trial_with_the_best_finite_value() -> None:
    def outcome(n: int, state: str, value: float | None) -> TrialOutcome:
        return TrialOutcome(number=n, params={}, state=state, reason=state, value=value)

    trials = (outcome(0, "completed", 0.5), outcome(1, "pruned", 0.1),
              outcome(2, "completed", 0.3), outcome(3, "failed", None))
    assert SearchResult("s", "min", "budget", 4, trials).best.number == 2  # type: ignore[union-attr]
    assert SearchResult("s", "max", "budget", 4, trials).best.number == 0  # type: ignore[union-attr]
    assert SearchResult("s", "min", "budget", 1, trials[3:]).best is None


def test_every_stop_reason_is_announced() -> None:
    from nnx.search import STOP_REASONS

    assert STOP_REASONS == ("budget", "deadline", "exhausted", "configuration")
