"""The calibration metrics (spec §18) against the named metrics of §6.4 and by hand."""

from __future__ import annotations

import numpy as np
import pytest
from _decisions_data import overconfident

from nnx.calibration import (
    CalibrationError,
    brier_score,
    expected_calibration_error,
    negative_log_likelihood,
    reliability_bins,
)
from nnx.extend import softmax64
from nnx.metrics import MetricSpec, resolve_metric


def _named(name: str, probabilities: np.ndarray, targets: np.ndarray) -> float:
    metric = resolve_metric(MetricSpec(name)).factory({})
    metric.update(targets, probabilities)
    return float(metric.result())


def test_nll_and_brier_equal_the_named_metrics_on_the_same_probabilities() -> None:
    z, t = overconfident(500, seed=21, scale=1.0)
    p = softmax64(z)
    assert negative_log_likelihood(p, t) == _named("nll", p, t)
    assert brier_score(p, t) == _named("brier", p, t)


def test_nll_floors_at_1e_12_by_default_and_is_exact_with_none() -> None:
    p = np.array([[1.0, 0.0], [0.5, 0.5]])
    t = np.array([1, 0])
    assert negative_log_likelihood(p, t) == pytest.approx((-np.log(1e-12) + np.log(2)) / 2)
    assert negative_log_likelihood(p, t, epsilon=None) == np.inf


def test_brier_is_the_mean_class_summed_squared_error_in_0_2() -> None:
    p = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    assert brier_score(p, np.array([1, 1, 0])) == pytest.approx((2.0 + 0.0 + 0.5) / 3)
    assert brier_score(np.array([[1.0, 0.0]]), np.array([1])) == 2.0


def test_a_value_on_an_inner_edge_goes_in_the_upper_bin_and_empty_bins_stay() -> None:
    # Top-1 confidences 0.5 (an inner edge of 10 bins), 0.7 and 1.0 (the closed end).
    p = np.array([[0.5, 0.5], [0.3, 0.7], [0.0, 1.0]])
    bins = reliability_bins(p, np.array([0, 0, 1]), n_bins=10)
    assert len(bins) == 10 and [b.lo for b in bins][5] == 0.5
    assert [b.count for b in bins] == [0, 0, 0, 0, 0, 1, 0, 1, 0, 1]
    assert bins[5].mean_confidence == 0.5 and bins[5].accuracy == 1.0  # tie -> class 0
    assert bins[7].accuracy == 0.0 and bins[9].mean_confidence == 1.0
    assert bins[0].mean_confidence is None and bins[0].accuracy is None
    assert bins[9].hi == 1.0


def test_ece_is_the_count_weighted_gap() -> None:
    p = np.array([[0.5, 0.5], [0.3, 0.7], [0.0, 1.0]])
    ece = expected_calibration_error(p, np.array([0, 0, 1]), n_bins=10)
    assert ece == pytest.approx((abs(1 - 0.5) + abs(0 - 0.7) + abs(1 - 1.0)) / 3)


@pytest.mark.parametrize(("p", "t", "match"), [
    (np.array([[0.5, 0.6]]) * 2, [0], r"\[0, 1\]"),
    (np.array([[np.nan, 1.0]]), [0], "non-finite"),
    (np.array([[0.5, 0.5]]), [2], "out of range"),
    (np.zeros((0, 2)), np.zeros(0, dtype=np.int64), "at least one row"),
])
def test_the_metrics_refuse_malformed_input(p, t, match) -> None:
    with pytest.raises(CalibrationError, match=match):
        brier_score(p, np.asarray(t))


@pytest.mark.parametrize("metric", [negative_log_likelihood, expected_calibration_error,
                                    brier_score, reliability_bins])
def test_the_metrics_refuse_rows_that_do_not_sum_to_1_and_leave_the_input_alone(metric) -> None:
    # Row 1 sums to 2 (each entry in [0, 1]): not a distribution, so no metric reads it,
    # and nothing is renormalized in place.
    p = np.array([[0.25, 0.75], [1.0, 1.0], [0.5, 0.5]])
    before = p.copy()
    with pytest.raises(CalibrationError, match=r"rows \[1\] do not sum to 1"):
        metric(p, np.array([1, 0, 0]))
    assert np.array_equal(p, before)


def test_rows_off_by_float32_rounding_still_count_as_distributions() -> None:
    p = np.array([[0.1, 0.2, 0.7]], dtype=np.float32).astype(np.float64)
    assert negative_log_likelihood(p, np.array([2])) == pytest.approx(-np.log(0.7), rel=1e-6)
