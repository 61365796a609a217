"""fit_temperature (spec §18): the NLL-minimizing temperature, failed fits, refusals."""

from __future__ import annotations

import numpy as np
import pytest
from _decisions_data import LABELS, SPLITS, Untouchable, overconfident, untouchable_prediction

from nnx.calibration import (
    CalibrationError,
    CalibrationFitError,
    fit_temperature,
    negative_log_likelihood,
)
from nnx.extend import softmax64


def _fit(logits, targets, **kw):
    return fit_temperature(logits, targets, LABELS, model_id="m", **{**SPLITS, **kw})


def test_the_fitted_temperature_is_scipys_minimizer_of_the_split_nll() -> None:
    optimize = pytest.importorskip("scipy.optimize")
    z, t = overconfident(600, seed=1)
    fit = _fit(z, t)
    assert fit.ok and fit.reason is None

    def nll(temperature: float) -> float:
        return negative_log_likelihood(softmax64(z / temperature), t, epsilon=None)

    best = optimize.minimize_scalar(nll, bounds=(1e-3, 1e3), method="bounded",
                                    options={"xatol": 1e-10})
    assert fit.temperature == pytest.approx(best.x, abs=1e-6)
    assert fit.temperature > 1.5  # over-confident: the fit softens it
    assert nll(fit.temperature) <= nll(fit.temperature * (1 + 1e-6))
    assert nll(fit.temperature) <= nll(fit.temperature * (1 - 1e-6))


def test_the_argmax_never_changes_and_the_test_report_improves() -> None:
    z, t = overconfident(600, seed=1)
    calibrator = _fit(z, t).require()
    z_test, t_test = overconfident(800, seed=2)
    out = calibrator.transform(z_test, labels=LABELS, model_id="m")
    assert np.array_equal(out.calibrated_probabilities.argmax(axis=1), z_test.argmax(axis=1))
    assert np.array_equal(out.class_indices, z_test.argmax(axis=1))
    report = calibrator.report(z_test, t_test, split_id="test", labels=LABELS, model_id="m")
    assert report.outcome == "improved"
    assert report.after.nll < report.before.nll and report.after.brier < report.before.brier
    assert "improved" in report.summary()


def test_the_fit_runs_on_a_copy() -> None:
    z, t = overconfident(50, seed=3)
    before = z.copy()
    _fit(z, t)
    assert np.array_equal(z, before)


@pytest.mark.parametrize(("make", "reason"), [
    (lambda z, t: (np.eye(3)[t] * 5.0, t), "separable"),
    (lambda z, t: (np.zeros_like(z), t), "constant_logits"),
    (lambda z, t: (-z, t), "no_better_than_uniform"),
])
def test_a_split_without_an_interior_optimum_fails_with_its_reason(make, reason) -> None:
    z, t = make(*overconfident(90, seed=4))
    fit = _fit(z, t)
    assert not fit.ok and fit.reason == reason and fit.calibrator is None
    assert fit.temperature is None  # never NaN, never the boundary
    with pytest.raises(CalibrationFitError, match=reason):
        fit.require()


def test_a_search_that_does_not_converge_fails_not_converged() -> None:
    z, t = overconfident(90, seed=4)
    fit = _fit(z, t, max_iterations=3)
    assert fit.reason == "not_converged" and fit.iterations == 3
    with pytest.raises(CalibrationFitError, match="not_converged"):
        fit.require()


def test_an_optimum_outside_the_search_range_fails_naming_it() -> None:
    z, t = overconfident(200, seed=5)
    assert _fit(z, t, max_temperature=1.5).reason == "above_max_temperature"
    assert _fit(z * 100, t, min_temperature=100.0, max_temperature=1e4).ok
    assert _fit(z / 1e4, t, min_temperature=1.0).reason == "below_min_temperature"


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"split_id": "train"}, "training split"),
    ({"split_id": "test"}, "test split"),
    ({"split_id": ""}, "split_id"),
    ({"model_id": ""}, "model_id"),
    ({"min_temperature": 0.0}, "min_temperature"),
    ({"min_temperature": 5.0, "max_temperature": 2.0}, "below max_temperature"),
    ({"labels": ("a", "a", "b")}, "duplicates"),
    ({"labels": None}, "labels= is required"),
])
def test_each_refusal_comes_before_any_logit_is_read(kwargs, match) -> None:
    args = {**SPLITS, "model_id": "m", "labels": LABELS, **kwargs}
    reads = Untouchable.reads
    with pytest.raises(CalibrationError, match=match):
        fit_temperature(Untouchable(), np.zeros(3, dtype=np.int64), **args)
    assert Untouchable.reads == reads


@pytest.mark.parametrize(("prediction", "match"), [
    (lambda: untouchable_prediction(regression=True), "categorical on axis 1; this one is "
                                                      "regression"),
    (lambda: untouchable_prediction(("dog", "cat", "fox")), "differ from the prediction"),
], ids=["regression", "other-labels"])
def test_a_prediction_result_is_refused_before_any_logit_is_read(prediction, match) -> None:
    reads = Untouchable.reads
    with pytest.raises(CalibrationError, match=match):
        fit_temperature(prediction(), np.zeros(4, dtype=np.int64), LABELS, model_id="m",
                        **SPLITS)
    assert Untouchable.reads == reads


@pytest.mark.parametrize(("logits", "targets", "match"), [
    (np.array([[0.0, np.nan, 1.0]]), [0], "non-finite"),
    (np.array([[0.0, np.inf, 1.0]]), [0], "non-finite"),
    (np.zeros((2, 1)), [0, 0], "C >= 2"),
    (np.zeros((2, 3)), [0, 3], "out of range"),
    (np.zeros((2, 3)), [0.0, 1.0], "integer"),
    (np.zeros((2, 2)), [0, 1], "labels name 3"),
])
def test_malformed_logits_and_targets_are_refused_never_masked(logits, targets, match) -> None:
    with pytest.raises(CalibrationError, match=match):
        _fit(logits, np.asarray(targets))


def _bisected_temperature(z: np.ndarray, t: np.ndarray) -> float:
    """The reference: the slope of the NLL in beta = 1 / T bisected to its zero."""
    zt = z[np.arange(t.size), t]

    def slope(beta: float) -> float:
        p = softmax64(beta * z)
        return float(np.mean((p * z).sum(axis=1) - zt))

    lo, hi = 1e-3, 1e3
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if slope(mid) < 0 else (lo, mid)
    return 1.0 / (0.5 * (lo + hi))


@pytest.mark.parametrize("seed", range(6))
def test_the_search_finds_the_bisection_temperature_in_few_steps(seed) -> None:
    """Newton steps inside the bracket reach the zero bisection reaches, to 1e-9, in a
    handful of passes over the logits (bisection alone needs about 50)."""
    rng = np.random.default_rng(seed)
    t = rng.integers(0, 3, 400)
    z = (rng.normal(size=(400, 3)) + rng.uniform(0.5, 2) * np.eye(3)[t]) * rng.uniform(0.1, 20)
    fit = _fit(z, t)
    assert fit.ok
    assert fit.temperature == pytest.approx(_bisected_temperature(z, t), rel=1e-9)
    assert fit.iterations <= 15
