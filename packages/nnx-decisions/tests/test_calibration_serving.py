"""TemperatureCalibrator.transform / report (spec §18): identity binding, overrides,
raw and calibrated views, PredictionResult inputs, split refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _decisions_data import LABELS, SPLITS, Untouchable, overconfident

import nnx
from nnx.calibration import (
    OUTCOMES,
    CalibrationError,
    CalibrationMetrics,
    CalibrationMismatchError,
    CalibrationReport,
    TemperatureCalibrator,
    fit_temperature,
)
from nnx.extend import softmax64


@pytest.fixture(scope="module")
def calibrator() -> TemperatureCalibrator:
    z, t = overconfident(300, seed=11)
    return fit_temperature(z, t, LABELS, model_id="run-1:BEST", **SPLITS).require()


def _prediction(z: np.ndarray, labels=LABELS, ids=None) -> nnx.PredictionResult:
    return nnx.prediction_from_logits(torch.from_numpy(z), nnx.ProbabilitySpec(
        "categorical", labels=labels), sample_ids=ids)


def test_transform_keeps_raw_and_calibrated_views_apart(calibrator) -> None:
    z, _ = overconfident(40, seed=12)
    out = calibrator.transform(z, labels=LABELS, model_id="run-1:BEST")
    np.testing.assert_array_equal(out.logits, z)
    np.testing.assert_array_equal(out.probabilities, softmax64(z))
    np.testing.assert_array_equal(out.calibrated_probabilities,
                                  softmax64(z / calibrator.temperature))
    assert out.decoded.tolist() == [LABELS[i] for i in z.argmax(axis=1)]
    assert out.labels == LABELS and out.sample_ids.tolist() == list(range(40))
    assert out.calibrator_id == calibrator.calibrator_id and out.override is None
    assert not out.calibrated_probabilities.flags.writeable


def test_raw_probabilities_are_a_temperature_1_calibrators(calibrator) -> None:
    z, _ = overconfident(40, seed=13)
    unit = TemperatureCalibrator(1.0, LABELS, "run-1:BEST", split=calibrator.split,
                                 config={}, fit={})
    out = unit.transform(z, labels=LABELS, model_id="run-1:BEST")
    np.testing.assert_array_equal(out.calibrated_probabilities, out.probabilities)


def test_a_prediction_supplies_labels_and_keeps_its_sample_ids(calibrator) -> None:
    z, _ = overconfident(6, seed=14)
    prediction = _prediction(z, ids=[7, 7, 3, 9, 1, 2])
    out = calibrator.transform(prediction, model_id="run-1:BEST")
    assert out.labels == LABELS and out.sample_ids.tolist() == [7, 7, 3, 9, 1, 2]
    np.testing.assert_array_equal(out.calibrated_probabilities,
                                  calibrator.transform(z, labels=LABELS, model_id="run-1:BEST")
                                  .calibrated_probabilities)
    with pytest.raises(CalibrationError, match="sample_ids= must equal"):
        calibrator.transform(prediction, model_id="run-1:BEST", sample_ids=[0, 1, 2, 3, 4, 5])
    with pytest.raises(CalibrationError, match="differ from the prediction"):
        calibrator.transform(prediction, labels=("dog", "cat", "fox"), model_id="run-1:BEST")


def test_tensors_are_read_like_arrays(calibrator) -> None:
    z, _ = overconfident(5, seed=15)
    a = calibrator.transform(z, labels=LABELS, model_id="run-1:BEST")
    b = calibrator.transform(torch.from_numpy(z), labels=LABELS, model_id="run-1:BEST")
    np.testing.assert_array_equal(a.calibrated_probabilities, b.calibrated_probabilities)


@pytest.mark.parametrize(("labels", "model_id", "override", "field"), [
    (("dog", "cat", "fox"), "run-1:BEST", "label_order", "labels"),
    (("a", "b", "c"), "run-1:BEST", "label_names", "labels"),
    (LABELS, "run-2:BEST", "model_id", "model_id"),
])
def test_a_mismatch_is_refused_before_any_read_unless_its_override_is_named(
        calibrator, labels, model_id, override, field) -> None:
    reads = Untouchable.reads
    for call in (lambda **kw: calibrator.transform(Untouchable(), **kw),
                 lambda **kw: calibrator.report(Untouchable(), [0], split_id="test", **kw)):
        with pytest.raises(CalibrationMismatchError, match=override):
            call(labels=labels, model_id=model_id)
    assert Untouchable.reads == reads
    z, t = overconfident(20, seed=16)
    out = calibrator.transform(z, labels=labels, model_id=model_id, override=override)
    assert out.override["accepted"] == [override]
    [mismatch] = out.override["mismatches"]
    assert mismatch["field"] == field
    expected = list(LABELS) if field == "labels" else "run-1:BEST"
    actual = list(labels) if field == "labels" else model_id
    assert (mismatch["expected"], mismatch["actual"]) == (expected, actual)
    report = calibrator.report(z, t, split_id="test", labels=labels, model_id=model_id,
                               override=override)
    assert report.override == out.override and "override" in report.summary()


def test_a_different_class_count_is_never_accepted(calibrator) -> None:
    with pytest.raises(CalibrationMismatchError, match="never accepted"):
        calibrator.transform(Untouchable(), labels=("a", "b"), model_id="run-1:BEST",
                             override=("label_names", "label_order", "model_id"))


def test_an_unknown_override_or_a_missing_model_id_is_refused(calibrator) -> None:
    with pytest.raises(CalibrationError, match="override must name"):
        calibrator.transform(Untouchable(), labels=LABELS, model_id="x", override="anything")
    with pytest.raises(CalibrationError, match="model_id="):
        calibrator.transform(Untouchable(), labels=LABELS)


@pytest.mark.parametrize("split_id", ["cal", "train"])
def test_report_refuses_the_calibration_and_training_split(calibrator, split_id) -> None:
    role = "calibration" if split_id == "cal" else "train"
    with pytest.raises(CalibrationError, match=f"the {role} split"):
        calibrator.report(Untouchable(), [0], split_id=split_id, labels=LABELS,
                          model_id="run-1:BEST")


def test_the_calibrator_records_unverified_disjointness(calibrator) -> None:
    assert calibrator.split["disjointness"] == "unverified"
    assert "no guarantee" in calibrator.split["note"]
    assert (calibrator.split["calibration"], calibrator.split["train"],
            calibrator.split["test"]) == ("cal", "train", "test")


def test_outcomes_worsened_and_unchanged_are_reported(calibrator) -> None:
    z, t = overconfident(300, seed=17, scale=0.5)  # under-confident: softening hurts
    report = calibrator.report(z, t, split_id="test", labels=LABELS, model_id="run-1:BEST")
    assert report.outcome == "worsened" and "keep the uncalibrated" in report.summary()
    unit = TemperatureCalibrator(1.0, LABELS, "run-1:BEST", split=calibrator.split,
                                 config={}, fit={})
    same = unit.report(z, t, split_id="test", labels=LABELS, model_id="run-1:BEST")
    assert same.outcome == "unchanged" and same.before == same.after


def _metrics(nll: float, brier: float) -> CalibrationMetrics:
    return CalibrationMetrics(nll=nll, brier=brier, ece=0.1, bins=())


@pytest.mark.parametrize("after, outcome, advice", [
    ((0.4, 0.2), "improved", "use the calibrated"),          # both better
    ((0.5, 0.2), "improved", "use the calibrated"),          # NLL tied, Brier better
    ((0.4, 0.3), "improved", "use the calibrated"),          # NLL better, Brier tied
    ((0.4, 0.5), "mixed", "disagree"),                       # NLL better, Brier worse
    ((0.6, 0.2), "mixed", "disagree"),                       # NLL worse, Brier better
    ((0.5, 0.3 + 1e-12), "worsened", "keep the uncalibrated"),  # NLL tied, Brier worse
    ((0.7, 0.4), "worsened", "keep the uncalibrated"),       # both worse
    ((0.5, 0.3), "unchanged", "changed neither"),            # both tied
], ids=["both-better", "nll-tie-brier-better", "nll-better-brier-tie", "nll-better-brier-worse",
        "nll-worse-brier-better", "nll-tie-brier-worse", "both-worse", "both-tied"])
def test_the_outcome_rule_with_ties(after, outcome, advice) -> None:
    """'improved' only when neither NLL nor Brier got worse and one got better."""
    before = _metrics(0.5, 0.3)
    report = CalibrationReport.compare(
        split_id="test", calibrator_id="c", model_id="m", labels=LABELS, temperature=1.5,
        rows=10, before=before, after=_metrics(*after))
    assert report.outcome == outcome and outcome in OUTCOMES
    assert advice in report.summary()
    assert CalibrationReport.from_json(report.to_json()).outcome == outcome
