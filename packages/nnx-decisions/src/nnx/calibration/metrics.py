"""The four calibration metrics of spec §18, over categorical ``(N, C)`` probabilities.

NLL and Brier average nnx-core's own per-row terms (``nnx.extend.nll_terms`` /
``brier_terms``), the ones the named ``nll`` / ``brier`` metrics of §6.4 average, so
both report the same number on the same probabilities.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from nnx.calibration.errors import CalibrationError
from nnx.calibration.inputs import as_matrix, as_targets, check_distribution
from nnx.extend import METRIC_EPSILON, brier_terms, check_count, nll_terms

__all__ = [
    "DEFAULT_BINS",
    "DEFAULT_EPSILON",
    "ReliabilityBin",
    "brier_score",
    "expected_calibration_error",
    "negative_log_likelihood",
    "reliability_bins",
]

#: The default NLL floor (spec §18), the named ``nll`` metric's; ``None`` is exact.
DEFAULT_EPSILON = METRIC_EPSILON
DEFAULT_BINS = 15


def _checked(probabilities: Any, targets: Any) -> tuple[npt.NDArray[np.float64],
                                                         npt.NDArray[np.int64]]:
    p = as_matrix(probabilities, "probabilities", CalibrationError)
    check_distribution(p, CalibrationError)
    if p.shape[0] == 0:
        raise CalibrationError("a calibration metric needs at least one row")
    return p, as_targets(targets, p.shape[0], p.shape[1], CalibrationError)


def negative_log_likelihood(probabilities: Any, targets: Any, *,
                            epsilon: float | None = DEFAULT_EPSILON) -> float:
    """Mean ``-log p[target]``; the true-class probability is floored at ``epsilon``
    as the named ``nll`` metric floors it (``None``: exact, so a zero true-class
    probability gives ``+inf``)."""
    p, t = _checked(probabilities, targets)
    if epsilon is not None and not 0.0 < epsilon < 0.5:
        raise CalibrationError(f"epsilon must be in (0, 0.5) or None; got {epsilon!r}")
    return float(np.mean(nll_terms(p, t, epsilon=epsilon)))


def brier_score(probabilities: Any, targets: Any) -> float:
    """Mean over rows of the class-summed squared error against the one-hot target
    (range [0, 2]), the named ``brier`` metric."""
    p, t = _checked(probabilities, targets)
    return float(np.mean(brier_terms(p, t)))


@dataclass(frozen=True)
class ReliabilityBin:
    """One top-1 confidence bin ``[lo, hi)`` (the last closed at 1); an empty bin keeps
    count 0 and no means."""

    lo: float
    hi: float
    count: int
    mean_confidence: float | None
    accuracy: float | None

    def document(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi, "count": self.count,
                "mean_confidence": self.mean_confidence, "accuracy": self.accuracy}


def _bin_index(confidence: npt.NDArray[np.float64], n_bins: int) -> npt.NDArray[np.intp]:
    # Edges i / n (each the correctly rounded quotient); side="right" puts a value on an
    # inner edge in the upper bin, and the clip closes the last bin at exactly 1.
    edges = np.arange(n_bins + 1, dtype=np.float64) / n_bins
    return np.minimum(np.searchsorted(edges, confidence, side="right") - 1, n_bins - 1)


def reliability_bins(probabilities: Any, targets: Any, *,
                     n_bins: int = DEFAULT_BINS) -> tuple[ReliabilityBin, ...]:
    """Equal-width top-1 confidence bins with their accuracy, empty bins kept."""
    n_bins = check_count("n_bins", n_bins, minimum=1)
    p, t = _checked(probabilities, targets)
    return bins_of(p, t, n_bins)


def bins_of(p: npt.NDArray[np.float64], t: npt.NDArray[np.int64],
          n_bins: int) -> tuple[ReliabilityBin, ...]:
    confidence = p.max(axis=1)
    correct = (p.argmax(axis=1) == t).astype(np.float64)
    index = _bin_index(confidence, n_bins)
    bins = []
    for i in range(n_bins):
        inside = index == i
        count = int(inside.sum())
        bins.append(ReliabilityBin(
            lo=i / n_bins, hi=(i + 1) / n_bins, count=count,
            mean_confidence=float(confidence[inside].mean()) if count else None,
            accuracy=float(correct[inside].mean()) if count else None))
    return tuple(bins)


def ece_of(bins: tuple[ReliabilityBin, ...]) -> float:
    """Count-weighted mean |accuracy - confidence| over the non-empty bins."""
    total = sum(b.count for b in bins)
    return float(sum(b.count * abs(b.accuracy - b.mean_confidence) for b in bins
                     if b.accuracy is not None and b.mean_confidence is not None) / total)


def expected_calibration_error(probabilities: Any, targets: Any, *,
                               n_bins: int = DEFAULT_BINS) -> float:
    """ECE over :func:`reliability_bins`: sum of count / N * |accuracy - confidence|."""
    return ece_of(reliability_bins(probabilities, targets, n_bins=n_bins))
