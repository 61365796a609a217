"""nnx.data_splits strategies (spec §13.3): group, chronological, stratified, explicit."""

from __future__ import annotations

import datetime as dt
import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nnx.data_splits import SplitError, SplitManifest, plan_split

IDS = [f"r{i:02d}" for i in range(40)]


def _members(plan: SplitManifest) -> dict[str, set[object]]:
    return {"train": set(plan.train), "val": set(plan.val), "test": set(plan.test)}


# -- group --------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(groups=st.lists(st.integers(0, 12), min_size=3, max_size=60),
       seed=st.integers(0, 2**64 - 1),
       proportions=st.sampled_from([(0.7, 0.15, 0.15), (0.5, 0.5, 0.0), (0.6, 0.2, 0.2),
                                    (1.0, 0.0, 0.0), (0.34, 0.33, 0.33)]))
def test_a_group_never_spans_two_splits(groups, seed, proportions):
    ids = list(range(len(groups)))
    active = sum(p > 0 for p in proportions)
    if len(set(groups)) < active:
        with pytest.raises(SplitError, match="at least one group per active split"):
            plan_split(ids, strategy="group", groups=groups, proportions=proportions, seed=seed)
        return
    plan = plan_split(ids, strategy="group", groups=groups, proportions=proportions, seed=seed)
    where = {}
    for name, members in _members(plan).items():
        for i in members:
            assert where.setdefault(groups[i], name) == name, "a group spans two splits"
    assert sorted((*plan.train, *plan.val, *plan.test)) == ids
    for name, p in zip(("train", "val", "test"), proportions, strict=True):
        assert bool(_members(plan)[name]) == (p > 0)  # the empty-split repair


