"""compare (spec §23): B - A per replicate, unmatched and incomplete pairs, the bootstrap."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from _observations import obs, side

from nnx.comparison import Bootstrap, PairingError, compare, summarize

PAIRING = "seed: the same data order and split"


def test_delta_is_b_minus_a_and_negative_means_b_is_lower_for_a_metric_to_minimize():
    a, b = side("A", [0.5, 0.6, 0.7]), side("B", [0.4, 0.5, 0.65])
    result = compare(a, b, pairing=PAIRING)
    assert [p.delta for p in result.pairs] == [0.4 - 0.5, 0.5 - 0.6, 0.65 - 0.7]
    assert result.mean < 0 and result.metric.direction == "min"  # B is lower: B is better
    deltas = [0.4 - 0.5, 0.5 - 0.6, 0.65 - 0.7]
    assert result.mean == float(np.mean(deltas))
    assert result.std == float(np.std(deltas, ddof=1))
    flipped = compare(b, a, pairing=PAIRING)
    assert [p.delta for p in flipped.pairs] == [0.5 - 0.4, 0.6 - 0.5, 0.7 - 0.65]


def test_unmatched_replicates_are_listed_and_failed_sides_have_no_delta():
    a = side("A", [0.5, 0.6, 0.7], seeds=[0, 1, 2])
    b = side("B", [0.4, 0.5, 0.3], seeds=[1, 2, 3])
    b[1] = obs("B2", 0.5, seed=2, config="B", status="failed")
    result = compare(a, b, pairing=PAIRING)
    assert [(p.replicate, p.status) for p in result.pairs] == [("seed=1", "ok"),
                                                               ("seed=2", "incomplete")]
    assert result.pairs[1].delta is None and result.n == 1 and result.n_incomplete == 1
    assert [(u.replicate, u.side) for u in result.unmatched] == [("seed=0", "a"),
                                                                  ("seed=3", "b")]


def test_a_delta_that_overflows_is_counted_not_averaged():
    a = [obs("a0", -1e308, seed=0), obs("a1", 1.0, seed=1)]
    b = [obs("b0", 1e308, seed=0, config="B"), obs("b1", 2.0, seed=1, config="B")]
    result = compare(a, b, pairing=PAIRING)
    assert [p.status for p in result.pairs] == ["nonfinite", "ok"]
    assert result.n_nonfinite == 1 and result.n == 1 and result.mean == 1.0


def test_the_sides_must_be_one_group_agreeing_on_everything_but_the_configuration():
    a, b = side("A", [0.5, 0.6]), side("B", [0.4, 0.5])
    with pytest.raises(PairingError, match="side A is not one poolable group"):
        compare([*a, obs("x", 1.0, seed=9, config="C")], b, pairing=PAIRING)
    with pytest.raises(PairingError, match="split"):
        compare(a, [obs("b0", 1.0, seed=0, config="B", split="train")], pairing=PAIRING)
    with pytest.raises(PairingError, match="twice"):
        compare([obs("a0", 1.0, seed=0), obs("a1", 1.0, seed=0)], b, pairing=PAIRING)
    with pytest.raises(PairingError, match="no replicate key"):
        compare([obs("a0", 1.0)], b, pairing=PAIRING)
    with pytest.raises(PairingError, match="pairing="):
        compare(a, b, pairing=" ")
    # A pooled group is accepted as a side as it is.
    assert compare(summarize(a).pooled(), b, pairing=PAIRING).n == 2


def test_the_bootstrap_is_deterministic_for_a_seed_and_never_touches_global_rng():
    a = side("A", [0.50, 0.61, 0.72, 0.55, 0.66])
    b = side("B", [0.41, 0.52, 0.70, 0.50, 0.60])
    random.seed(1)
    np.random.seed(1)
    before = (random.getstate(), np.random.get_state()[1].copy())
    first = compare(a, b, pairing=PAIRING, bootstrap=Bootstrap(seed=7, resamples=500))
    again = compare(a, b, pairing=PAIRING, bootstrap=Bootstrap(seed=7, resamples=500))
    assert random.getstate() == before[0]
    assert np.array_equal(np.random.get_state()[1], before[1])
    assert first.interval == again.interval
    iv = first.interval
    assert iv.low <= first.mean <= iv.high and (iv.seed, iv.resamples, iv.method) == (
        7, 500, "percentile")
    other = compare(a, b, pairing=PAIRING, bootstrap=Bootstrap(seed=8, resamples=500))
    assert other.interval != first.interval
    one = compare(a[:1], b[:1], pairing=PAIRING, bootstrap=Bootstrap(seed=7))
    assert one.interval is None  # one pair has no spread to resample
    with pytest.raises(ValueError, match="level"):
        Bootstrap(seed=0, level=1.0)
    assert math.isfinite(iv.low)
