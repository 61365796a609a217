"""Typed answers (spec §17): ChoiceResult, BooleanResult, ScoreResult.

Each holds its question, the validated float64 probabilities in the question's
order, the provider's raw output untouched (``raw``), the provider's name and, when
the provider reports one, its own ``confidence``: a provider's statement about
itself, never a probability of being correct. A provider that served calibrated
probabilities (FixedHeadProvider with a fitted temperature, spec §18) records how on
``calibration``: the field, the calibrator's id and temperature, the model id it was
checked against and any accepted override; it is None for raw probabilities. Build
them through :func:`nnx.decisions.validate_response`, the one validator every provider
shares.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nnx.decisions.questions import Boolean, Choice, Score

__all__ = ["BooleanResult", "ChoiceResult", "DecisionResult", "ScoreResult"]


def _top(ids: tuple[str, ...], probabilities: tuple[float, ...]) -> str:
    # The first id of maximal probability: ties go to the question's order.
    return ids[max(range(len(ids)), key=lambda i: (probabilities[i], -i))]


@dataclass(frozen=True)
class ChoiceResult:
    """A distribution over a Choice's option ids, in the question's order."""

    question: Choice
    probabilities: tuple[float, ...]
    provider: str
    raw: Any = None
    confidence: float | None = None
    #: How the probabilities were calibrated (module docstring), or None for raw ones.
    calibration: Mapping[str, Any] | None = None

    @property
    def ids(self) -> tuple[str, ...]:
        return self.question.ids

    @property
    def choice(self) -> str:
        """The option id of maximal probability (the first, on a tie)."""
        return _top(self.ids, self.probabilities)

    @property
    def distribution(self) -> dict[str, float]:
        return dict(zip(self.ids, self.probabilities, strict=True))

    def probability(self, option_id: str) -> float:
        return self.distribution[option_id]


@dataclass(frozen=True)
class ScoreResult:
    """A distribution over a Score's ordered levels; ``vendor_score`` is a provider's
    own score (Jev's expected score), kept apart from :attr:`expected_index`."""

    question: Score
    probabilities: tuple[float, ...]
    provider: str
    raw: Any = None
    confidence: float | None = None
    vendor_score: float | None = None
    #: How the probabilities were calibrated (module docstring), or None for raw ones.
    calibration: Mapping[str, Any] | None = None

    @property
    def ids(self) -> tuple[str, ...]:
        return self.question.ids

    @property
    def expected_index(self) -> float:
        """``sum(i * p_i)`` over the levels, lowest level 0: an ordinal position."""
        return float(sum(i * p for i, p in enumerate(self.probabilities)))

    @property
    def level(self) -> str:
        """The level id of maximal probability (the lower one, on a tie)."""
        return _top(self.ids, self.probabilities)

    @property
    def distribution(self) -> dict[str, float]:
        return dict(zip(self.ids, self.probabilities, strict=True))


@dataclass(frozen=True)
class BooleanResult:
    """``p_true`` of a Boolean question (``p_false`` is its complement)."""

    question: Boolean
    p_true: float
    provider: str
    raw: Any = None
    confidence: float | None = None
    #: Always None today: temperature scaling calibrates categorical heads only (§18).
    calibration: Mapping[str, Any] | None = None

    @property
    def p_false(self) -> float:
        return 1.0 - self.p_true


DecisionResult = ChoiceResult | BooleanResult | ScoreResult