def test_group_targets_with_equal_groups_are_exact_whatever_the_order():
    # 10 groups of 2 rows at (0.6, 0.2, 0.2): targets 12 / 4 / 4 rows, met exactly.
    groups = [i // 2 for i in range(20)]
    for seed in (0, 1, 7, 2**63):
        plan = plan_split(list(range(20)), strategy="group", groups=groups,
                          proportions=(0.6, 0.2, 0.2), seed=seed)
        assert (len(plan.train), len(plan.val), len(plan.test)) == (12, 4, 4)


def test_an_empty_active_split_takes_the_smallest_group_of_the_fullest_split():
    # Targets 2.94 / 0.03 / 0.03: every group first lands in train, then the repair
    # moves one single-row group to val and one to test.
    plan = plan_split(["a", "b", "c"], strategy="group", groups=[1, 2, 3],
                      proportions=(0.98, 0.01, 0.01), seed=3)
    assert (len(plan.train), len(plan.val), len(plan.test)) == (1, 1, 1)
    # The smallest group moves: the 5-row group stays in train.
    plan = plan_split(list(range(7)), strategy="group", groups=[9, 9, 9, 9, 9, 8, 7],
                      proportions=(0.98, 0.01, 0.01), seed=3)
    assert set(range(5)) <= set(plan.train)
    assert len(plan.val) == len(plan.test) == 1


def test_fewer_groups_than_active_splits_raise():
    with pytest.raises(SplitError, match="2 group"):
        plan_split(IDS[:4], strategy="group", groups=[0, 0, 1, 1],
                   proportions=(0.6, 0.2, 0.2), seed=0)


def test_the_same_ids_in_another_row_order_give_the_same_manifest():
    groups = [i % 9 for i in range(40)]
    labels = [("a", "b", "c")[i % 3] for i in range(40)]
    order = list(range(40))
    random.Random(5).shuffle(order)  # a private generator: the global one is untouched
    for kwargs in ({"strategy": "group", "groups": groups},
                   {"strategy": "stratified", "labels": labels}):
        plan = plan_split(IDS, proportions=(0.6, 0.2, 0.2), seed=11, **kwargs)
        key = "groups" if "groups" in kwargs else "labels"
        shuffled = {**kwargs, key: [kwargs[key][i] for i in order]}
        again = plan_split([IDS[i] for i in order], proportions=(0.6, 0.2, 0.2), seed=11,
                           **shuffled)
        assert again == plan and again.digest() == plan.digest()


# -- chronological ------------------------------------------------------------------------
def test_a_time_on_a_cutoff_starts_the_later_split():
    times = [1, 2, 3, 3, 4, 5, 5, 6]
    plan = plan_split(list(range(8)), strategy="chronological", times=times, cutoffs=(3, 5))
    assert plan.train == (0, 1) and plan.val == (2, 3, 4) and plan.test == (5, 6, 7)
    assert plan.seed is None


def test_gap_rows_are_excluded_before_each_cutoff():
    times = [1, 2, 3, 3, 4, 5, 5, 6]
    plan = plan_split(list(range(8)), strategy="chronological", times=times, cutoffs=(3, 5),
                      gap=1)
    assert plan.train == (0,) and plan.val == (2, 3) and plan.test == (5, 6, 7)
    assert plan.excluded == (1, 4)


@pytest.mark.parametrize("kind, make, gap", [
    ("number", lambda d: 0.5 * d, 0.5),
    ("date", lambda d: dt.date(2024, 1, 1) + dt.timedelta(days=d), dt.timedelta(days=1)),
    ("datetime", lambda d: dt.datetime(2024, 1, 1) + dt.timedelta(hours=d),
     dt.timedelta(hours=1)),
    ("datetime-tz", lambda d: dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
     + dt.timedelta(hours=d), dt.timedelta(hours=1)),
    ("datetime", lambda d: np.datetime64("2024-01-01T00:00") + np.timedelta64(d, "h"),
     dt.timedelta(hours=1)),
])
def test_every_time_kind_splits_and_replays(kind, make, gap):
    times = [make(d) for d in range(10)]
    cutoffs = (make(4), make(8))
    if isinstance(cutoffs[0], np.datetime64):
        cutoffs = tuple(c.astype("datetime64[us]").item() for c in cutoffs)
    plan = plan_split(list(range(10)), strategy="chronological", times=times,
                      cutoffs=cutoffs, gap=gap)
    assert plan.parameters["time_kind"] == kind
    assert plan.train == (0, 1, 2) and plan.val == (4, 5, 6) and plan.test == (8, 9)
    assert plan.excluded == (3, 7)
    loaded = SplitManifest.from_json(plan.to_json())
    assert loaded == plan
    assert loaded.replay(list(range(10)), times=times) is loaded


def test_a_none_cutoff_leaves_its_split_empty():
    times = list(range(10))
    no_test = plan_split(list(range(10)), strategy="chronological", times=times,
                         cutoffs=(7, None))
    assert no_test.val == (7, 8, 9) and no_test.test == ()
    no_val = plan_split(list(range(10)), strategy="chronological", times=times,
                        cutoffs=(None, 7))
    assert no_val.val == () and no_val.test == (7, 8, 9)


@pytest.mark.parametrize("kwargs, match", [
    ({"times": [1, dt.date(2024, 1, 1)], "cutoffs": (1, None)}, "mix kinds"),
    ({"times": [1, 2], "cutoffs": (dt.date(2024, 1, 1), None)}, "but the times are"),
    ({"times": [1, 2], "cutoffs": (2, 1)}, "in order"),
    ({"times": [1, float("nan")], "cutoffs": (1, None)}, "finite time"),
    ({"times": [dt.date(2024, 1, 1)] * 2, "cutoffs": (dt.date(2024, 1, 1), None),
      "gap": dt.timedelta(hours=1)}, "whole days"),
    ({"times": [1, 2], "cutoffs": (1, None), "gap": -1}, "gap"),
    ({"times": [1, 2], "cutoffs": (1, None)}, "train split empty"),
    ({"times": [1, 2], "cutoffs": (2, None), "seed": 3}, "takes no seed"),
])
def test_chronological_refusals(kwargs, match):
    with pytest.raises(SplitError, match=match):
        plan_split([0, 1], strategy="chronological", **kwargs)


def test_a_tz_aware_and_a_naive_datetime_do_not_mix():
    naive, aware = dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc)
    with pytest.raises(SplitError, match="mix kinds"):
        plan_split([0, 1], strategy="chronological", times=[naive, aware], cutoffs=(aware, None))


