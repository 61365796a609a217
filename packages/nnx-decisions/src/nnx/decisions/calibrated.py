"""A FixedHeadProvider's fitted temperature (spec §17, §18): calibrated typed answers.

:func:`bind` checks a :class:`~nnx.calibration.TemperatureCalibrator` against the
provider's model and head labels when the provider is built, so a calibrator bound to
another model is refused before anything is served. The model id is the model's weight
fingerprint (``model_fingerprint(model)``) unless the caller declares one
(``f"{run.id}:BEST"``); a declared id that is a fingerprint must be this model's, since
a fingerprint is a claim about the weights that can be checked. The comparison is the
calibrator's own (``check_identity``): another model, label order or label names raise
``CalibrationMismatchError`` unless a named override accepts it, a different class
count never.

Serving goes through ``TemperatureCalibrator.transform`` (the one ``softmax(z / T)``),
and every answer records how it was calibrated (:attr:`HeadCalibration.record`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import nnx
from nnx.calibration import CalibrationFit, TemperatureCalibrator
from nnx.calibration.binding import check_identity, overrides
from nnx.decisions.errors import InvalidDecisionRequest
from nnx.extend import frozen_mapping, model_fingerprint

__all__ = ["CALIBRATED_FIELD", "HeadCalibration", "bind"]

#: The probability field a calibrated answer holds (nnx.abstention's name for it).
CALIBRATED_FIELD = "calibrated_probabilities"
#: How a weight fingerprint model id starts (``model_fingerprint``'s ``sha256:<hex>``).
_FINGERPRINT = "sha256:"


@dataclass(frozen=True)
class HeadCalibration:
    """A calibrator checked against one provider's model id and head labels."""

    calibrator: TemperatureCalibrator
    labels: tuple[str, ...]
    model_id: str
    override: tuple[str, ...] | None
    #: What each calibrated answer records as its ``calibration``.
    record: Mapping[str, Any]

    def probabilities(self, logits: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """``softmax(logits / T)`` per row, through the calibrator's own transform (its
        identity check repeats there: declarations only, no cost worth avoiding)."""
        served = self.calibrator.transform(logits, labels=self.labels, model_id=self.model_id,
                                           override=self.override)
        return served.calibrated_probabilities


def _model_id(model: nnx.NNModel, declared: Any) -> str:
    if declared is None:
        return model_fingerprint(model)
    if not isinstance(declared, str) or not declared:
        raise InvalidDecisionRequest(f"model_id= must be a non-empty string; got {declared!r}")
    if declared.startswith(_FINGERPRINT) and declared != model_fingerprint(model):
        raise InvalidDecisionRequest(f"model_id={declared!r} is a weight fingerprint, but not "
                                     "this model's (model_fingerprint(model))")
    return declared


def bind(calibrator: Any, model: nnx.NNModel, labels: tuple[str, ...], *, model_id: Any,
         override: str | Iterable[str] | None) -> HeadCalibration:
    """``calibrator`` checked against ``model`` and the head's ``labels``, before any
    forward pass (module docstring for the rules)."""
    if isinstance(calibrator, CalibrationFit):
        raise InvalidDecisionRequest("calibrator= takes the fitted TemperatureCalibrator; "
                                     "this is a CalibrationFit (call .require())")
    if not isinstance(calibrator, TemperatureCalibrator):
        raise InvalidDecisionRequest(f"calibrator= takes a fitted TemperatureCalibrator; got "
                                     f"{type(calibrator).__name__}")
    declared = _model_id(model, model_id)
    names = overrides(override) or None  # validated once; transform re-reads the names
    accepted = check_identity(calibrator.labels, calibrator.model_id, labels, declared,
                              names)
    record = frozen_mapping({
        "field": CALIBRATED_FIELD, "calibrator_id": calibrator.calibrator_id,
        "temperature": calibrator.temperature, "model_id": declared,
        "calibrator_model_id": calibrator.model_id, "override": accepted})
    return HeadCalibration(calibrator, labels, declared, names, record)
