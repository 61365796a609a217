"""Threshold selection and the risk-coverage curve (spec §19).

Both evaluate every candidate threshold on one split: its accepted and incorrect counts,
coverage and selective risk. The default candidates are every distinct score; beyond
MAX_DEFAULT_CANDIDATES distinct scores, that many evenly spaced order statistics of the
scores (coverage steps of about 0.1%). select_threshold runs on a named validation
split, never the test split, and takes exactly one criterion: ``risk_ceiling=`` picks
the highest coverage whose risk is at or below the ceiling, ``min_coverage=`` the lowest
risk among the candidates keeping at least that coverage. Either is empirical: it held
on that split, nowhere else is it promised.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from nnx.abstention.errors import AbstentionError
from nnx.abstention.inputs import Schema, rows_of, schema_of, scores_of
from nnx.abstention.policy import AbstentionPolicy, check_kind
from nnx.calibration.inputs import Labels, as_targets

__all__ = ["MAX_DEFAULT_CANDIDATES", "CandidatePoint", "RiskCoverageCurve",
           "ThresholdSelection", "risk_coverage_curve", "select_threshold"]

MAX_DEFAULT_CANDIDATES = 1001


@dataclass(frozen=True)
class CandidatePoint:
    """One threshold's counts on the split (``threshold`` is None only at the curve's
    accept-none endpoint, which no policy can hold)."""

    threshold: float | None
    accepted: int
    incorrect: int
    coverage: float
    risk: float | None


@dataclass(frozen=True)
class ThresholdSelection:
    """Every candidate's counts, and the chosen policy (``ok``) or ``no_feasible_policy``.
    The schema it was tuned on is recorded even when nothing is feasible; exactly one of
    ``risk_ceiling`` / ``min_coverage`` is set, the criterion it was chosen by."""

    status: str
    policy: AbstentionPolicy | None
    kind: str
    risk_ceiling: float | None
    split_id: str
    test_split_id: str
    labels: Labels
    model_id: str
    input_field: str
    calibrator_id: str | None
    total: int
    candidates: tuple[CandidatePoint, ...]
    calibration_override: Mapping[str, Any] | None = None
    min_coverage: float | None = None

    def require(self) -> AbstentionPolicy:
        if self.policy is None:
            keeps = (f"the risk at or below {self.risk_ceiling}" if self.min_coverage is None
                     else f"a coverage of at least {self.min_coverage} with a row accepted")
            raise AbstentionError(f"no candidate threshold keeps {keeps} on split "
                                  f"{self.split_id!r}")
        return self.policy


@dataclass(frozen=True)
class RiskCoverageCurve:
    """Candidates in ascending threshold order, then the accept-none endpoint."""

    kind: str
    labels: Labels
    model_id: str
    input_field: str
    calibrator_id: str | None
    total: int
    points: tuple[CandidatePoint, ...]

    @property
    def endpoint(self) -> CandidatePoint:
        return self.points[-1]


def _unit(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            math.isfinite(value) and 0.0 <= float(value) <= 1.0):
        raise AbstentionError(f"{name} must be a real in [0, 1]; got {value!r}")
    return float(value)


def _explicit(candidates: Any) -> npt.NDArray[np.float64] | None:
    if candidates is None:
        return None
    values = np.asarray(candidates, dtype=np.float64).reshape(-1)
    if values.size == 0 or not np.isfinite(values).all() or (values < 0).any() or (
            values > 1).any():
        raise AbstentionError("candidates= must be a non-empty set of reals in [0, 1]")
    return np.unique(values)


def default_candidates(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Every distinct score, or MAX_DEFAULT_CANDIDATES evenly spaced order statistics."""
    distinct = np.unique(scores)
    if distinct.size <= MAX_DEFAULT_CANDIDATES:
        return distinct
    ordered = np.sort(scores)
    at = np.round(np.linspace(0, ordered.size - 1, MAX_DEFAULT_CANDIDATES)).astype(np.intp)
    return np.unique(ordered[at])


def _points(scores: npt.NDArray[np.float64], wrong: npt.NDArray[np.bool_],
            thresholds: npt.NDArray[np.float64]) -> tuple[CandidatePoint, ...]:
    order = np.argsort(scores, kind="stable")
    ascending = scores[order]
    # wrong_from[i]: incorrect rows among those with the i-th smallest score and above.
    wrong_from = np.concatenate([np.cumsum(wrong[order][::-1])[::-1], [0]])
    total = scores.size
    points = []
    for c in thresholds.tolist():
        first = int(np.searchsorted(ascending, c, side="left"))  # score >= c from here
        accepted, incorrect = total - first, int(wrong_from[first])
        points.append(CandidatePoint(c, accepted, incorrect, accepted / total,
                                     incorrect / accepted if accepted else None))
    return tuple(points)