# -- stratified ---------------------------------------------------------------------------
def test_stratified_puts_every_class_in_every_active_split_within_one_row():
    labels = ["a"] * 23 + ["b"] * 11 + ["c"] * 6
    plan = plan_split(IDS, strategy="stratified", labels=labels, proportions=(0.7, 0.15, 0.15),
                      seed=4)
    label = dict(zip(IDS, labels, strict=True))
    for name, members in _members(plan).items():
        assert {label[i] for i in members} == {"a", "b", "c"}, name
    for members, p in zip(_members(plan).values(), (0.7, 0.15, 0.15), strict=True):
        assert abs(len(members) - 40 * p) <= 1


def test_a_small_class_raises_or_stays_in_training():
    labels = ["a"] * 10 + ["b"] * 2
    with pytest.raises(SplitError, match="class 'b' has 2 row"):
        plan_split(IDS[:12], strategy="stratified", labels=labels,
                   proportions=(0.6, 0.2, 0.2), seed=0)
    plan = plan_split(IDS[:12], strategy="stratified", labels=labels,
                      proportions=(0.6, 0.2, 0.2), seed=0, insufficient="train")
    assert {"r10", "r11"} <= set(plan.train)
    assert plan.parameters["train_only_classes"] == ["b"]
    assert plan.parameters["insufficient"] == "train"


def test_a_nan_label_is_refused():
    with pytest.raises(SplitError, match="non-finite"):
        plan_split([0, 1, 2], strategy="stratified", labels=[1.0, float("nan"), 1.0],
                   proportions=(1.0, 0.0, 0.0), seed=0)


# -- explicit, ids, seeds -----------------------------------------------------------------
def test_an_explicit_plan_records_the_given_members():
    plan = plan_split(["a", "b", "c", "d"], strategy="explicit",
                      members={"train": ["b", "a"], "val": ["c"], "excluded": ["d"]})
    assert plan.train == ("a", "b") and plan.val == ("c",) and plan.test == ()
    assert plan.excluded == ("d",)
    with pytest.raises(SplitError, match="train split empty"):
        plan_split(["a"], strategy="explicit", members={"train": [], "val": ["a"]})
    with pytest.raises(SplitError, match="cover exactly"):
        plan_split(["a", "b"], strategy="explicit", members={"train": ["a"]})


@pytest.mark.parametrize("ids, match", [
    (["a", "a", "b"], "repeats the id 'a'"),
    (["a", 1, "b"], "one id type"),
    ([1.5, 2.5, 3.5], "must be a str or an int"),
])
def test_bad_ids_raise(ids, match):
    with pytest.raises(SplitError, match=match):
        plan_split(ids, strategy="group", groups=[0, 1, 2], proportions=(1.0, 0.0, 0.0), seed=0)


@pytest.mark.parametrize("kwargs, match", [
    ({"strategy": "random"}, "strategy must be one of"),
    ({"strategy": "group", "groups": [0, 1], "proportions": (0.5, 0.2, 0.2)}, "sum to 1"),
    ({"strategy": "group", "groups": [0, 1], "proportions": (0.0, 0.5, 0.5)}, "train"),
    ({"strategy": "group", "groups": [0, 1], "proportions": (1.0, 0, 0), "cutoffs": (1, 2)},
     "takes no cutoffs"),
    ({"strategy": "group", "groups": [0], "proportions": (1.0, 0, 0)}, "1 values for 2 ids"),
    ({"strategy": "group", "proportions": (1.0, 0, 0)}, "needs groups="),
    ({"strategy": "group", "groups": [0, 1], "proportions": (1.0, 0, 0), "seed": -1},
     "seed"),
    ({"strategy": "stratified", "labels": [0, 1], "proportions": (1.0, 0, 0),
      "insufficient": "drop"}, "insufficient"),
])
def test_plan_refusals(kwargs, match):
    with pytest.raises(SplitError, match=match):
        plan_split(["a", "b"], **kwargs)


