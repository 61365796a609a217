"""CoverageAccumulator, select_threshold, risk_coverage_curve and nnx.abstention/1."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _decisions_data import LABELS, SPLITS, Untouchable, overconfident, untouchable_prediction

from nnx.abstention import (
    MAX_DEFAULT_CANDIDATES,
    AbstentionError,
    AbstentionPolicy,
    AbstentionSchemaError,
    CoverageAccumulator,
    risk_coverage_curve,
    select_threshold,
)
from nnx.calibration import CalibratedPrediction, fit_temperature
from nnx.extend import softmax64


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    z, t = overconfident(n, seed=seed, scale=1.5)
    return softmax64(z), t


POLICY = AbstentionPolicy("max_probability", 0.6, labels=LABELS, model_id="m")


@pytest.mark.parametrize("threshold", [0.6, 1.0])  # 1.0: zero accepted, chunked too
def test_the_accumulator_over_chunks_equals_the_eager_report(threshold) -> None:
    p, t = _data(100, seed=51)
    policy = AbstentionPolicy("max_probability", threshold, labels=LABELS, model_id="m")
    eager = policy.apply(p, labels=LABELS, model_id="m").report(t)
    acc = CoverageAccumulator()
    for lo in range(0, 100, 30):
        chunk = policy.apply(p[lo:lo + 30], labels=LABELS, model_id="m",
                             sample_ids=np.arange(lo, min(lo + 30, 100)))
        acc.add(chunk, t[lo:lo + 30])
    assert acc.report() == eager


def test_the_accumulator_refuses_a_repeated_id_by_default_and_changes_nothing() -> None:
    p, t = _data(20, seed=52)
    acc = CoverageAccumulator()
    acc.add(POLICY.apply(p[:10], labels=LABELS, model_id="m"), t[:10])
    before = acc.report()
    again = POLICY.apply(p[10:], labels=LABELS, model_id="m")  # default ids 0..9 again
    with pytest.raises(AbstentionError, match="seen before"):
        acc.add(again, t[10:])
    assert acc.report() == before
    within = POLICY.apply(p[:2], labels=LABELS, model_id="m", sample_ids=[50, 50])
    with pytest.raises(AbstentionError, match=r"\[50\]"):
        acc.add(within, t[:2])
    assert acc.report() == before
    lenient = CoverageAccumulator(allow_repeated_ids=True)
    lenient.add(POLICY.apply(p[:10], labels=LABELS, model_id="m"), t[:10])
    lenient.add(again, t[10:])
    assert lenient.report() == POLICY.apply(p, labels=LABELS, model_id="m",
                                            sample_ids=[*range(10), *range(10)]).report(t)


def test_the_accumulator_refuses_a_chunk_of_another_policy() -> None:
    p, t = _data(10, seed=53)
    acc = CoverageAccumulator()
    acc.add(POLICY.apply(p[:5], labels=LABELS, model_id="m"), t[:5])
    other = AbstentionPolicy("margin", 0.1, labels=LABELS, model_id="m")
    with pytest.raises(AbstentionSchemaError, match="same policy"):
        acc.add(other.apply(p[5:], labels=LABELS, model_id="m", sample_ids=range(5, 10)), t[5:])


def test_select_threshold_picks_the_highest_coverage_under_the_ceiling() -> None:
    # Scores 0.9, 0.8, 0.7, 0.6 (two-class max probabilities); row 2 (0.7) is wrong.
    p = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.6, 0.4]])
    t = np.array([0, 0, 1, 0])
    labels = ("no", "yes")
    selection = select_threshold(p, t, kind="max_probability", risk_ceiling=0.25,
                                 split_id="val", test_split_id="test", labels=labels,
                                 model_id="m")
    rows = [(c.threshold, c.accepted, c.incorrect, c.coverage, c.risk)
            for c in selection.candidates]
    assert rows == [(0.6, 4, 1, 1.0, 0.25), (0.7, 3, 1, 0.75, 1 / 3), (0.8, 2, 0, 0.5, 0.0),
                    (0.9, 1, 0, 0.25, 0.0)]
    policy = selection.require()
    assert selection.status == "ok" and policy.threshold == 0.6  # an actual score
    assert policy.tuning_split_id == "val" and policy.labels == labels
    tighter = select_threshold(p, t, kind="max_probability", risk_ceiling=0.2,
                               split_id="val", test_split_id="test", labels=labels,
                               model_id="m")
    assert tighter.require().threshold == 0.8
    none = select_threshold(p, np.array([1, 1, 0, 1]), kind="max_probability",
                            risk_ceiling=0.0, split_id="val", test_split_id="test",
                            labels=labels, model_id="m")
    assert none.status == "no_feasible_policy" and none.policy is None
    assert none.labels == labels and none.model_id == "m" and len(none.candidates) == 4
    with pytest.raises(AbstentionError, match="no candidate"):
        none.require()


# Ten rows, max probabilities 0.95 ... 0.51; rows scoring 0.9, 0.7 and 0.52 are wrong.
# threshold: accepted, incorrect (risk)  0.95: 1, 0 (0)    0.9: 2, 1 (1/2)   0.85: 3, 1 (1/3)
#   0.8: 4, 1 (1/4)  0.7: 5, 2 (2/5)  0.65: 6, 2 (1/3)  0.6: 7, 2 (2/7)  0.55: 8, 2 (1/4)
#   0.52: 9, 3 (1/3)  0.51: 10, 3 (3/10)
_SCORES = (0.95, 0.9, 0.85, 0.8, 0.7, 0.65, 0.6, 0.55, 0.52, 0.51)
_WRONG = (0.9, 0.7, 0.52)


def _at_coverage(min_coverage: float, **kwargs) -> object:
    p = np.array([[s, 1.0 - s] for s in _SCORES])
    t = np.array([1 if s in _WRONG else 0 for s in _SCORES])
    return select_threshold(p, t, kind="max_probability", min_coverage=min_coverage,
                            split_id="val", test_split_id="test", labels=("no", "yes"),
                            model_id="m", **kwargs)


@pytest.mark.parametrize(("min_coverage", "threshold", "risk", "coverage"), [
    (0.9, 0.51, 0.3, 1.0),     # 0.52 keeps 0.9 too, at 1/3: the lower threshold is safer
    (0.7, 0.55, 0.25, 0.8),    # 2/7, 1/4, 1/3, 3/10 kept: 1/4 is the lowest
    (0.4, 0.55, 0.25, 0.8),    # 1/4 at 0.8 (coverage 0.4) ties 2/8 at 0.55: more coverage
    (0.1, 0.95, 0.0, 0.1),     # every candidate keeps 0.1: risk 0 wins
    (0.0, 0.95, 0.0, 0.1),
])
def test_min_coverage_picks_the_lowest_risk_keeping_that_coverage(min_coverage, threshold,
                                                                   risk, coverage) -> None:
    selection = _at_coverage(min_coverage)
    chosen = selection.require()
    assert selection.status == "ok" and chosen.threshold == threshold
    point = next(c for c in selection.candidates if c.threshold == threshold)
    assert (point.risk, point.coverage) == (risk, coverage)
    assert selection.min_coverage == min_coverage and selection.risk_ceiling is None
    assert chosen.tuning_split_id == "val" and len(selection.candidates) == 10


def test_min_coverage_breaks_a_full_tie_by_the_lowest_threshold_and_can_find_none() -> None:
    # 0.53, 0.54 and 0.55 accept the same eight rows (same coverage, same risk).
    tie = _at_coverage(0.8, candidates=[0.55, 0.53, 0.54])
    assert tie.require().threshold == 0.53
    # No candidate keeps half the rows (0.9: 0.2, 0.95: 0.1); and a candidate accepting
    # nothing keeps coverage 0 but has no risk to minimize, so it is never chosen.
    for none in (_at_coverage(0.5, candidates=[0.9, 0.95]),
                 _at_coverage(0.0, candidates=[0.99])):
        assert none.status == "no_feasible_policy" and none.policy is None
        assert none.labels == ("no", "yes") and none.candidates
        with pytest.raises(AbstentionError, match="coverage of at least"):
            none.require()


@pytest.mark.parametrize(("criteria", "match"), [
    ({}, "exactly one criterion"),
    ({"risk_ceiling": 0.1, "min_coverage": 0.9}, "exactly one criterion"),
    ({"min_coverage": 1.5}, "min_coverage"),
    ({"min_coverage": float("nan")}, "min_coverage"),
])
def test_select_threshold_refuses_a_bad_criterion_before_any_read(criteria, match) -> None:
    reads = Untouchable.reads
    with pytest.raises(AbstentionError, match=match):
        select_threshold(Untouchable(), [0], kind="margin", split_id="val",
                         test_split_id="test", labels=LABELS, model_id="m", **criteria)
    assert Untouchable.reads == reads


def test_select_threshold_refuses_the_test_split_before_any_read() -> None:
    reads = Untouchable.reads
    with pytest.raises(AbstentionError, match="is the test split"):
        select_threshold(Untouchable(), [0], kind="margin", risk_ceiling=0.1,
                         split_id="test", test_split_id="test", labels=LABELS, model_id="m")
    with pytest.raises(AbstentionError, match="risk_ceiling"):
        select_threshold(Untouchable(), [0], kind="margin", risk_ceiling=1.5,
                         split_id="val", test_split_id="test", labels=LABELS, model_id="m")
    assert Untouchable.reads == reads


def _untouchable_calibrated(model_id: str = "m") -> CalibratedPrediction:
    """A CalibratedPrediction whose declarations are real and whose values fail the test
    when read."""
    return CalibratedPrediction(
        logits=Untouchable(), probabilities=Untouchable(),  # type: ignore[arg-type]
        calibrated_probabilities=Untouchable(), decoded=Untouchable(),  # type: ignore[arg-type]
        class_indices=Untouchable(), labels=LABELS,  # type: ignore[arg-type]
        sample_ids=Untouchable(), calibrator_id="0" * 64,  # type: ignore[arg-type]
        model_id=model_id)


@pytest.mark.parametrize(("data", "kwargs", "error", "match"), [
    (Untouchable, {"kind": "entropy"}, AbstentionError, "kind"),
    (Untouchable, {"candidates": [0.5, 1.5]}, AbstentionError, "candidates="),
    (Untouchable, {"candidates": []}, AbstentionError, "candidates="),
    (Untouchable, {"candidates": [float("nan")]}, AbstentionError, "candidates="),
    (Untouchable, {"candidates": [-0.1]}, AbstentionError, "candidates="),
    (lambda: untouchable_prediction(("dog", "cat", "fox")), {}, AbstentionSchemaError,
     "differ from the prediction"),                                   # other labels
    (untouchable_prediction, {"model_id": None}, AbstentionSchemaError, "model_id="),
    (lambda: _untouchable_calibrated("m2"), {"input_field": "calibrated_probabilities"},
     AbstentionSchemaError, "differs from the prediction"),           # another model
    (_untouchable_calibrated, {"input_field": "logits"}, AbstentionSchemaError,
     "input_field"),
    (_untouchable_calibrated, {}, AbstentionError, "input_field="),
], ids=["kind", "candidate-above-1", "no-candidates", "nan-candidate", "negative-candidate",
        "prediction-other-labels", "prediction-no-model", "calibrated-other-model",
        "calibrated-bad-field", "calibrated-no-field"])
@pytest.mark.parametrize("tune", ["select_threshold", "risk_coverage_curve"])
def test_threshold_tuning_refuses_before_any_probability_is_read(data, kwargs, error, match,
                                                                 tune) -> None:
    args = {"kind": "margin", "labels": LABELS, "model_id": "m", **kwargs}
    if tune == "select_threshold":
        args.update(risk_ceiling=0.2, split_id="val", test_split_id="test")
        call = select_threshold
    else:
        call = risk_coverage_curve
    reads = Untouchable.reads
    with pytest.raises(error, match=match):
        call(data(), [0, 1, 2, 0], **args)
    assert Untouchable.reads == reads


def test_a_calibrated_prediction_needs_input_field_and_records_its_calibrator() -> None:
    z, t = overconfident(200, seed=54)
    calibrator = fit_temperature(z, t, LABELS, model_id="m", **SPLITS).require()
    zv, tv = overconfident(100, seed=55)
    prediction = calibrator.transform(zv, labels=LABELS, model_id="m")
    with pytest.raises(AbstentionError, match="input_field="):
        select_threshold(prediction, tv, kind="margin", risk_ceiling=0.2, split_id="val",
                         test_split_id="test")
    selection = select_threshold(prediction, tv, kind="margin", risk_ceiling=0.2,
                                 split_id="val", test_split_id="test",
                                 input_field="calibrated_probabilities")
    assert selection.calibrator_id == calibrator.calibrator_id
    policy = selection.require()
    assert policy.calibrator_id == calibrator.calibrator_id
    assert policy.apply(prediction).report(tv).selective_risk <= 0.2
    assert selection.calibration_override is None  # no override was accepted


def test_a_calibration_override_travels_on_a_selection_tuned_on_the_calibrated_view() -> None:
    z, t = overconfident(200, seed=54)
    calibrator = fit_temperature(z, t, LABELS, model_id="m", **SPLITS).require()
    zv, tv = overconfident(100, seed=55)
    # Served for another model's logits, accepted by the named override (spec §18).
    prediction = calibrator.transform(zv, labels=LABELS, model_id="m2", override="model_id")
    assert prediction.override is not None
    wrong = (prediction.class_indices + 1) % 3  # every row wrong: nothing feasible
    for targets, status in ((tv, "ok"), (wrong, "no_feasible_policy")):
        selection = select_threshold(prediction, targets, kind="margin", risk_ceiling=0.2,
                                     split_id="val", test_split_id="test",
                                     input_field="calibrated_probabilities")
        assert selection.status == status
        assert selection.calibration_override == dict(prediction.override)
        assert selection.calibrator_id == calibrator.calibrator_id


def test_default_candidates_are_distinct_scores_up_to_1001_then_order_statistics() -> None:
    assert MAX_DEFAULT_CANDIDATES == 1001
    for n, expected in ((1001, 1001), (1002, 1001), (5000, 1001), (40, 40)):
        rng = np.random.default_rng(n)
        top = rng.uniform(0.5, 1.0, size=n)
        p = np.stack([top, 1.0 - top], axis=1)
        t = rng.integers(0, 2, size=n)
        curve = risk_coverage_curve(p, t, kind="max_probability", labels=("a", "b"),
                                    model_id="m")
        thresholds = [c.threshold for c in curve.points[:-1]]
        assert len(thresholds) == expected
        assert set(thresholds) <= set(top.tolist())  # each an actual score
        assert thresholds[0] == top.min() and thresholds[-1] == top.max()
    explicit = risk_coverage_curve(p, t, kind="max_probability", labels=("a", "b"),
                                   model_id="m", candidates=[0.9, 0.55, 0.9])
    assert [c.threshold for c in explicit.points] == [0.55, 0.9, None]


def test_the_curve_ascends_coverage_never_rises_and_ends_accept_none() -> None:
    p, t = _data(300, seed=56)
    curve = risk_coverage_curve(p, t, kind="margin", labels=LABELS, model_id="m")
    thresholds = [c.threshold for c in curve.points[:-1]]
    assert thresholds == sorted(thresholds)
    coverage = [c.coverage for c in curve.points]
    assert (np.diff(coverage) <= 0).all()
    end = curve.endpoint
    assert (end.threshold, end.accepted, end.coverage, end.risk) == (None, 0, 0.0, None)
    for c in curve.points[:-1]:  # each point measured, as a policy at it would report
        report = AbstentionPolicy("margin", c.threshold, labels=LABELS, model_id="m").apply(
            p, labels=LABELS, model_id="m").report(t)
        assert (report.coverage, report.selective_risk) == (c.coverage, c.risk)


def test_a_policy_round_trips_as_nnx_abstention_1_and_refuses_a_bad_threshold(tmp_path) -> None:
    policy = AbstentionPolicy("margin", 0.49999999999999994, labels=LABELS, model_id="m",
                              tuning_split_id="val")
    policy.save(tmp_path / "policy.json")
    again = AbstentionPolicy.load(tmp_path / "policy.json")
    assert again == policy and again.threshold == 0.49999999999999994
    doc = json.loads(policy.to_json())
    assert doc["format"] == "nnx.abstention/1"
    for bad in (1.5, -0.01, None):
        with pytest.raises(AbstentionError, match=r"threshold must be a real in \[0, 1\]"):
            AbstentionPolicy.from_json(json.dumps({**doc, "threshold": bad}))
    with pytest.raises(AbstentionError, match=r"not a nnx\.abstention/1"):
        AbstentionPolicy.from_json(json.dumps({**doc, "format": "nnx.calibration/1"}))


def test_calibrated_view_refusals_come_before_any_probability_is_read() -> None:
    untouchable = CalibratedPrediction(
        logits=Untouchable(), probabilities=Untouchable(),
        calibrated_probabilities=Untouchable(), decoded=Untouchable(),
        class_indices=Untouchable(), labels=LABELS, sample_ids=Untouchable(),
        calibrator_id="c" * 64, model_id="m")
    reads = Untouchable.reads
    with pytest.raises(AbstentionError, match="input_field="):
        select_threshold(untouchable, [0], kind="margin", risk_ceiling=0.2, split_id="val",
                         test_split_id="test")
    with pytest.raises(AbstentionError, match="input_field="):
        risk_coverage_curve(untouchable, [0], kind="margin")
    other = AbstentionPolicy("margin", 0.2, labels=LABELS, model_id="m",
                             input_field="calibrated_probabilities", calibrator_id="d" * 64)
    with pytest.raises(AbstentionSchemaError, match="calibrator_id"):
        other.apply(untouchable)
    with pytest.raises(AbstentionSchemaError, match="model_id"):
        AbstentionPolicy("margin", 0.2, labels=LABELS, model_id="n").apply(untouchable)
    assert Untouchable.reads == reads