def _read(data: Any, targets: Any, kind: str, labels: Any, model_id: Any,
          input_field: Any, sample_ids: Any) -> tuple[Schema, Any, Any]:
    schema = schema_of(data, labels=labels, model_id=model_id, input_field=input_field)
    rows = rows_of(data, schema, sample_ids)
    t = as_targets(targets, rows.predicted.size, len(schema.labels), AbstentionError)
    return schema, scores_of(kind, rows.probabilities), rows.predicted != t


def _choose(points: tuple[CandidatePoint, ...], ceiling: float | None,
            min_coverage: float | None) -> CandidatePoint | None:
    """The chosen candidate, or None when none is feasible.

    ``risk_ceiling``: the highest coverage whose risk is at or below the ceiling; among
    equal coverages, the lowest threshold. ``min_coverage``: among the candidates whose
    reported coverage is at least ``min_coverage`` and that accept a row (a risk exists),
    the lowest risk, compared exactly as incorrect / accepted fractions; among equal
    risks the highest coverage (more rows answered at the same risk), then the lowest
    threshold.
    """
    if min_coverage is None:
        assert ceiling is not None  # select_threshold passes exactly one criterion
        feasible = [p for p in points if p.risk is not None and p.risk <= ceiling]
        return max(feasible, key=lambda p: p.coverage, default=None)  # ties: lowest threshold
    kept = [p for p in points if p.accepted and p.coverage >= min_coverage]
    # min keeps the first of equal keys, and points ascend by threshold.
    return min(kept, key=lambda p: (Fraction(p.incorrect, p.accepted), -p.accepted),
               default=None)


def select_threshold(data: Any, targets: Any, *, kind: str,
                     risk_ceiling: float | None = None, min_coverage: float | None = None,
                     split_id: str, test_split_id: str,
                     labels: Any = None, model_id: str | None = None,
                     input_field: str | None = None, candidates: Any = None,
                     sample_ids: Any = None) -> ThresholdSelection:
    """Tune a threshold on validation split ``split_id`` (never ``test_split_id``) by
    exactly one criterion, ``risk_ceiling=`` or ``min_coverage=`` (see :func:`_choose`)."""
    for name, value in (("split_id", split_id), ("test_split_id", test_split_id)):
        if not isinstance(value, str) or not value:
            raise AbstentionError(f"{name} must be a non-empty split id; got {value!r}")
    if split_id == test_split_id:
        raise AbstentionError(f"split_id {split_id!r} is the test split: tune on a "
                              "validation split and keep the test split for the report")
    kind = check_kind(kind)
    if (risk_ceiling is None) == (min_coverage is None):
        raise AbstentionError("select_threshold needs exactly one criterion: risk_ceiling= "
                              "(the highest coverage at or below it) or min_coverage= (the "
                              "lowest risk keeping at least it)")
    ceiling = None if risk_ceiling is None else _unit("risk_ceiling", risk_ceiling)
    coverage = None if min_coverage is None else _unit("min_coverage", min_coverage)
    explicit = _explicit(candidates)
    schema, scores, wrong = _read(data, targets, kind, labels, model_id, input_field,
                                        sample_ids)
    points = _points(scores, wrong, default_candidates(scores) if explicit is None
                     else explicit)
    best = _choose(points, ceiling, coverage)
    policy = None
    if best is not None:
        assert best.threshold is not None
        policy = AbstentionPolicy(kind, best.threshold, schema.labels, schema.model_id,
                                  tuning_split_id=split_id, input_field=schema.input_field,
                                  calibrator_id=schema.calibrator_id)
    return ThresholdSelection(
        status="ok" if policy else "no_feasible_policy", policy=policy, kind=kind,
        risk_ceiling=ceiling, split_id=split_id, test_split_id=test_split_id,
        labels=schema.labels, model_id=schema.model_id, input_field=schema.input_field,
        calibrator_id=schema.calibrator_id, total=int(scores.size), candidates=points,
        calibration_override=schema.calibration_override, min_coverage=coverage)


def risk_coverage_curve(data: Any, targets: Any, *, kind: str, labels: Any = None,
                        model_id: str | None = None, input_field: str | None = None,
                        candidates: Any = None, sample_ids: Any = None) -> RiskCoverageCurve:
    """Every candidate in ascending order, then the accept-none endpoint (coverage 0,
    risk None). Coverage never rises as the threshold rises; risk is measured at each
    point, never assumed monotone."""
    kind = check_kind(kind)
    explicit = _explicit(candidates)
    schema, scores, wrong = _read(data, targets, kind, labels, model_id, input_field,
                                     sample_ids)
    points = _points(scores, wrong, default_candidates(scores) if explicit is None
                     else explicit)
    endpoint = CandidatePoint(None, 0, 0, 0.0, None)
    return RiskCoverageCurve(kind, schema.labels, schema.model_id, schema.input_field,
                             schema.calibrator_id, int(scores.size), (*points, endpoint))
