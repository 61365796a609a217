"""validate_response (spec §17): the one validator every provider's answer goes through.

Keyed output (a mapping id -> probability, or ``(id, probability)`` pairs, which can
show a duplicate) is reordered into the question's order. A missing, duplicate,
unknown or unlabeled id, and a distribution that is non-finite, negative or does
not sum to 1 within :data:`SUM_TOLERANCE`, raise InvalidDecisionResponse: nothing
is renormalized, clipped or filled in. The tolerance is nnx.teacher-record/1's, so
every validated Choice / Score answer can become a teacher record (§10.1).

:func:`check_rows` is the same validator over a batch of answers to one question
(``FixedHeadProvider.decide``): a tensor-wide test passes every row the row-by-row
check surely passes, and every other row goes through :func:`validate_response`
itself, in row order, so a batch is refused exactly as its first refused row would be.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from nnx.decisions.errors import InvalidDecisionResponse
from nnx.decisions.questions import Boolean, Choice, Score
from nnx.decisions.results import BooleanResult, ChoiceResult, DecisionResult, ScoreResult

__all__ = ["SUM_TOLERANCE", "check_rows", "validate_response"]

#: |sum(p) - 1| allowed for a Choice / Score distribution (a float64 sum).
SUM_TOLERANCE = 1e-6


def _probability(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidDecisionResponse(f"{where}: probability {value!r:.40} is not a number")
    p = float(value)
    if not math.isfinite(p):
        raise InvalidDecisionResponse(f"{where}: probability {p} is not finite")
    if p < 0.0 or p > 1.0:
        raise InvalidDecisionResponse(f"{where}: probability {p} is outside [0, 1]")
    return p


def _pairs(output: Any) -> list[tuple[Any, Any]]:
    if isinstance(output, Mapping):
        return list(output.items())
    if isinstance(output, (str, bytes)) or not hasattr(output, "__iter__"):
        raise InvalidDecisionResponse(f"the answer must be keyed by option id (a mapping or "
                                      f"(id, probability) pairs); got {type(output).__name__}")
    pairs = []
    for item in output:
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise InvalidDecisionResponse(
                "unlabeled answer: every probability needs its option id (a bare "
                f"list of numbers is positional, refused); got {item!r:.40}")
        pairs.append((item[0], item[1]))
    return pairs


def _distribution(question: Choice | Score, output: Any) -> tuple[float, ...]:
    pairs = _pairs(output)
    ids = question.ids
    seen: dict[str, float] = {}
    for key, value in pairs:
        if not isinstance(key, str) or not key:
            raise InvalidDecisionResponse(f"unlabeled answer entry: id {key!r:.40} is not an "
                                          "option id")
        if key in seen:
            raise InvalidDecisionResponse(f"duplicate id {key!r} in the answer")
        seen[key] = _probability(f"id {key!r}", value)
    unknown = [k for k in seen if k not in ids]
    missing = [i for i in ids if i not in seen]
    if unknown or missing:
        raise InvalidDecisionResponse(f"the answer's ids differ from the question's "
                                      f"{list(ids)}: missing {missing}, unknown {unknown}")
    probabilities = tuple(seen[i] for i in ids)
    total = math.fsum(probabilities)
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise InvalidDecisionResponse(f"the probabilities sum to {total!r}, not 1 within "
                                      f"{SUM_TOLERANCE} (refused, never renormalized)")
    return probabilities


def _p_true(output: Any) -> float:
    if isinstance(output, Mapping):
        if set(output) != {"p_true"}:
            raise InvalidDecisionResponse(f"a Boolean answer holds exactly p_true; got keys "
                                          f"{sorted(map(str, output))}")
        output = output["p_true"]
    return _probability("p_true", output)


def validate_response(question: Choice | Boolean | Score, output: Any, *, provider: str,
                      raw: Any = None, confidence: float | None = None,
                      vendor_score: float | None = None,
                      calibration: Mapping[str, Any] | None = None) -> DecisionResult:
    """The typed result of ``output`` for ``question`` (module docstring for the rules).

    ``raw`` is kept unchanged on the result; ``confidence`` (a provider's own, in
    [0, 1]) and ``vendor_score`` (a Score provider's own score) are kept apart from
    the distribution; ``calibration`` records how a Choice / Score distribution was
    calibrated (``ChoiceResult.calibration``).
    """
    if confidence is not None:
        confidence = _probability("confidence", confidence)
    if vendor_score is not None:
        if not isinstance(question, Score):
            raise InvalidDecisionResponse("vendor_score belongs to a Score answer")
        if isinstance(vendor_score, bool) or not isinstance(vendor_score, numbers.Real) or \
                not math.isfinite(float(vendor_score)):
            raise InvalidDecisionResponse(f"vendor_score must be a finite number; got "
                                          f"{vendor_score!r:.40}")
        vendor_score = float(vendor_score)
    if calibration is not None and (isinstance(question, Boolean) or
                                    not isinstance(calibration, Mapping)):
        raise InvalidDecisionResponse("calibration records a Choice / Score answer's "
                                      "calibrated distribution as a mapping")
    if isinstance(question, Choice):
        return ChoiceResult(question, _distribution(question, output), provider, raw,
                            confidence, calibration)
    if isinstance(question, Score):
        return ScoreResult(question, _distribution(question, output), provider, raw,
                           confidence, vendor_score, calibration)
    if isinstance(question, Boolean):
        return BooleanResult(question, _p_true(output), provider, raw, confidence)
    raise TypeError(f"validate_response needs a Choice, Boolean or Score; got "
                    f"{type(question).__name__}")


def check_rows(question: Choice | Boolean | Score, values: npt.NDArray[np.float64],
               output: Callable[[int], Any], *, provider: str,
               calibration: Mapping[str, Any] | None = None) -> None:
    """Refuse a batch of answers to ``question`` as :func:`validate_response` refuses
    the first refused row (module docstring); return None when every row is valid.

    ``values`` are the rows' probabilities: ``(N, k)`` distributions in the question's
    order for a Choice / Score, ``(N,)`` ``p_true`` for a Boolean. ``output(n)`` is row
    ``n``'s answer as ``validate_response`` takes it, for the rows checked one by one:
    the first (so every question-wide refusal is the row-by-row one) and any row the
    tensor-wide test cannot pass.
    """
    count = values.shape[0]
    if count == 0:
        return
    if isinstance(question, Boolean):
        sure = (values >= 0.0) & (values <= 1.0)  # NaN fails both
    else:
        # NumPy's row sum and math.fsum differ by under (k + 1) ulps of 1 on a row of
        # [0, 1] values near 1: a row farther than that from the tolerance is decided
        # alike by both; a row within it is left to fsum (validate_response).
        slack = 2.0 * (values.shape[1] + 1) * float(np.finfo(np.float64).eps)
        sure = ((values >= 0.0).all(axis=1) & (values <= 1.0).all(axis=1)
                & (np.abs(values.sum(axis=1) - 1.0) <= SUM_TOLERANCE - slack))
    sure[0] = False
    for n in np.flatnonzero(~sure).tolist():
        validate_response(question, output(n), provider=provider, calibration=calibration)
