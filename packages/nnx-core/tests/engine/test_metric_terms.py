"""nnx.metrics.terms: the one copy of the categorical NLL / Brier terms and the float64
softmax, which the named metrics average and nnx.extend hands to add-ons."""

from __future__ import annotations

import numpy as np
import torch

import nnx._foundation.hashing as hashing
import nnx.extend as extend
from nnx.metrics.registry import resolve_metric
from nnx.metrics.terms import METRIC_EPSILON, brier_terms, nll_terms, softmax64
from nnx.params.metric import MetricSpec


def _named(name: str, targets: np.ndarray, probabilities: np.ndarray) -> float:
    accumulator = resolve_metric(MetricSpec(name)).factory({})
    accumulator.update(targets, probabilities)
    return float(accumulator.result())


def test_the_named_metrics_average_exactly_these_terms() -> None:
    rng = np.random.default_rng(0)
    p = softmax64(rng.normal(size=(50, 4)) * 3)
    t = rng.integers(0, 4, size=50)
    assert _named("nll", t, p) == float(np.mean(nll_terms(p, t)))
    assert _named("brier", t, p) == float(np.mean(brier_terms(p, t)))


def test_nll_clips_by_default_and_is_exact_with_epsilon_none() -> None:
    p = np.array([[1.0, 0.0], [0.25, 0.75]])
    t = np.array([1, 1])
    clipped = nll_terms(p, t)
    assert clipped[0] == -np.log(METRIC_EPSILON) and clipped[1] == -np.log(0.75)
    exact = nll_terms(p, t, epsilon=None)
    assert exact[0] == np.inf and exact[1] == -np.log(0.75)
    assert nll_terms(p, t, epsilon=1e-12)[0] == -np.log(1e-12)


def test_brier_is_the_class_summed_squared_error_in_0_2() -> None:
    p = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    assert brier_terms(p, np.array([1, 1, 0])).tolist() == [2.0, 0.0, 0.5]


def test_softmax64_is_float64_on_a_copy_and_agrees_with_predict_proba() -> None:
    logits = np.array([[1000.0, 0.0, -1000.0], [0.1, 0.2, 0.3]])
    before = logits.copy()
    p = softmax64(logits)
    assert p.dtype == np.float64 and np.array_equal(logits, before)
    assert np.isfinite(p).all() and np.allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    torch_p = torch.softmax(torch.from_numpy(logits), dim=1).numpy()
    np.testing.assert_allclose(p, torch_p, rtol=1e-15, atol=1e-300)


def test_nnx_extend_hands_out_the_same_functions() -> None:
    assert extend.softmax64 is softmax64 and extend.nll_terms is nll_terms
    assert extend.brier_terms is brier_terms and extend.METRIC_EPSILON == METRIC_EPSILON
    assert extend.canonical_bytes is hashing.canonical_bytes
    assert extend.canonical_bytes({"b": 1.5, "a": [1]}) == b'{"a":[1],"b":1.5}'
