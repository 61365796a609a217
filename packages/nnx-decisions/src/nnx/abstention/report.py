"""AbstentionResult and CoverageReport (spec §19): two denominators, kept apart.

Coverage counts accepted rows over every row; selective risk counts incorrect rows over
the accepted rows only. With nothing accepted the risk is unavailable (None, status
"no_accepted"), never 0. An abstention is a success: the row keeps its prediction,
distribution, score and id, with a reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from nnx.abstention.errors import AbstentionError
from nnx.calibration.inputs import Labels, as_targets
from nnx.decisions.results import ChoiceResult

__all__ = ["AbstentionResult", "AcceptedRows", "CoverageReport", "SelectiveDecision",
           "coverage_report"]


@dataclass(frozen=True)
class CoverageReport:
    """Coverage over all rows, selective risk over the accepted ones."""

    total: int
    accepted: int
    incorrect: int
    coverage: float
    selective_risk: float | None
    status: str
    #: Every original sample id, in row order (ids may repeat).
    sample_ids: tuple[int, ...]

    @property
    def abstained(self) -> int:
        return self.total - self.accepted

    @classmethod
    def of_counts(cls, accepted: int, incorrect: int, sample_ids: Any) -> CoverageReport:
        """The report of counts over ``len(sample_ids)`` rows (at least one)."""
        ids = tuple(int(i) for i in sample_ids)
        total = len(ids)
        return cls(total=total, accepted=accepted, incorrect=incorrect,
                   coverage=accepted / total,
                   selective_risk=incorrect / accepted if accepted else None,
                   status="ok" if accepted else "no_accepted", sample_ids=ids)


def coverage_report(accepted: npt.NDArray[np.bool_], wrong: npt.NDArray[np.bool_],
                    sample_ids: npt.NDArray[np.int64]) -> CoverageReport:
    """The report of per-row accept / wrong flags (wrong is read on accepted rows only)."""
    return CoverageReport.of_counts(int(accepted.sum()), int((accepted & wrong).sum()),
                                    sample_ids)


@dataclass(frozen=True)
class AcceptedRows:
    """The accepted rows only: what a hard-label report (accuracy, a confusion matrix)
    may see. An abstention never becomes a pseudo class."""

    predictions: npt.NDArray[np.int64]
    targets: npt.NDArray[np.int64]
    decoded: npt.NDArray[Any]
    sample_ids: npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class AbstentionResult:
    """Per row: accepted or abstained (with its reason), the prediction, the float64
    distribution read, its score and sample id; and the policy's schema."""

    accepted: npt.NDArray[np.bool_]
    predictions: npt.NDArray[np.int64]
    decoded: npt.NDArray[Any]
    probabilities: npt.NDArray[np.float64]
    scores: npt.NDArray[np.float64]
    sample_ids: npt.NDArray[np.int64]
    #: None on an accepted row; "below_probability_threshold" or "small_margin" otherwise.
    reasons: tuple[str | None, ...]
    labels: Labels
    model_id: str
    input_field: str
    calibrator_id: str | None
    #: The policy's nnx.abstention/1 document.
    policy: Mapping[str, Any]
    #: A calibration override (spec §18) that travelled with the input, or None.
    calibration_override: Mapping[str, Any] | None = None

    @property
    def abstained(self) -> npt.NDArray[np.bool_]:
        return ~self.accepted

    def _targets(self, targets: Any) -> npt.NDArray[np.int64]:
        return as_targets(targets, self.accepted.size, len(self.labels), AbstentionError)

    def report(self, targets: Any) -> CoverageReport:
        """Coverage and selective risk against class-index ``targets``."""
        t = self._targets(targets)
        return coverage_report(self.accepted, self.predictions != t, self.sample_ids)

    def accepted_rows(self, targets: Any) -> AcceptedRows:
        t = self._targets(targets)
        keep = self.accepted
        return AcceptedRows(self.predictions[keep], t[keep], self.decoded[keep],
                            self.sample_ids[keep])


@dataclass(frozen=True)
class SelectiveDecision:
    """A typed decision (spec §17) and a policy's verdict on it (``decide``): the
    provider's ChoiceResult unchanged; an abstention is a success, not an error."""

    #: The provider's ChoiceResult, unchanged (its distribution and raw output).
    result: ChoiceResult
    accepted: bool
    #: None when accepted; the policy kind's reason otherwise.
    reason: str | None
    #: The float64 score the policy compared with its threshold.
    score: float
    model_id: str
    #: The policy's nnx.abstention/1 document.
    policy: Mapping[str, Any]

    @property
    def abstained(self) -> bool:
        return not self.accepted

    @property
    def prediction(self) -> str:
        """The option id of maximal probability (kept on an abstention too)."""
        return self.result.choice

    @property
    def distribution(self) -> dict[str, float]:
        return self.result.distribution

    @property
    def raw(self) -> Any:
        return self.result.raw

    @property
    def calibration_override(self) -> Mapping[str, Any] | None:
        """The calibration override (spec §18) the answer was served under, or None."""
        calibration = self.result.calibration
        return None if calibration is None else calibration.get("override")
