"""CalibrationReport: held-out metrics before and after calibration, and the outcome rule.

``outcome`` is "improved" only when neither NLL nor Brier got worse and one got better;
"worsened" when neither got better and one got worse; "mixed" when one of each;
"unchanged" when both are equal. A worsened report says to keep the raw probabilities.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from nnx.calibration.document import JsonDocument
from nnx.calibration.errors import CalibrationError
from nnx.calibration.inputs import Labels, as_labels
from nnx.calibration.metrics import DEFAULT_EPSILON, ReliabilityBin, bins_of, ece_of
from nnx.extend import brier_terms, nll_terms

__all__ = ["OUTCOMES", "CalibrationMetrics", "CalibrationReport", "metrics_of"]

FORMAT = "nnx.calibration/1"
OUTCOMES = ("improved", "worsened", "mixed", "unchanged")



@dataclass(frozen=True)
class CalibrationMetrics:
    """NLL, Brier, ECE and the reliability bins of one probability view."""

    nll: float
    brier: float
    ece: float
    bins: tuple[ReliabilityBin, ...]

    def document(self) -> dict[str, Any]:
        return {"nll": self.nll, "brier": self.brier, "ece": self.ece,
                "bins": [b.document() for b in self.bins]}

    @classmethod
    def from_document(cls, doc: Any) -> CalibrationMetrics:
        try:
            return cls(nll=float(doc["nll"]), brier=float(doc["brier"]),
                       ece=float(doc["ece"]),
                       bins=tuple(ReliabilityBin(**b) for b in doc["bins"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibrationError(f"{FORMAT} report metrics are malformed: {exc}") from None


def metrics_of(p: npt.NDArray[np.float64], t: npt.NDArray[np.int64],
               n_bins: int) -> CalibrationMetrics:
    """The metrics of checked probabilities (the same terms metrics.py averages)."""
    bins = bins_of(p, t, n_bins)
    return CalibrationMetrics(nll=float(np.mean(nll_terms(p, t, epsilon=DEFAULT_EPSILON))),
                              brier=float(np.mean(brier_terms(p, t))), ece=ece_of(bins),
                              bins=bins)


def outcome_of(before: CalibrationMetrics, after: CalibrationMetrics) -> str:
    moves = [(a > b) - (a < b) for b, a in ((before.nll, after.nll),
                                            (before.brier, after.brier))]
    better, worse = -1 in moves, 1 in moves
    if better and worse:
        return "mixed"
    if better:
        return "improved"
    return "worsened" if worse else "unchanged"


@dataclass(frozen=True)
class CalibrationReport(JsonDocument):
    """One held-out split's metrics, raw (``before``) and calibrated (``after``);
    ``nnx.calibration/1`` JSON."""

    FORMAT: ClassVar[str] = FORMAT
    KIND: ClassVar[str] = "calibration_report"
    ERROR: ClassVar[type[ValueError]] = CalibrationError

    split_id: str
    calibrator_id: str
    model_id: str
    labels: Labels
    temperature: float
    rows: int
    before: CalibrationMetrics
    after: CalibrationMetrics
    outcome: str
    override: Mapping[str, Any] | None = None

    @classmethod
    def compare(cls, **fields: Any) -> CalibrationReport:
        return cls(outcome=outcome_of(fields["before"], fields["after"]), **fields)

    def summary(self) -> str:
        """One paragraph: the outcome, both metrics' moves, and what to do."""
        b, a = self.before, self.after
        lines = (f"calibration on split {self.split_id!r} (T={self.temperature:.6g}, "
                 f"{self.rows} rows): {self.outcome}; NLL {b.nll:.6g} -> {a.nll:.6g}, "
                 f"Brier {b.brier:.6g} -> {a.brier:.6g}, ECE {b.ece:.6g} -> {a.ece:.6g}")
        advice = {"improved": "use the calibrated probabilities",
                  "worsened": "keep the uncalibrated probabilities",
                  "mixed": "NLL and Brier disagree; keep the uncalibrated probabilities "
                           "unless the better metric is the one you need",
                  "unchanged": "calibration changed neither metric"}[self.outcome]
        overridden = ("" if self.override is None else
                      f" (override {self.override['accepted']} accepted: "
                      f"{self.override['mismatches']})")
        return f"{lines}. {advice}.{overridden}"

    def document(self) -> dict[str, Any]:
        return {"format": FORMAT, "kind": "calibration_report", "split_id": self.split_id,
                "calibrator_id": self.calibrator_id, "model_id": self.model_id,
                "labels": list(self.labels), "temperature": self.temperature,
                "rows": self.rows, "before": self.before.document(),
                "after": self.after.document(), "outcome": self.outcome,
                "override": None if self.override is None else dict(self.override)}

    @classmethod
    def _from_document(cls, doc: dict[str, Any]) -> CalibrationReport:
        if doc.get("outcome") not in OUTCOMES:
            raise CalibrationError(f"{FORMAT} report outcome must be one of {OUTCOMES}")
        try:
            return cls(split_id=str(doc["split_id"]), calibrator_id=str(doc["calibrator_id"]),
                       model_id=str(doc["model_id"]),
                       labels=as_labels(doc["labels"], CalibrationError),
                       temperature=float(doc["temperature"]), rows=int(doc["rows"]),
                       before=CalibrationMetrics.from_document(doc["before"]),
                       after=CalibrationMetrics.from_document(doc["after"]),
                       outcome=doc["outcome"], override=doc.get("override"))
        except KeyError as exc:
            raise CalibrationError(f"{FORMAT} report misses {exc}") from None