def test_seed_none_draws_from_the_os_and_records_it():
    a = plan_split(IDS, strategy="group", groups=list(range(40)), proportions=(0.5, 0.5, 0.0))
    b = plan_split(IDS, strategy="group", groups=list(range(40)), proportions=(0.5, 0.5, 0.0))
    assert isinstance(a.seed, int) and a.seed != b.seed
    assert plan_split(IDS, strategy="group", groups=list(range(40)),
                      proportions=(0.5, 0.5, 0.0), seed=a.seed) == a


def test_plan_split_reads_and_advances_no_global_rng():
    torch.manual_seed(1)
    np.random.seed(1)
    random.seed(1)
    states = (torch.get_rng_state(), np.random.get_state(), random.getstate())
    plan_split(IDS, strategy="group", groups=[i % 5 for i in range(40)],
               proportions=(0.6, 0.2, 0.2))
    plan_split(IDS, strategy="stratified", labels=[i % 2 for i in range(40)],
               proportions=(0.6, 0.2, 0.2))
    plan_split(IDS, strategy="chronological", times=list(range(40)), cutoffs=(30, 35), gap=2)
    assert torch.equal(torch.get_rng_state(), states[0])
    after = np.random.get_state()
    assert after[0] == states[1][0] and np.array_equal(after[1], states[1][1])
    assert after[2:] == states[1][2:]
    assert random.getstate() == states[2]


# -- the seeded order, against a hand-rolled reference ------------------------------------
def _rank(seed, key):
    import hashlib
    import json

    return hashlib.sha256(json.dumps([seed, key], separators=(",", ":")).encode()).hexdigest()


@pytest.mark.parametrize("seed", [0, 7, 2**64 - 1])
def test_groups_are_visited_in_their_sha256_order_and_fill_the_split_furthest_below_target(seed):
    sizes = {"g0": 5, "g1": 1, "g2": 3, "g3": 2, "g4": 4, "g5": 2, "g6": 1, "g7": 3}
    groups = [g for g, n in sizes.items() for _ in range(n)]
    ids = list(range(len(groups)))
    targets = [len(ids) * p for p in (0.6, 0.2, 0.2)]
    rows, home = [0, 0, 0], {}
    for g in sorted(sizes, key=lambda g: _rank(seed, g)):
        k = max(range(3), key=lambda k: (targets[k] - rows[k], -k))
        home[g], rows[k] = k, rows[k] + sizes[g]
    plan = plan_split(ids, strategy="group", groups=groups, proportions=(0.6, 0.2, 0.2),
                      seed=seed)
    assert all(len(p) for p in (plan.train, plan.val, plan.test))  # no repair needed here
    for k, members in enumerate((plan.train, plan.val, plan.test)):
        assert set(members) == {i for i, g in enumerate(groups) if home[g] == k}


@pytest.mark.parametrize("seed", [1, 12345])
def test_stratified_cuts_each_class_in_its_sha256_rank_order(seed):
    ids = [f"s{i}" for i in range(10)]
    plan = plan_split(ids, strategy="stratified", labels=["x"] * 10,
                      proportions=(0.6, 0.2, 0.2), seed=seed)
    ranked = sorted(ids, key=lambda i: _rank(seed, i))
    assert set(plan.train) == set(ranked[:6])
    assert set(plan.val) == set(ranked[6:8]) and set(plan.test) == set(ranked[8:])


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(20, 60), min_size=1, max_size=6),
       seed=st.integers(0, 2**64 - 1),
       proportions=st.sampled_from([(0.7, 0.15, 0.15), (0.6, 0.2, 0.2), (0.5, 0.5, 0.0),
                                    (0.34, 0.33, 0.33), (0.8, 0.0, 0.2)]))
def test_stratified_totals_follow_the_proportions_within_one_row(sizes, seed, proportions):
    # Classes of >= 20 rows ask >= 3 rows of every active split: the one-row minimum never
    # acts, so the carry alone decides and each total is within one row of n * p.
    labels = [c for c, n in enumerate(sizes) for _ in range(n)]
    ids = list(range(len(labels)))
    plan = plan_split(ids, strategy="stratified", labels=labels, proportions=proportions,
                      seed=seed)
    for members, p in zip((plan.train, plan.val, plan.test), proportions, strict=True):
        assert abs(len(members) - len(ids) * p) <= 1
        assert {labels[i] for i in members} == (set(labels) if p > 0 else set())
