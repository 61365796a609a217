"""TemperatureCalibrator: a fitted temperature bound to one model and label order.

``transform`` serves ``softmax(logits / T)`` beside the raw view; ``report`` compares
both on a held-out split. Each compares the declared labels and model id with the
fitted ones before it reads any logits.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

import nnx
from nnx.calibration.binding import check_identity
from nnx.calibration.document import JsonDocument, digest, dumps
from nnx.calibration.errors import CalibrationError
from nnx.calibration.inputs import (
    Labels,
    as_labels,
    as_matrix,
    as_sample_ids,
    as_targets,
    frozen,
    reconcile_labels,
)
from nnx.calibration.metrics import DEFAULT_BINS
from nnx.calibration.report import CalibrationReport, metrics_of
from nnx.extend import check_count, softmax64

__all__ = ["FORMAT", "CalibratedPrediction", "TemperatureCalibrator", "read_bundled"]

FORMAT = "nnx.calibration/1"
#: Recorded with every calibrator: split ids are declarations, not a check on the rows.
DISJOINTNESS_NOTE = ("split ids differ, but arrays and loaders carry no guarantee that "
                     "their rows are disjoint")


@dataclass(frozen=True, eq=False)
class CalibratedPrediction:
    """Raw and calibrated views of the same rows, kept apart (spec §18)."""

    logits: npt.NDArray[np.float64]
    probabilities: npt.NDArray[np.float64]
    calibrated_probabilities: npt.NDArray[np.float64]
    decoded: npt.NDArray[Any]
    class_indices: npt.NDArray[np.int64]
    labels: Labels
    sample_ids: npt.NDArray[np.int64]
    calibrator_id: str
    model_id: str
    #: The accepted override and its mismatches (expected vs actual), or None.
    override: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class TemperatureCalibrator(JsonDocument):
    """Temperature, ordered labels, model id, fit config and result, and split ids;
    ``nnx.calibration/1`` JSON (``to_json`` / ``save`` / ``from_json`` / ``load``)."""

    FORMAT: ClassVar[str] = FORMAT
    KIND: ClassVar[str] = "temperature_calibrator"
    ERROR: ClassVar[type[ValueError]] = CalibrationError

    temperature: float
    labels: Labels
    model_id: str
    split: Mapping[str, str] = field(repr=False)
    config: Mapping[str, Any] = field(repr=False)
    fit: Mapping[str, Any] = field(repr=False)

    def __post_init__(self) -> None:
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not (
                math.isfinite(t) and t > 0):
            raise CalibrationError(f"temperature must be finite and > 0; got {t!r}")
        object.__setattr__(self, "temperature", float(t))
        object.__setattr__(self, "labels", as_labels(self.labels, CalibrationError))
        if not isinstance(self.model_id, str) or not self.model_id:
            raise CalibrationError(f"a calibrator needs a model id; got {self.model_id!r}")
        split = dict(self.split)
        for key in ("calibration", "train", "test"):
            if not isinstance(split.get(key), str) or not split[key]:
                raise CalibrationError(f"split[{key!r}] must be a non-empty split id")
        if split["calibration"] in (split["train"], split["test"]):
            raise CalibrationError(
                f"calibration split {split['calibration']!r} equals the "
                f"{'train' if split['calibration'] == split['train'] else 'test'} split")
        split.setdefault("disjointness", "unverified")
        split.setdefault("note", DISJOINTNESS_NOTE)
        object.__setattr__(self, "split", split)

    # -- identity and serialization ------------------------------------------------------

    def document(self) -> dict[str, Any]:
        return {"format": FORMAT, "kind": "temperature_calibrator",
                "temperature": self.temperature, "labels": list(self.labels),
                "model_id": self.model_id, "split": dict(self.split),
                "config": dict(self.config), "fit": dict(self.fit)}

    @property
    def num_classes(self) -> int:
        """The class count it calibrates (a run bundle checks it, nnx.extend.BundleCalibrator)."""
        return len(self.labels)

    @property
    def calibrator_id(self) -> str:
        """The digest of the calibrator's document: changes with anything it holds."""
        return digest(self.document())

    @classmethod
    def _from_document(cls, doc: dict[str, Any]) -> TemperatureCalibrator:
        # load / from_json (JsonDocument) end here: the temperature reloads float64-exact,
        # and __post_init__ refuses a non-positive or non-finite temperature, duplicate
        # labels, a missing model id and a calibration split equal to train or test.
        missing = [k for k in ("temperature", "labels", "model_id", "split") if k not in doc]
        if missing:
            raise CalibrationError(f"{FORMAT} document misses {missing}")
        if not isinstance(doc["split"], dict):
            raise CalibrationError(f"{FORMAT} split must be an object")
        return cls(temperature=doc["temperature"], labels=doc["labels"],
                   model_id=doc["model_id"], split=doc["split"],
                   config=dict(doc.get("config") or {}), fit=dict(doc.get("fit") or {}))

    # -- serving -------------------------------------------------------------------------

    def _declared(self, logits: Any, labels: Any, model_id: Any, sample_ids: Any,
                  override: str | Iterable[str] | None) -> tuple[Labels, Mapping[str, Any] | None,
                                                                  Any]:
        """Declared labels and the override record, from declarations only; and the
        prediction's own sample ids (None for arrays)."""
        own_ids = None
        if isinstance(logits, nnx.PredictionResult):
            labels = reconcile_labels(logits, labels, CalibrationError)
            own_ids = logits.sample_ids
            if sample_ids is not None and not np.array_equal(np.asarray(sample_ids), own_ids):
                raise CalibrationError("sample_ids= must equal the prediction's own sample_ids")
        declared = as_labels(labels, CalibrationError)
        record = check_identity(self.labels, self.model_id, declared, model_id, override)
        return declared, record, own_ids

    def _logits(self, logits: Any, declared: Labels) -> npt.NDArray[np.float64]:
        raw = logits.logits if isinstance(logits, nnx.PredictionResult) else logits
        z = as_matrix(raw, "logits", CalibrationError)
        if z.shape[1] != len(declared):
            raise CalibrationError(f"logits have {z.shape[1]} classes; labels name "
                                   f"{len(declared)}")
        return z

    def transform(self, logits: Any, *, labels: Any = None, model_id: str | None = None,
                  sample_ids: Any = None,
                  override: str | Iterable[str] | None = None) -> CalibratedPrediction:
        """Raw and calibrated probabilities of ``(N, C)`` logits (array, tensor or a
        categorical PredictionResult, whose spec supplies the labels and whose
        sample_ids are kept). The model, predict() and the run are never touched."""
        declared, record, own_ids = self._declared(logits, labels, model_id, sample_ids,
                                                   override)
        z = self._logits(logits, declared)
        ids = own_ids if own_ids is not None else as_sample_ids(sample_ids, z.shape[0],
                                                                CalibrationError)
        index = z.argmax(axis=1)  # the raw argmax: calibration never changes it
        return CalibratedPrediction(
            logits=frozen(z), probabilities=frozen(softmax64(z)),
            calibrated_probabilities=frozen(softmax64(z / self.temperature)),
            decoded=frozen(np.asarray(declared)[index]), class_indices=frozen(index),
            labels=declared, sample_ids=ids, calibrator_id=self.calibrator_id,
            model_id=str(model_id), override=record)

    def report(self, logits: Any, targets: Any, *, split_id: str, labels: Any = None,
               model_id: str | None = None, override: str | Iterable[str] | None = None,
               n_bins: int = DEFAULT_BINS) -> CalibrationReport:
        """Held-out NLL, Brier, ECE and bins before and after calibration, and the
        outcome. The calibration and the training split are refused as held-out data."""
        if not isinstance(split_id, str) or not split_id:
            raise CalibrationError(f"split_id must be a non-empty split id; got {split_id!r}")
        for role in ("calibration", "train"):
            if split_id == self.split[role]:
                raise CalibrationError(
                    f"split {split_id!r} is the {role} split; report on held-out data "
                    f"(the test split {self.split['test']!r})")
        n_bins = check_count("n_bins", n_bins, minimum=1)
        declared, record, _ = self._declared(logits, labels, model_id, None, override)
        z = self._logits(logits, declared)
        t = as_targets(targets, z.shape[0], z.shape[1], CalibrationError)
        if z.shape[0] == 0:
            raise CalibrationError("a report needs at least one row")
        before = metrics_of(softmax64(z), t, n_bins)
        after = metrics_of(softmax64(z / self.temperature), t, n_bins)
        return CalibrationReport.compare(
            split_id=split_id, calibrator_id=self.calibrator_id, model_id=str(model_id),
            labels=declared, temperature=self.temperature, rows=int(z.shape[0]),
            before=before, after=after, override=record)


def read_bundled(record: Mapping[str, Any]) -> TemperatureCalibrator:
    """A run bundle's ``calibrator-<n>.json`` record back as a calibrator: the reader of
    the ``nnx.calibration_readers`` entry point ``nnx.calibration@v1`` (spec §22). The
    record goes through the same strict load as :meth:`TemperatureCalibrator.from_json`,
    so the temperature is float64-exact and every load refusal applies."""
    return TemperatureCalibrator.from_json(dumps(record))
