"""The (train, validation, test) proportions of a group or stratified plan.

Each proportion is read as the decimal it is written as (0.15 is 15/100, the
same reading as random_split_indices), so the exact arithmetic of the group
targets and the stratified cuts never depends on binary rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from nnx._foundation.validation import Domain, check_real
from nnx.data_splits._ids import SplitError, checked

__all__ = ["SPLITS", "Proportions", "check_proportions"]

SPLITS = ("train", "val", "test")
#: The sum may miss 1 by float noise (three thirds), never by more.
_SLACK = Fraction(1, 10**9)

Proportions = tuple[Fraction, Fraction, Fraction]


def check_proportions(value: Any) -> tuple[tuple[float | int, ...], Proportions]:
    """The proportions as given (for the manifest) and as exact fractions summing to 1."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 3:
        raise SplitError("proportions must be (train, val, test), three numbers summing to 1; "
                         f"got {value!r}")
    given = tuple(checked(lambda i=i, v=v: check_real(  # type: ignore[misc]
        f"proportions[{i}]", v, Domain(low=0.0, high=1.0))) for i, v in enumerate(value))
    exact = [Fraction(repr(float(p))) if isinstance(p, float) else Fraction(p) for p in given]
    total = sum(exact, Fraction(0))
    if abs(total - 1) > _SLACK:
        raise SplitError(f"proportions must sum to 1; {list(given)!r} sums to {float(total)!r}")
    if exact[0] == 0:
        raise SplitError("proportions[0] (train) must be > 0: the train split is never empty")
    a, b, c = (p / total for p in exact)
    return given, (a, b, c)


def active(proportions: Proportions) -> tuple[int, ...]:
    """The splits a plan fills: train and every split with a positive proportion."""
    return tuple(k for k, p in enumerate(proportions) if p > 0)
