"""AbstentionPolicy.apply and CoverageReport (spec §19)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _decisions_data import LABELS, SPLITS, Untouchable, overconfident, untouchable_prediction

import nnx
from nnx.abstention import (
    AbstentionError,
    AbstentionPolicy,
    AbstentionSchemaError,
)
from nnx.calibration import fit_temperature

P = np.array([[0.7, 0.2, 0.1],    # margin 0.49999999999999994, top 0.7
              [0.2, 0.8, 0.0],    # margin 0.6000000000000001, top 0.8
              [0.4, 0.4, 0.2],    # a tied top two: margin 0, predicted class 0
              [0.0, 0.0, 1.0]])   # top exactly 1


def _policy(kind: str, threshold: float, **kw) -> AbstentionPolicy:
    return AbstentionPolicy(kind, threshold, labels=LABELS, model_id="m", **kw)


def test_a_margin_of_0_7_minus_0_2_abstains_at_a_hand_threshold_of_0_5() -> None:
    result = _policy("margin", 0.5).apply(P, labels=LABELS, model_id="m")
    assert result.scores.dtype == np.float64
    assert result.scores[0] == 0.7 - 0.2 == 0.49999999999999994
    assert result.accepted.tolist() == [False, True, False, True]
    assert result.reasons == ("small_margin", None, "small_margin", None)
    assert result.scores[2] == 0.0 and result.predictions[2] == 0  # ties by label order


def test_max_probability_accepts_at_or_above_and_1_accepts_exactly_1() -> None:
    result = _policy("max_probability", 0.7).apply(P, labels=LABELS, model_id="m")
    assert result.accepted.tolist() == [True, True, False, True]
    assert result.reasons[2] == "below_probability_threshold"
    assert _policy("max_probability", 1.0).apply(
        P, labels=LABELS, model_id="m").accepted.tolist() == [False, False, False, True]


def test_an_abstained_row_keeps_its_prediction_distribution_score_and_id() -> None:
    result = _policy("margin", 0.5).apply(P, labels=LABELS, model_id="m",
                                          sample_ids=[10, 11, 12, 13])
    assert result.predictions.tolist() == [0, 1, 0, 2]
    assert result.decoded.tolist() == ["cat", "dog", "cat", "fox"]
    np.testing.assert_array_equal(result.probabilities, P)
    assert result.sample_ids.tolist() == [10, 11, 12, 13]


def test_coverage_and_selective_risk_match_a_hand_count() -> None:
    result = _policy("max_probability", 0.7).apply(P, labels=LABELS, model_id="m",
                                                   sample_ids=[4, 4, 5, 6])
    report = result.report([0, 2, 1, 2])  # accepted rows 0, 1, 3; row 1 is wrong
    assert (report.total, report.accepted, report.abstained, report.incorrect) == (4, 3, 1, 1)
    assert report.coverage == 3 / 4 and report.selective_risk == 1 / 3
    assert report.status == "ok" and report.sample_ids == (4, 4, 5, 6)  # repeats kept
    rows = result.accepted_rows([0, 2, 1, 2])
    assert rows.predictions.tolist() == [0, 1, 2] and rows.targets.tolist() == [0, 2, 2]
    assert rows.sample_ids.tolist() == [4, 4, 6]


def test_nothing_accepted_gives_risk_none_with_status_no_accepted() -> None:
    result = _policy("margin", 1.0).apply(P[:3], labels=LABELS, model_id="m")
    report = result.report([0, 1, 0])
    assert report.accepted == 0 and report.coverage == 0.0
    assert report.selective_risk is None and report.status == "no_accepted"


@pytest.mark.parametrize(("bad", "match"), [
    (np.array([[0.5, np.nan, 0.5]]), "non-finite"),
    (np.array([[1.2, -0.2, 0.0]]), r"\[0, 1\]"),
    (np.array([[0.5, 0.4, 0.0]]), "do not sum to 1"),
    (np.array([[1.0], [1.0]]), "C >= 2"),
    (np.array([[0.5, 0.5]]), "2 classes; the labels name 3"),
])
def test_malformed_probabilities_raise_and_are_never_abstained_on(bad, match) -> None:
    copy = bad.copy()
    with pytest.raises(AbstentionError, match=match):
        _policy("margin", 0.1).apply(bad, labels=LABELS, model_id="m")
    np.testing.assert_array_equal(bad, copy)


def test_the_input_is_never_modified() -> None:
    p = P.copy()
    result = _policy("margin", 0.5).apply(p, labels=LABELS, model_id="m")
    np.testing.assert_array_equal(p, P)
    assert not result.probabilities.flags.writeable


@pytest.mark.parametrize(("labels", "model_id"), [
    (("dog", "cat", "fox"), "m"), (LABELS, "other"), (("a", "b"), "m")])
def test_another_schema_is_refused_before_any_probability_is_read(labels, model_id) -> None:
    reads = Untouchable.reads
    with pytest.raises(AbstentionSchemaError):
        _policy("margin", 0.5).apply(Untouchable(), labels=labels, model_id=model_id)
    assert Untouchable.reads == reads


@pytest.mark.parametrize(("labels", "model_id", "match"), [
    (("dog", "cat", "fox"), "m", "labels"),   # the prediction's spec: another label order
    (("cat", "dog", "owl"), "m", "labels"),   # another label name
    (LABELS, "other", "model_id"),            # another model
])
def test_a_prediction_result_of_another_schema_is_refused_before_any_read(
        labels, model_id, match) -> None:
    reads = Untouchable.reads
    with pytest.raises(AbstentionSchemaError, match=match):
        _policy("margin", 0.5).apply(untouchable_prediction(labels), model_id=model_id)
    if labels != LABELS:  # labels= naming the policy's order does not override the spec's
        with pytest.raises(AbstentionSchemaError, match="differ from the prediction"):
            _policy("margin", 0.5).apply(untouchable_prediction(labels), labels=LABELS,
                                         model_id="m")
    assert Untouchable.reads == reads


def test_a_calibrated_field_policy_refuses_bare_arrays_before_any_read() -> None:
    policy = _policy("max_probability", 0.6, input_field="calibrated_probabilities",
                     calibrator_id="0" * 64)
    reads = Untouchable.reads
    with pytest.raises(AbstentionSchemaError, match="input_field"):
        policy.apply(Untouchable(), labels=LABELS, model_id="m")
    with pytest.raises(AbstentionSchemaError, match="input_field"):
        policy.apply(untouchable_prediction(), model_id="m")
    assert Untouchable.reads == reads


def _calibrated():
    z, t = overconfident(200, seed=41)
    calibrator = fit_temperature(z, t, LABELS, model_id="m", **SPLITS).require()
    z2, _ = overconfident(30, seed=42)
    return calibrator, calibrator.transform(z2, labels=LABELS, model_id="m")


def test_a_calibrated_policy_reads_its_field_and_refuses_another_view_or_calibrator() -> None:
    calibrator, prediction = _calibrated()
    calibrated = _policy("max_probability", 0.6, input_field="calibrated_probabilities",
                         calibrator_id=calibrator.calibrator_id)
    out = calibrated.apply(prediction)
    np.testing.assert_array_equal(out.probabilities, prediction.calibrated_probabilities)
    raw = _policy("max_probability", 0.6).apply(prediction)
    np.testing.assert_array_equal(raw.probabilities, prediction.probabilities)
    other = _policy("max_probability", 0.6, input_field="calibrated_probabilities",
                    calibrator_id="0" * 64)
    with pytest.raises(AbstentionSchemaError, match="calibrator_id"):
        other.apply(prediction)
    with pytest.raises(AbstentionSchemaError, match="input_field"):  # a raw-only input
        calibrated.apply(prediction.probabilities, labels=LABELS, model_id="m")


def test_a_calibration_override_travels_with_the_result() -> None:
    calibrator, _ = _calibrated()
    z, _ = overconfident(5, seed=43)
    prediction = calibrator.transform(z, labels=LABELS, model_id="m2", override="model_id")
    out = AbstentionPolicy("margin", 0.2, labels=LABELS, model_id="m2").apply(prediction)
    assert out.calibration_override == dict(prediction.override)


def test_a_prediction_result_is_decided_by_its_own_decoded_class() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 0.0, 3.0]], dtype=torch.float64)
    prediction = nnx.prediction_from_logits(logits, nnx.ProbabilitySpec(
        "categorical", labels=LABELS), sample_ids=[8, 9])
    out = _policy("max_probability", 0.5).apply(prediction, model_id="m")
    assert out.predictions.tolist() == [0, 2] and out.sample_ids.tolist() == [8, 9]
    np.testing.assert_array_equal(out.probabilities, prediction.probabilities.numpy())


def test_a_prediction_whose_decoded_class_is_not_a_top_class_is_refused() -> None:
    _, prediction = _calibrated()
    broken = type(prediction)(**{**prediction.__dict__,
                                 "class_indices": (prediction.class_indices + 1) % 3})
    with pytest.raises(AbstentionError, match="not a class of maximal probability"):
        _policy("margin", 0.1).apply(broken)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"threshold": 1.5}, r"\[0, 1\]"), ({"threshold": -0.1}, r"\[0, 1\]"),
    ({"threshold": float("nan")}, r"\[0, 1\]"), ({"kind": "entropy"}, "kind"),
    ({"input_field": "calibrated_probabilities"}, "calibrator_id"),
    ({"calibrator_id": "abc"}, "calibrator_id"), ({"model_id": ""}, "model id")])
def test_a_malformed_policy_is_refused(kwargs, match) -> None:
    args = {"kind": "margin", "threshold": 0.5, "labels": LABELS, "model_id": "m", **kwargs}
    with pytest.raises(AbstentionError, match=match):
        AbstentionPolicy(**args)
