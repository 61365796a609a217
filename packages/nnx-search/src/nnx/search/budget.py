"""SearchBudget: the hard limits of one search (spec §29)."""

from __future__ import annotations

from dataclasses import dataclass

from nnx.extend import POSITIVE, check_count, check_optional_count, check_optional_real

__all__ = ["SearchBudget"]


@dataclass(frozen=True)
class SearchBudget:
    """``trials``: the most trials the study ever counts (completed, failed, pruned and
    orphaned alike, across every worker); ``updates_per_trial``: stop a trial right after
    that many committed optimizer updates; ``deadline_seconds``: start no trial after it,
    and stop a running one at its next update or epoch boundary. Both caps are
    non-preemptive."""

    trials: int
    updates_per_trial: int | None = None
    deadline_seconds: float | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "trials", check_count("SearchBudget.trials", self.trials))
        set_(self, "updates_per_trial", check_optional_count(
            "SearchBudget.updates_per_trial", self.updates_per_trial, none_means="no cap"))
        set_(self, "deadline_seconds", check_optional_real(
            "SearchBudget.deadline_seconds", self.deadline_seconds, POSITIVE,
            none_means="no deadline"))
