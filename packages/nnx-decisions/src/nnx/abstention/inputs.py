"""What a policy reads: float64 probabilities, the predicted classes and the schema.

A :class:`~nnx.calibration.CalibratedPrediction` (its ``input_field`` picks the raw or
calibrated view), a categorical ``nnx.PredictionResult``, or arrays with ``labels=`` /
``model_id=``. :func:`schema_of` reads declarations only, so a schema refusal comes
before any probability is read; :func:`rows_of` reads the values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import nnx
from nnx.abstention.errors import AbstentionError, AbstentionSchemaError
from nnx.calibration import CalibratedPrediction
from nnx.calibration.inputs import (
    Labels,
    as_labels,
    as_matrix,
    as_sample_ids,
    check_distribution,
    reconcile_labels,
)

__all__ = ["FIELDS", "Rows", "Schema", "check_against", "rows_of", "schema_of", "scores_of"]

#: The probability field a policy reads.
FIELDS = ("probabilities", "calibrated_probabilities")


@dataclass(frozen=True)
class Schema:
    """Where the probabilities come from: labels, model id, field, calibrator id and the
    calibration override that travels with them."""

    labels: Labels
    model_id: str
    input_field: str
    calibrator_id: str | None
    calibration_override: Any = None


@dataclass(frozen=True)
class Rows:
    probabilities: npt.NDArray[np.float64]
    predicted: npt.NDArray[np.int64]
    sample_ids: npt.NDArray[np.int64]


def _model(model_id: Any) -> str:
    if not isinstance(model_id, str) or not model_id:
        raise AbstentionSchemaError(f"model_id= must be a non-empty string; got {model_id!r}")
    return model_id


def schema_of(data: Any, *, labels: Any, model_id: Any, input_field: str | None) -> Schema:
    """The declared schema; ``input_field`` is required for a CalibratedPrediction and
    must be ``"probabilities"`` (or None) for anything else."""
    if isinstance(data, CalibratedPrediction):
        if input_field is None:
            raise AbstentionError("a CalibratedPrediction needs input_field= "
                                  f"(one of {list(FIELDS)}) to say which view to read")
        if input_field not in FIELDS:
            raise AbstentionSchemaError(f"input_field must be one of {list(FIELDS)}; "
                                        f"got {input_field!r}")
        if labels is not None and tuple(labels) != data.labels:
            raise AbstentionSchemaError(f"labels={list(labels)} differ from the "
                                        f"prediction's {list(data.labels)}")
        if model_id is not None and model_id != data.model_id:
            raise AbstentionSchemaError(f"model_id={model_id!r} differs from the "
                                        f"prediction's {data.model_id!r}")
        calibrator = data.calibrator_id if input_field == FIELDS[1] else None
        return Schema(data.labels, data.model_id, input_field, calibrator,
                      None if data.override is None else dict(data.override))
    if input_field not in (None, FIELDS[0]):
        raise AbstentionSchemaError(f"input_field={input_field!r} needs a "
                                    "CalibratedPrediction; this input has raw probabilities")
    if isinstance(data, nnx.PredictionResult):
        labels = reconcile_labels(data, labels, AbstentionSchemaError)
    return Schema(as_labels(labels, AbstentionSchemaError), _model(model_id), FIELDS[0], None)


def check_against(schema: Schema, expected: Schema) -> None:
    """AbstentionSchemaError naming every difference from the policy's schema."""
    diffs = [f"{name}: policy {a!r}, input {b!r}" for name, a, b in (
        ("labels", expected.labels, schema.labels), ("model_id", expected.model_id,
                                                     schema.model_id),
        ("input_field", expected.input_field, schema.input_field),
        ("calibrator_id", expected.calibrator_id, schema.calibrator_id)) if a != b]
    if diffs:
        raise AbstentionSchemaError("the input's schema differs from the policy's: "
                                    + "; ".join(diffs))


def rows_of(data: Any, schema: Schema, sample_ids: Any) -> Rows:
    """Read the values: the float64 distribution, the predicted classes, the ids."""
    own_ids: Any = None
    predicted: Any = None
    raw: Any = data
    if isinstance(data, CalibratedPrediction):
        raw, predicted = getattr(data, schema.input_field), data.class_indices
        own_ids = data.sample_ids
    elif isinstance(data, nnx.PredictionResult):
        raw, predicted, own_ids = data.probabilities, data.class_indices, data.sample_ids
    p = as_matrix(raw, "probabilities", AbstentionError)
    if p.shape[1] != len(schema.labels):
        raise AbstentionSchemaError(f"probabilities have {p.shape[1]} classes; the labels "
                                    f"name {len(schema.labels)}")
    if p.shape[0] == 0:
        raise AbstentionError("no rows to decide")
    check_distribution(p, AbstentionError)
    if own_ids is not None:
        if sample_ids is not None and not np.array_equal(np.asarray(sample_ids), own_ids):
            raise AbstentionError("sample_ids= must equal the prediction's own sample_ids")
        ids = own_ids
    else:
        ids = as_sample_ids(sample_ids, p.shape[0], AbstentionError)
    if predicted is None:
        index = p.argmax(axis=1)  # the first class of maximal probability: label order
    else:
        index = np.asarray(predicted.cpu() if hasattr(predicted, "cpu") else predicted,
                           dtype=np.int64)
        off = np.flatnonzero(p[np.arange(p.shape[0]), index] != p.max(axis=1))
        if off.size:
            raise AbstentionError(f"the prediction's decoded class is not a class of maximal "
                                  f"probability in rows {off[:10].tolist()}")
    return Rows(p, index.astype(np.int64), ids)


def scores_of(kind: str, p: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """float64 scores: the top probability, or the gap between the top two (0 when tied)."""
    if kind == "max_probability":
        scores: npt.NDArray[np.float64] = p.max(axis=1)
        return scores
    top = np.sort(p, axis=1)[:, -2:]
    scores = top[:, 1] - top[:, 0]
    return scores
