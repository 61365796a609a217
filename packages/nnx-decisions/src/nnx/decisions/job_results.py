"""What a DecisionJob run gives (spec §17): JobResult, or JobFailed / JobCancelled
carrying every outcome and no partial value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nnx.decisions.errors import DecisionError

__all__ = ["OUTCOMES", "JobCancelled", "JobFailed", "JobResult"]

#: What became of each asked id.
OUTCOMES = ("answered", "failed", "skipped", "cancelled", "sent")


@dataclass(frozen=True)
class JobResult:
    """A job's value, what became of every asked id (in asking order), and the
    provider calls made (each the ids it carried, in order)."""

    value: Any
    outcomes: Mapping[str, str]
    calls: tuple[tuple[str, ...], ...]


class JobFailed(DecisionError):
    """A fail-fast job stopped: the outcomes so far (completed ones included), the
    failed and skipped ids, the calls made; no partial value. ``__cause__`` is the
    provider's error."""

    def __init__(self, message: str, *, outcomes: Mapping[str, str],
                 calls: tuple[tuple[str, ...], ...]) -> None:
        super().__init__(message)
        self.outcomes = dict(outcomes)
        self.calls = calls

    def ids(self, outcome: str) -> tuple[str, ...]:
        return tuple(i for i, o in self.outcomes.items() if o == outcome)

    @property
    def failed(self) -> tuple[str, ...]:
        return self.ids("failed")

    @property
    def skipped(self) -> tuple[str, ...]:
        return self.ids("skipped")

    @property
    def answered(self) -> tuple[str, ...]:
        return self.ids("answered")


class JobCancelled(JobFailed):
    """``arun(cancel=event)`` stopped scheduling: ids never sent are ``cancelled``; ids
    whose request was already sent are ``sent`` (never reported as rolled back)."""

    @property
    def cancelled(self) -> tuple[str, ...]:
        return self.ids("cancelled")

    @property
    def sent(self) -> tuple[str, ...]:
        return self.ids("sent")
