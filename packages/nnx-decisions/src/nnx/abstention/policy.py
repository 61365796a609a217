"""AbstentionPolicy (spec §19): accept a row when its float64 score reaches a threshold.

The score is the top probability (``max_probability``) or the gap between the top two
(``margin``). Scores are float64, so a margin of 0.7 - 0.2 is 0.49999999999999994 and a
hand-picked 0.5 abstains on it. A policy records the field it reads, the label order,
the model id and the tuning split; it is ``nnx.abstention/1`` JSON.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from nnx.abstention.errors import AbstentionError, AbstentionSchemaError
from nnx.abstention.inputs import FIELDS, Schema, check_against, rows_of, schema_of, scores_of
from nnx.abstention.report import AbstentionResult, SelectiveDecision
from nnx.calibration import CalibratedPrediction
from nnx.calibration.document import JsonDocument
from nnx.calibration.inputs import Labels, as_labels, frozen
from nnx.decisions.results import ChoiceResult

__all__ = ["FORMAT", "KINDS", "REASONS", "AbstentionPolicy", "decide"]

FORMAT = "nnx.abstention/1"
KINDS = ("max_probability", "margin")
#: Why a row was declined, per policy kind.
REASONS = {"max_probability": "below_probability_threshold", "margin": "small_margin"}


def check_kind(kind: Any) -> str:
    if kind not in KINDS:
        raise AbstentionError(f"kind must be one of {list(KINDS)}; got {kind!r}")
    return str(kind)


@dataclass(frozen=True)
class AbstentionPolicy(JsonDocument):
    """Accept a row when ``score >= threshold`` (1.0 still accepts a score of exactly 1);
    ``nnx.abstention/1`` JSON (``to_json`` / ``save`` / ``from_json`` / ``load``)."""

    FORMAT: ClassVar[str] = FORMAT
    KIND: ClassVar[str] = "abstention_policy"
    ERROR: ClassVar[type[ValueError]] = AbstentionError

    kind: str
    threshold: float
    labels: Labels
    model_id: str
    tuning_split_id: str | None = None
    input_field: str = "probabilities"
    calibrator_id: str | None = None

    def __post_init__(self) -> None:
        check_kind(self.kind)
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not (
                math.isfinite(t) and 0.0 <= t <= 1.0):
            raise AbstentionError(f"threshold must be a real in [0, 1]; got {t!r}")
        object.__setattr__(self, "threshold", float(t))
        object.__setattr__(self, "labels", as_labels(self.labels, AbstentionError))
        if not isinstance(self.model_id, str) or not self.model_id:
            raise AbstentionError(f"a policy needs a model id; got {self.model_id!r}")
        if self.tuning_split_id is not None and (
                not isinstance(self.tuning_split_id, str) or not self.tuning_split_id):
            raise AbstentionError(f"tuning_split_id must be a split id or None; "
                                  f"got {self.tuning_split_id!r}")
        if self.input_field not in FIELDS:
            raise AbstentionError(f"input_field must be one of {list(FIELDS)}; "
                                  f"got {self.input_field!r}")
        calibrated = self.input_field == FIELDS[1]
        if calibrated != (self.calibrator_id is not None):
            raise AbstentionError("a policy on calibrated_probabilities names its "
                                  "calibrator_id, and only such a policy does")

    @property
    def schema(self) -> Schema:
        return Schema(self.labels, self.model_id, self.input_field, self.calibrator_id)

    def apply(self, data: Any, *, labels: Any = None, model_id: str | None = None,
              sample_ids: Any = None) -> AbstentionResult:
        """Decide every row of ``data`` (a CalibratedPrediction, a categorical
        PredictionResult, or ``(N, C)`` probabilities with ``labels=`` / ``model_id=``).
        Another schema raises AbstentionSchemaError before any probability is read;
        malformed probabilities raise AbstentionError. The input is never modified."""
        field = self.input_field if isinstance(data, CalibratedPrediction) else None
        schema = schema_of(data, labels=labels, model_id=model_id, input_field=field)
        check_against(schema, self.schema)
        rows = rows_of(data, schema, sample_ids)
        scores = scores_of(self.kind, rows.probabilities)
        accepted = scores >= self.threshold
        reason = REASONS[self.kind]
        return AbstentionResult(
            accepted=frozen(accepted), predictions=frozen(rows.predicted),
            decoded=frozen(np.asarray(self.labels)[rows.predicted]),
            probabilities=frozen(rows.probabilities), scores=frozen(scores),
            sample_ids=rows.sample_ids,
            reasons=tuple(None if a else reason for a in accepted.tolist()),
            labels=self.labels, model_id=self.model_id, input_field=self.input_field,
            calibrator_id=self.calibrator_id, policy=self.document(),
            calibration_override=schema.calibration_override)

    def decide(self, result: Any, *, model_id: str) -> SelectiveDecision:
        """This policy on one typed decision (spec §19): the provider's ChoiceResult
        unchanged inside a SelectiveDecision. The policy's labels must be the
        question's option ids in order and its model id ``model_id``; its field must be
        the one the answer holds: raw probabilities, or the calibrated ones of the
        policy's own calibrator (``result.calibration``, served for ``model_id``).
        Otherwise AbstentionSchemaError, before any probability is read."""
        if not isinstance(result, ChoiceResult):
            raise AbstentionError(f"decide applies to a ChoiceResult; got "
                                  f"{type(result).__name__}")
        diffs = []
        if tuple(result.ids) != tuple(self.labels):
            diffs.append(f"labels: policy {list(self.labels)}, decision {list(result.ids)}")
        if model_id != self.model_id:
            diffs.append(f"model_id: policy {self.model_id!r}, decision {model_id!r}")
        calibration = result.calibration
        field = FIELDS[0] if calibration is None else calibration.get("field")
        if field != self.input_field:
            diffs.append(f"input_field: policy {self.input_field!r}, decision {field!r}")
        elif calibration is not None:
            if calibration.get("calibrator_id") != self.calibrator_id:
                diffs.append(f"calibrator_id: policy {self.calibrator_id!r}, decision "
                             f"{calibration.get('calibrator_id')!r}")
            if calibration.get("model_id") != model_id:
                diffs.append(f"model_id: the decision was calibrated for "
                             f"{calibration.get('model_id')!r}, not {model_id!r}")
        if diffs:
            raise AbstentionSchemaError("the decision's schema differs from the policy's: "
                                        + "; ".join(diffs))
        p = np.asarray([result.probabilities], dtype=np.float64)
        score = float(scores_of(self.kind, p)[0])
        accepted = score >= self.threshold
        return SelectiveDecision(result, accepted, None if accepted else REASONS[self.kind],
                                 score, model_id, self.document())

    # -- nnx.abstention/1 ----------------------------------------------------------------

    def document(self) -> dict[str, Any]:
        return {"format": FORMAT, "kind": "abstention_policy", "policy_kind": self.kind,
                "threshold": self.threshold, "labels": list(self.labels),
                "model_id": self.model_id, "tuning_split_id": self.tuning_split_id,
                "input_field": self.input_field, "calibrator_id": self.calibrator_id}

    @classmethod
    def _from_document(cls, doc: dict[str, Any]) -> AbstentionPolicy:
        # load / from_json (JsonDocument) end here; __post_init__ refuses a threshold
        # outside [0, 1] (AbstentionError).
        missing = [k for k in ("policy_kind", "threshold", "labels", "model_id") if k not in doc]
        if missing:
            raise AbstentionError(f"{FORMAT} document misses {missing}")
        return cls(kind=doc["policy_kind"], threshold=doc["threshold"], labels=doc["labels"],
                   model_id=doc["model_id"], tuning_split_id=doc.get("tuning_split_id"),
                   input_field=doc.get("input_field", FIELDS[0]),
                   calibrator_id=doc.get("calibrator_id"))


def decide(choice_result: ChoiceResult, policy: AbstentionPolicy, *,
           model_id: str) -> SelectiveDecision:
    """Apply ``policy`` to a typed decision (spec §19): ``policy.decide(...)``, which
    returns the provider's result unchanged inside a :class:`SelectiveDecision`."""
    if not isinstance(policy, AbstentionPolicy):
        raise AbstentionError(f"decide needs an AbstentionPolicy; got {type(policy).__name__}")
    return policy.decide(choice_result, model_id=model_id)
