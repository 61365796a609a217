"""StreamingMetrics (spec §21): bounded, mergeable, equal to one pass and to scikit-learn."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest
import torch
from sklearn.metrics import accuracy_score, f1_score

from nnx import TaskSpec
from nnx.metrics import MetricSpec, register_metric, unregister_metric
from nnx.streaming import (
    MetricMergeError,
    MetricSnapshot,
    StreamingMetrics,
    UnboundedMetricError,
)

CAT = (MetricSpec("accuracy"), MetricSpec("f1"), MetricSpec("nll"), MetricSpec("brier"))


def _data(n=90, classes=4, seed=0):
    g = np.random.default_rng(seed)
    target = g.integers(0, classes, n)
    probs = g.dirichlet(np.ones(classes), n)
    return target, probs


def _state(m):
    return pickle.dumps((m._count, m._width, m._accs))  # every sum and count, compared


def test_f1_and_accuracy_equal_scikit_learn():
    target, probs = _data()
    m = StreamingMetrics(CAT, "categorical")
    for lo in range(0, 90, 25):
        m.update(target[lo:lo + 25], probabilities=probs[lo:lo + 25])
    snap = m.finalize()
    pred = probs.argmax(1)
    assert snap.values["f1"] == f1_score(target, pred, average="macro", zero_division=0)
    assert snap.values["accuracy"] == accuracy_score(target, pred)
    assert snap.count == 90 and snap.unavailable == ()


def test_f1_with_a_class_never_predicted_or_seen_equals_scikit_learn():
    target = np.array([0, 0, 1, 1, 3, 3])
    pred = np.array([0, 1, 1, 1, 0, 0])  # class 3 never predicted, class 2 absent
    m = StreamingMetrics([MetricSpec("f1")], "categorical")
    m.update(target, labels=pred)
    assert m.finalize().values["f1"] == f1_score(target, pred, average="macro",
                                                 zero_division=0)


def test_merging_chunks_in_any_order_equals_one_pass():
    target, probs = _data(60)
    one = StreamingMetrics(CAT, "categorical")
    one.update(target, probabilities=probs)
    chunks = []
    for lo in range(0, 60, 20):
        c = StreamingMetrics(CAT, "categorical")
        c.update(target[lo:lo + 20], probabilities=probs[lo:lo + 20])
        chunks.append(c)
    expected = one.finalize()
    for order in itertools.permutations(chunks):
        merged = order[0].merge(order[1]).merge(order[2])
        got = merged.finalize()
        assert got.count == expected.count
        for name, value in expected.values.items():
            assert got.values[name] == pytest.approx(value, rel=1e-12, abs=1e-15)
    # Counting metrics are exact in any order.
    a = chunks[2].merge(chunks[0]).merge(chunks[1]).finalize()
    assert a.values["f1"] == expected.values["f1"]
    assert a.values["accuracy"] == expected.values["accuracy"]


def test_merge_copies_its_inputs_and_an_empty_merge_changes_nothing():
    target, probs = _data(20)
    a = StreamingMetrics(CAT, "categorical")
    a.update(target[:10], probabilities=probs[:10])
    b = StreamingMetrics(CAT, "categorical")
    before_a = a.finalize()
    merged = a.merge(b)
    assert merged.finalize() == before_a
    a.update(target[10:], probabilities=probs[10:])  # later updates never reach it
    assert merged.finalize() == before_a
    assert b.finalize().count == 0


def test_finalize_is_repeatable_read_only_and_empty_is_unavailable():
    m = StreamingMetrics(CAT, "categorical", num_outputs=4)
    empty = m.finalize()
    assert empty == MetricSnapshot(0, {}, ("accuracy", "f1", "nll", "brier"))
    m.update(np.array([1, -100]), labels=np.array([1, 0]), probabilities=np.eye(4)[[1, 0]],
             valid=np.array([True, False]))
    first, second = m.finalize(), m.finalize()
    assert first == second and first.count == 1
    with pytest.raises(TypeError):
        first.values["f1"] = 0.0  # type: ignore[index]


def test_masked_entries_are_not_scored():
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.5, 0.5]])
    m = StreamingMetrics([MetricSpec("accuracy")], "categorical", ignore_index=-1)
    m.update(np.array([0.0, np.nan, -1.0, 1.0]), probabilities=probs,
             valid=np.array([True, True, True, False]))
    assert m.finalize() == MetricSnapshot(1, {"accuracy": 1.0}, ())
    soft = StreamingMetrics([MetricSpec("accuracy")], "categorical")
    soft.update(np.array([[1.0, 0.0], [np.nan, 1.0], [0.0, 1.0]]), probabilities=probs[:3])
    assert soft.finalize() == MetricSnapshot(2, {"accuracy": 0.5}, ())  # row 2 masked


def test_bernoulli_uses_the_threshold_and_continuous_scores_values():
    ml = StreamingMetrics.for_task([MetricSpec("f1", config={"average": "binary"})],
                                   TaskSpec.multilabel(2, threshold=0.3))
    ml.update(np.array([[1.0, 0.0], [1.0, np.nan]]),
              probabilities=np.array([[0.35, 0.2], [0.1, 0.9]]))
    # decisions [1, 0, 0]; targets [1, 0, 1]: tp 1, n_true 2, n_pred 1 -> 2/3
    assert ml.finalize() == MetricSnapshot(3, {"f1": 2 / 3}, ())
    reg = StreamingMetrics([MetricSpec("mae"), MetricSpec("mse")], "continuous")
    reg.update(np.array([1.0, 2.0, np.nan]), values=np.array([2.0, 4.0, 0.0]))
    assert reg.finalize() == MetricSnapshot(2, {"mae": 1.5, "mse": 2.5}, ())


def test_update_logits_derives_what_evaluate_derives():
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.0, 3.0, 0.0], [1.0, 0.0, 4.0]])
    target = torch.tensor([0, 2, 2])
    m = StreamingMetrics([MetricSpec("accuracy"), MetricSpec("nll")], "categorical")
    m.update_logits(target, logits)
    snap = m.finalize()
    assert snap.values["accuracy"] == 2 / 3
    nll = -torch.log_softmax(logits.double(), 1)[[0, 1, 2], target].mean().item()
    assert snap.values["nll"] == pytest.approx(nll, rel=1e-6)


@pytest.mark.parametrize("other", [
    dict(metrics=[MetricSpec("accuracy")]),
    dict(metrics=[*CAT[:3], MetricSpec("brier", name="b")]),
    dict(semantics="bernoulli"),
    dict(labels=("a", "b", "c", "d")),
    dict(ignore_index=-100),
    dict(num_outputs=5),
])
def test_merge_schema_mismatches_raise_metric_merge_error(other):
    kwargs = dict(metrics=CAT, semantics="categorical")
    kwargs.update(other)
    if kwargs["semantics"] == "bernoulli":
        kwargs["metrics"] = [MetricSpec("accuracy")]
    a = StreamingMetrics(CAT, "categorical", num_outputs=4)
    a.update(*_data(8)[:1], probabilities=_data(8)[1])
    b = StreamingMetrics(kwargs.pop("metrics"), kwargs.pop("semantics"), **kwargs)
    before = _state(a), _state(b)
    with pytest.raises(MetricMergeError):
        a.merge(b)
    assert (_state(a), _state(b)) == before


def test_bernoulli_thresholds_must_match():
    a = StreamingMetrics([MetricSpec("accuracy")], "bernoulli", threshold=0.5)
    b = StreamingMetrics([MetricSpec("accuracy")], "bernoulli", threshold=0.4)
    with pytest.raises(MetricMergeError, match="threshold"):
        a.merge(b)


def test_a_bad_update_changes_nothing():
    target, probs = _data(10)
    m = StreamingMetrics(CAT, "categorical")
    m.update(target, probabilities=probs)
    before = _state(m)
    for call in (lambda: m.update(target, labels=probs.argmax(1)),  # nll needs probabilities
                 lambda: m.update(target[:5], probabilities=probs),
                 lambda: m.update(target, probabilities=probs[:, :3]),
                 lambda: m.update(target + 10, probabilities=probs),
                 lambda: m.update(target, probabilities=probs, valid=np.ones(3, bool))):
        with pytest.raises(ValueError):
            call()
        assert _state(m) == before


class _Rank:
    """A toy rank statistic: needs every score, so it has no merge()."""

    def __init__(self, config):
        self.scores = []

    def update(self, target, prediction):
        self.scores.extend(np.asarray(prediction).reshape(-1).tolist())

    def result(self):
        return float(np.median(self.scores))


@pytest.fixture
def rank_metric():
    register_metric("median_score", 1, _Rank, input="continuous", mode="max")
    yield MetricSpec("median_score")
    unregister_metric("median_score", 1)


def test_stored_score_metrics_need_materialize(rank_metric):
    with pytest.raises(UnboundedMetricError, match="materialize=True"):
        StreamingMetrics([rank_metric], "continuous")
    a = StreamingMetrics([rank_metric], "continuous", materialize=True)
    b = StreamingMetrics([rank_metric], "continuous", materialize=True)
    a.update(np.zeros(3), values=np.array([1.0, 5.0, 9.0]))
    b.update(np.zeros(2), values=np.array([2.0, 3.0]))
    assert a.merge(b).finalize().values["median_score"] == 3.0
    assert a.finalize().values["median_score"] == 5.0  # replayed, repeatable


def test_a_declared_stores_scores_flag_is_unbounded(rank_metric):
    class Flagged(_Rank):
        stores_scores = True

        def merge(self, other):
            self.scores.extend(other.scores)

    register_metric("flagged", 1, Flagged, input="continuous", mode="max")
    try:
        with pytest.raises(UnboundedMetricError):
            StreamingMetrics([MetricSpec("flagged")], "continuous")
    finally:
        unregister_metric("flagged", 1)


def test_constructor_refusals():
    with pytest.raises(ValueError):
        StreamingMetrics(CAT, "poisson")
    with pytest.raises(ValueError):
        StreamingMetrics([MetricSpec("mae")], "categorical")  # not servable
    with pytest.raises(ValueError):
        StreamingMetrics(CAT, "categorical", threshold=0.5)
    with pytest.raises(ValueError):
        StreamingMetrics([MetricSpec("mae")], "continuous", ignore_index=-1)
    with pytest.raises(ValueError):
        StreamingMetrics([MetricSpec("accuracy")], "bernoulli", threshold=1.0)
    with pytest.raises(TypeError):
        StreamingMetrics.for_task(CAT, "categorical")


def test_merge_takes_only_a_streaming_metrics():
    m = StreamingMetrics(CAT, "categorical")
    with pytest.raises(TypeError):
        m.merge({"count": 3})


@pytest.mark.parametrize("task, metrics", [
    (TaskSpec.categorical(3, ignore_index=-100), CAT),
    (TaskSpec.multilabel(3, threshold=0.3),
     (MetricSpec("accuracy"), MetricSpec("f1", config={"average": "binary"}),
      MetricSpec("nll"), MetricSpec("brier")))], ids=["categorical", "multilabel"])
def test_update_logits_batch_by_batch_equals_evaluate(task, metrics):
    """§21: update_logits derives its inputs from raw outputs as evaluate() does, so the
    declared metrics of a stream of batches are evaluate()'s record.metrics."""
    from nnx import Losses
    from nnx.testing import tiny_model

    loss = Losses.CROSS_ENTROPY if task.kind == "categorical" else Losses.BINARY_CROSS_ENTROPY
    model = tiny_model(task=task, loss=loss)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(20, 4, generator=g)
    if task.kind == "categorical":
        y = torch.randint(0, 3, (20,), generator=g)
        y[[2, 7]] = -100
    else:
        y = (torch.rand(20, 3, generator=g) > 0.5).float()
        y[3, 1] = float("nan")
    loader = [(x[i:i + 6], y[i:i + 6]) for i in range(0, 20, 6)]
    streamed = StreamingMetrics.for_task(metrics, task)
    for xb, yb in loader:
        with torch.no_grad():
            streamed.update_logits(yb, model.net(xb))
    record = model.evaluate(loader, metrics=metrics)
    snap = streamed.finalize()
    declared = [m.label for m in metrics]  # a multilabel record adds the task's own too
    assert snap.unavailable == () and list(snap.values) == declared
    for name in declared:
        assert snap.values[name] == pytest.approx(record.metrics[name], rel=1e-6,
                                                  abs=1e-9), name


