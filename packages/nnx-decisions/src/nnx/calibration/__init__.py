"""Fitted temperature calibration (spec §18): ``softmax(logits / T)`` with T fitted on a
calibration split, bound to one model and label order, reported on the test split.

:func:`fit_temperature` returns a :class:`CalibrationFit` (ok with a
:class:`TemperatureCalibrator`, or failed with its reason); the calibrator's
``transform`` gives a :class:`CalibratedPrediction` (raw and calibrated views apart) and
``report`` a :class:`CalibrationReport` (NLL, Brier, ECE and reliability bins before and
after, and the outcome). Calibrators and reports are ``nnx.calibration/1`` JSON. The
metrics: :func:`negative_log_likelihood`, :func:`brier_score`, :func:`reliability_bins`
and :func:`expected_calibration_error`. NumPy and nnx-core only; this package imports
none of its consumers. Not the sampling temperature of nnx-lm's ``generate``.
"""

from nnx.calibration.binding import OVERRIDES
from nnx.calibration.calibrator import CalibratedPrediction, TemperatureCalibrator
from nnx.calibration.errors import CalibrationError, CalibrationFitError, CalibrationMismatchError
from nnx.calibration.fit import FAILURE_REASONS, CalibrationFit, fit_temperature
from nnx.calibration.metrics import (
    ReliabilityBin,
    brier_score,
    expected_calibration_error,
    negative_log_likelihood,
    reliability_bins,
)
from nnx.calibration.report import OUTCOMES, CalibrationMetrics, CalibrationReport

# The model id that changes whenever the weights do (spec §18); nnx-core owns it, so a
# run bundle recomputes it from its payload bytes (§22).
from nnx.extend import model_fingerprint

__all__ = [
    "FAILURE_REASONS",
    "OUTCOMES",
    "OVERRIDES",
    "CalibratedPrediction",
    "CalibrationError",
    "CalibrationFit",
    "CalibrationFitError",
    "CalibrationMetrics",
    "CalibrationMismatchError",
    "CalibrationReport",
    "ReliabilityBin",
    "TemperatureCalibrator",
    "brier_score",
    "expected_calibration_error",
    "fit_temperature",
    "model_fingerprint",
    "negative_log_likelihood",
    "reliability_bins",
]

# A tool over predictions (docs/extending.md, "Add-on skeletons"): errors, document,
# inputs, the verb module fit and report; nnx-core's conformance kit checks the layout.
__nnx_skeleton__ = {"kind": "tool", "verb": "fit"}
