"""fit_temperature: the NLL-minimizing temperature of a calibration split (spec §18).

NLL(beta) = mean(logsumexp(beta * z) - beta * z[target]) with beta = 1 / T is convex:
its slope mean(E_p[z] - z[target]) (p = softmax(beta z)) rises with beta, and its
curvature is the mean variance of z under p. The fit finds the slope's zero in float64
on a copy of the logits, inside [1 / max_temperature, 1 / min_temperature], by Newton
steps on the slope kept inside a shrinking bracket: a step that would leave the bracket
or not halve the last move is a bisection instead (so the search is never worse than
bisecting, and near the optimum converges quadratically: a handful of passes over the
logits instead of ~50). Each pass reuses two preallocated float64 buffers. When the
slope has no zero there (a separable split, constant logits, logits no better than
uniform) or the search does not converge, the fit fails with its reason: never a NaN or
a boundary temperature.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import nnx
from nnx.calibration.calibrator import TemperatureCalibrator
from nnx.calibration.errors import CalibrationError, CalibrationFitError
from nnx.calibration.inputs import Labels, as_labels, as_matrix, as_targets, reconcile_labels
from nnx.extend import POSITIVE, check_count, check_real

__all__ = ["FAILURE_REASONS", "CalibrationFit", "fit_temperature"]

#: Why a fit can fail; each comes with a message saying what it means for the split.
FAILURE_REASONS = ("constant_logits", "separable", "below_min_temperature",
                   "no_better_than_uniform", "above_max_temperature", "not_converged")


@dataclass(frozen=True)
class CalibrationFit:
    """A fit's outcome: ``ok`` with its calibrator, or ``failed`` with the reason."""

    status: str
    calibrator: TemperatureCalibrator | None
    reason: str | None
    message: str
    iterations: int

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def temperature(self) -> float | None:
        return None if self.calibrator is None else self.calibrator.temperature

    def require(self) -> TemperatureCalibrator:
        """The calibrator; a failed fit raises CalibrationFitError with its reason."""
        if self.calibrator is None:
            raise CalibrationFitError(f"temperature fit failed ({self.reason}): {self.message}")
        return self.calibrator


def _log_softmax_nll(z: npt.NDArray[np.float64], t: npt.NDArray[np.int64],
                     beta: float) -> float:
    """Exact mean NLL of softmax(beta * z), via a stable log-sum-exp."""
    s = beta * z
    top = s.max(axis=1)
    lse = top + np.log(np.exp(s - top[:, None]).sum(axis=1))
    return float(np.mean(lse - s[np.arange(t.size), t]))


class _SlopeProbe:
    """The NLL's slope and curvature in beta over one split, computed in two reusable
    float64 buffers. Each row is shifted by its maximum once (softmax, the slope and the
    curvature do not change under a per-row shift), so beta * z is never positive and
    its exponential needs no per-pass max."""

    def __init__(self, z: npt.NDArray[np.float64], t: npt.NDArray[np.int64]) -> None:
        self.z = z - z.max(axis=1, keepdims=True)
        self.zt = self.z[np.arange(t.size), t]
        self.p = np.empty_like(self.z)
        self.pz = np.empty_like(self.z)

    def __call__(self, beta: float) -> tuple[float, float]:
        """(d NLL / d beta, d2 NLL / d beta2) at ``beta``."""
        p, pz, z = self.p, self.pz, self.z
        np.multiply(z, beta, out=p)
        np.exp(p, out=p)  # unnormalized softmax; every row has an entry of 1
        norm = p.sum(axis=1)
        np.multiply(p, z, out=pz)
        mean_z = pz.sum(axis=1) / norm
        mean_z2 = np.einsum("ij,ij->i", pz, z) / norm
        slope = float(np.mean(mean_z - self.zt))
        curvature = float(np.mean(np.maximum(mean_z2 - mean_z * mean_z, 0.0)))
        return slope, curvature


def _check_splits(split_id: Any, train_split_id: Any, test_split_id: Any) -> None:
    for name, value in (("split_id", split_id), ("train_split_id", train_split_id),
                        ("test_split_id", test_split_id)):
        if not isinstance(value, str) or not value:
            raise CalibrationError(f"{name} must be a non-empty split id; got {value!r}")
    if split_id == train_split_id:
        raise CalibrationError(f"split_id {split_id!r} is the training split, which the "
                               "model already fits; calibrate on a split of its own")
    if split_id == test_split_id:
        raise CalibrationError(f"split_id {split_id!r} is the test split; the report needs "
                               "that one untouched")


