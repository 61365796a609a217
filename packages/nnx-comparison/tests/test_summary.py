"""summarize (spec §23): statistics, counted attempts, stratification and pooling."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _observations import LOSS, obs

from nnx.comparison import (
    DuplicateObservationError,
    Metric,
    Observation,
    PoolingError,
    summarize,
)


def test_mean_and_std_equal_numpys_on_completed_finite_values():
    values = [0.31, 0.27, 0.35, 0.29, 0.4]
    group = summarize([obs(f"r{i}", v) for i, v in enumerate(values)]).pooled()
    assert group.n == 5 and group.n_attempts == 5
    assert group.mean == float(np.mean(values))
    assert group.std == float(np.std(values, ddof=1))


def test_failed_and_nonfinite_attempts_are_counted_and_listed_never_dropped():
    items = [obs("a", 1.0), obs("b", 2.0), obs("c", 4.0), obs("d", 0.5, status="failed"),
             obs("e", math.nan), obs("f", math.inf), obs("g", None, status="cancelled"),
             obs("h", 3.0, status="unknown")]
    group = summarize(items).pooled()
    assert group.observations == tuple(items)  # every attempt stays, in input order
    assert group.n == 3 and group.mean == float(np.mean([1.0, 2.0, 4.0]))
    assert group.std == float(np.std([1.0, 2.0, 4.0], ddof=1))
    assert group.n_attempts == 8
    assert group.n_failed == 1 and [o.run_id for o in group.failed] == ["d"]
    assert group.n_nonfinite == 2 and [o.run_id for o in group.nonfinite] == ["e", "f"]
    assert [o.run_id for o in group.not_completed] == ["d", "g", "h"]


def test_one_value_has_no_std_and_none_has_no_mean():
    one = summarize([obs("a", 0.5), obs("b", 0.7, status="failed")]).pooled()
    assert (one.n, one.mean, one.std) == (1, 0.5, None)
    none = summarize([obs("a", math.nan)]).pooled()
    assert (none.n, none.mean, none.std, none.n_nonfinite) == (0, None, None, 1)


@pytest.mark.parametrize(("field", "other"), [
    ("config", {"config": "B"}), ("split", {"split": "train"}),
    ("selection", {"selection": "best:val.loss:min"}), ("data", {"data": "sha256:x"}),
    ("split_id", {"split_id": "declared:v2"}),
    ("metric", {"metric": Metric("loss", "min", unit="nats")})])
def test_observations_that_differ_are_stratified_with_the_field_named(field, other):
    items = [obs("a", 1.0), obs("b", 2.0), obs("c", 3.0, **other)]
    summary = summarize(items)
    assert [len(g.observations) for g in summary] == [2, 1]
    assert summary.differing == (field,)
    assert all(g.differing == (field,) for g in summary)
    with pytest.raises(PoolingError, match=field):
        summary.pooled()


def test_unknown_identities_never_pool_with_known_ones_and_unknown_configs_with_nothing():
    known_unknown = summarize([obs("a", 1.0, data="sha256:d"), obs("b", 2.0, data=None)])
    assert len(known_unknown) == 2 and known_unknown.differing == ("data",)
    unknown = summarize([obs("a", 1.0, config=None), obs("b", 2.0, config=None)])
    assert len(unknown) == 2 and unknown.differing == ("config",)
    with pytest.raises(PoolingError, match="config"):
        unknown.pooled()


def test_a_duplicate_attempt_per_metric_is_refused_even_on_another_split():
    with pytest.raises(DuplicateObservationError, match="one observation per attempt"):
        summarize([obs("a", 1.0), obs("a", 2.0, split="train")])
    other = obs("a", 1.0, metric=Metric("accuracy", "max"))
    assert len(summarize([obs("a", 1.0), other])) == 2  # another metric is fine


def test_refusals_name_what_is_wrong():
    with pytest.raises(TypeError, match=r"observations\[1\]"):
        summarize([obs("a", 1.0), 2.0])
    with pytest.raises(ValueError, match="direction"):
        Metric("loss", "down")
    with pytest.raises(ValueError, match="status"):
        Observation(run_id="a", attempt_id=None, metric=LOSS, value=1.0, status="done")
    with pytest.raises(ValueError, match="value"):
        Observation("a", None, LOSS, True)
    with pytest.raises(PoolingError, match="no observations"):
        summarize([]).pooled()