def test_a_registered_metric_with_merge_is_bounded_and_merges(rank_metric):
    """§21: an accumulator with merge() and no stores_scores = True is bounded: accepted
    without materialize, merged in place (returning None), and a merge's result never sees
    its inputs' later updates."""
    class Summed:
        stores_scores = False

        def __init__(self, config):
            self.total = 0.0

        def update(self, target, prediction):
            self.total += float(np.sum(prediction))

        def merge(self, other):
            self.total += other.total

        def result(self):
            return self.total

    register_metric("summed", 1, Summed, input="continuous", mode="max")
    try:
        a = StreamingMetrics([MetricSpec("summed")], "continuous")
        b = StreamingMetrics([MetricSpec("summed")], "continuous")
        a.update(np.zeros(2), values=np.array([1.0, 2.0]))
        b.update(np.zeros(1), values=np.array([4.0]))
        merged = a.merge(b)
        assert merged.finalize().values["summed"] == 7.0
        a.update(np.zeros(1), values=np.array([10.0]))
        merged.update(np.zeros(1), values=np.array([100.0]))
        assert merged.finalize().values["summed"] == 107.0
        assert a.finalize().values["summed"] == 13.0 and b.finalize().values["summed"] == 4.0
    finally:
        unregister_metric("summed", 1)