def fit_temperature(logits: Any, targets: Any, labels: Any = None, *, split_id: str,
                    train_split_id: str, test_split_id: str, model_id: str,
                    min_temperature: float = 1e-3, max_temperature: float = 1e3,
                    tolerance: float = 1e-12, max_iterations: int = 200) -> CalibrationFit:
    """Fit T > 0 minimizing the NLL of softmax(logits / T) on the calibration split.

    ``logits``: ``(N, C)`` (C >= 2) array, tensor or categorical PredictionResult (whose
    spec may supply the labels); ``targets``: class indices; ``labels``: one per class.
    Refusals (CalibrationError) come before any logit is read.
    """
    _check_splits(split_id, train_split_id, test_split_id)
    if not isinstance(model_id, str) or not model_id:
        raise CalibrationError(f"model_id= must be a non-empty string; got {model_id!r}")
    try:  # nnx-core's one validator; its ValueError becomes this module's named error
        lo_t = float(check_real("min_temperature", min_temperature, POSITIVE))
        hi_t = float(check_real("max_temperature", max_temperature, POSITIVE))
        tol = float(check_real("tolerance", tolerance, POSITIVE))
        max_iterations = check_count("max_iterations", max_iterations, minimum=1)
    except ValueError as exc:
        raise CalibrationError(str(exc)) from None
    if not lo_t < hi_t:
        raise CalibrationError(f"min_temperature {lo_t} must be below max_temperature {hi_t}")
    raw = logits
    if isinstance(logits, nnx.PredictionResult):
        labels, raw = reconcile_labels(logits, labels, CalibrationError), logits.logits
    declared: Labels = as_labels(labels, CalibrationError)

    z = as_matrix(raw, "logits", CalibrationError)
    if z.shape[1] != len(declared):
        raise CalibrationError(f"logits have {z.shape[1]} classes; labels name {len(declared)}")
    if z.shape[0] == 0:
        raise CalibrationError("a calibration split needs at least one row")
    t = as_targets(targets, z.shape[0], z.shape[1], CalibrationError)
    config = {"min_temperature": lo_t, "max_temperature": hi_t, "tolerance": tol,
              "max_iterations": max_iterations}
    split = {"calibration": split_id, "train": train_split_id, "test": test_split_id}

    def failed(reason: str, message: str, iterations: int = 0) -> CalibrationFit:
        return CalibrationFit("failed", None, reason, message, iterations)

    if (z.max(axis=1) == z.min(axis=1)).all():
        return failed("constant_logits", "every row's logits are constant: softmax(z / T) "
                      "is uniform for every T, so no temperature is better than another")
    zt = z[np.arange(t.size), t]
    probe = _SlopeProbe(z, t)
    beta_lo, beta_hi = 1.0 / hi_t, 1.0 / lo_t
    if probe(beta_hi)[0] <= 0.0:
        others = z.copy()
        others[np.arange(t.size), t] = -np.inf
        if (zt > others.max(axis=1)).all():
            return failed("separable", "the split is separable (every target is its row's "
                          "unique maximum): the NLL keeps falling as T -> 0, so there is no "
                          "interior optimum")
        return failed("below_min_temperature", f"the NLL still falls at T = {lo_t}: its "
                      "minimum lies below min_temperature")
    if probe(beta_lo)[0] >= 0.0:
        if probe(0.0)[0] >= 0.0:
            return failed("no_better_than_uniform", "the logits are no better than uniform "
                          "on this split: the NLL falls all the way to T -> infinity")
        return failed("above_max_temperature", f"the NLL still falls at T = {hi_t}: its "
                      "minimum lies above max_temperature")
    # T = 1 (the logits as they are) is where a trained classifier's optimum usually is.
    beta = min(max(1.0, beta_lo), beta_hi)
    if not beta_lo < beta < beta_hi:
        beta = 0.5 * (beta_lo + beta_hi)
    last_move = beta_hi - beta_lo
    for iteration in range(1, max_iterations + 1):
        slope, curvature = probe(beta)
        if not np.isfinite(slope):
            return failed("not_converged", f"the NLL slope is not finite at T = {1 / beta}",
                          iteration)
        if slope == 0.0:  # the exact optimum, met on the way
            return _fitted(z, t, beta, iteration, declared, model_id, split, config)
        if slope < 0.0:
            beta_lo = beta
        else:
            beta_hi = beta
        step = slope / curvature if curvature > 0.0 else np.inf
        if abs(step) <= tol * beta:  # Newton's own correction is below the tolerance
            return _fitted(z, t, beta - step, iteration, declared, model_id, split, config)
        candidate = beta - step
        if not beta_lo < candidate < beta_hi or abs(step) > 0.5 * last_move:
            # Newton would stray: bisect, on the log scale while the bracket spans
            # decades (the default spans twelve), so the right decade comes first.
            candidate = (np.sqrt(beta_lo * beta_hi) if beta_hi > 4.0 * beta_lo
                         else 0.5 * (beta_lo + beta_hi))
        last_move, beta = abs(candidate - beta), candidate
        if last_move <= tol * beta or beta_hi - beta_lo <= tol * beta_hi:
            return _fitted(z, t, beta, iteration, declared, model_id, split, config)
    return failed("not_converged", f"the search did not reach tolerance {tol} in "
                  f"{max_iterations} iterations", max_iterations)


def _fitted(z: npt.NDArray[np.float64], t: npt.NDArray[np.int64], beta: float,
            iterations: int, labels: Labels, model_id: str, split: dict[str, str],
            config: dict[str, Any]) -> CalibrationFit:
    calibrator = TemperatureCalibrator(
        temperature=1.0 / beta, labels=labels, model_id=model_id, split=split,
        config=config,
        fit={"rows": int(z.shape[0]), "iterations": iterations,
             "nll_at_temperature_1": _log_softmax_nll(z, t, 1.0),
             "nll_at_fitted_temperature": _log_softmax_nll(z, t, beta)})
    return CalibrationFit("ok", calibrator, None, f"T = {1.0 / beta!r}", iterations)
