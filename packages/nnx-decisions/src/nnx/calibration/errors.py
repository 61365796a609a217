"""The named errors of nnx.calibration (spec §18)."""

from __future__ import annotations

__all__ = ["CalibrationError", "CalibrationFitError", "CalibrationMismatchError"]


class CalibrationError(ValueError):
    """Refused input: malformed logits / targets / labels, a split used for the wrong
    purpose, or a calibrator / report document that does not load."""


class CalibrationFitError(CalibrationError):
    """``CalibrationFit.require()`` on a fit that failed; the message is the reason."""


class CalibrationMismatchError(CalibrationError):
    """Declared labels or model id differ from the fitted ones and no named override
    accepts the difference (a different class count is never accepted)."""
