"""Task adapters' records against scikit-learn (spec §6.3, §6.4): whole-loader scores,
macro averages, masked labels, empty records and declared metrics."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from _support.task_adapters import NAN, bits, labels, logits
from sklearn.metrics import (
    accuracy_score,
    f1_score,
    mean_absolute_error,
    mean_squared_error,
    precision_score,
    recall_score,
)
from torch import nn

from nnx._foundation.records import NNEvaluationDataPoint
from nnx.metrics import MetricSpec
from nnx.tasks import (
    TaskSpec,
    task_adapter,
)


def sk(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zero_division warnings
        return fn(*args, **kw)


# -- records against scikit-learn ---------------------------------------------------------------

def test_categorical_record_over_a_whole_loader_matches_sklearn() -> None:
    out, y = logits(40, 4, seed=11), labels(40, 4, seed=12)
    y[[0, 5, 9]] = -100
    adapter = task_adapter(TaskSpec.categorical(4, ignore_index=-100), nn.CrossEntropyLoss())
    acc = adapter.accumulator()
    for s in (slice(0, 3), slice(3, 30), slice(30, 40)):
        acc.update(out[s], y[s])
    edp = acc.result()
    keep = (y != -100).numpy()
    t, p = y.numpy()[keep], out.argmax(1).numpy()[keep]
    assert edp.accuracy == pytest.approx(accuracy_score(t, p))
    assert edp.error == pytest.approx(1 - accuracy_score(t, p))
    assert edp.f1 == pytest.approx(sk(f1_score, t, p, average="macro"))
    assert edp.precision == pytest.approx(sk(precision_score, t, p, average="macro"))
    assert edp.recall == pytest.approx(sk(recall_score, t, p, average="macro"))
    assert (edp.kind, edp.count, edp.status) == ("categorical", 37, "ok")
    assert edp.loss is None and dict(edp.metrics) == {}


def test_macro_scores_skip_classes_neither_true_nor_predicted_like_sklearn() -> None:
    out = torch.tensor([[5.0, 0, 0, 0, 0], [0, 5.0, 0, 0, 0], [0, 5.0, 0, 0, 0]])
    y = torch.tensor([0, 1, 0])
    edp = task_adapter(TaskSpec.categorical(5), nn.CrossEntropyLoss()).record(out, y)
    t, p = y.numpy(), out.argmax(1).numpy()
    assert edp.f1 == pytest.approx(sk(f1_score, t, p, average="macro"))
    assert edp.precision == pytest.approx(sk(precision_score, t, p, average="macro"))


def test_metrics_are_never_an_unweighted_mean_of_batch_values() -> None:
    adapter = task_adapter(TaskSpec.categorical(2), nn.CrossEntropyLoss())
    good = torch.tensor([[2.0, 0.0]] * 9)
    bad = torch.tensor([[2.0, 0.0]])
    acc = adapter.accumulator(metrics=[MetricSpec("accuracy")])
    acc.update(good, torch.zeros(9, dtype=torch.long))
    acc.update(bad, torch.ones(1, dtype=torch.long))
    edp = acc.result()
    assert edp.accuracy == pytest.approx(0.9)  # the batch mean would be 0.5
    assert edp.metrics["accuracy"] == pytest.approx(0.9)


def test_multilabel_record_matches_sklearn_and_threshold_decodes_on_logits() -> None:
    out, y = logits(30, 5, seed=21), bits(30, 5, seed=22)
    adapter = task_adapter(TaskSpec.multilabel(5, threshold=0.3), nn.BCEWithLogitsLoss())
    acc = adapter.accumulator()
    acc.update(out[:7], y[:7])
    acc.update(out[7:], y[7:])
    edp = acc.result()
    t = y.numpy().astype(int)
    p = (torch.sigmoid(out) >= 0.3).numpy().astype(int)
    assert torch.equal(adapter.decode(out), (out >= math.log(0.3 / 0.7)).long())
    assert np.array_equal(adapter.decode(out).numpy(), p)
    assert edp.accuracy == pytest.approx(accuracy_score(t, p))
    assert edp.error == pytest.approx(1 - accuracy_score(t, p))
    assert edp.metrics["subset_accuracy"] == pytest.approx(accuracy_score(t, p))
    assert edp.metrics["element_accuracy"] == pytest.approx(float((t == p).mean()))
    assert edp.f1 == pytest.approx(sk(f1_score, t, p, average="macro"))
    assert edp.precision == pytest.approx(sk(precision_score, t, p, average="macro"))
    assert edp.recall == pytest.approx(sk(recall_score, t, p, average="macro"))
    assert (edp.kind, edp.count, edp.status) == ("multilabel", 150, "ok")


def test_multilabel_masked_labels_are_left_out_of_every_value() -> None:
    out = torch.tensor([[3.0, -3.0], [3.0, 3.0], [-3.0, -3.0]])
    y = torch.tensor([[1.0, NAN], [0.0, 1.0], [NAN, NAN]])
    edp = task_adapter(TaskSpec.multilabel(2), nn.BCEWithLogitsLoss()).record(out, y)
    # row 0 correct on its valid label, row 1 wrong on label 0, row 2 has no valid label
    assert edp.count == 3
    assert edp.accuracy == pytest.approx(0.5)
    assert edp.metrics["element_accuracy"] == pytest.approx(2 / 3)


def test_regression_record_matches_sklearn_and_has_no_classification_fields() -> None:
    out, y = logits(20, 2, seed=31), logits(20, 2, seed=32)
    y[3, 1] = NAN
    adapter = task_adapter(TaskSpec.regression(2), nn.MSELoss())
    acc = adapter.accumulator()
    for s in (slice(0, 1), slice(1, 20)):
        num, den = adapter.loss_parts(out[s], y[s], adapter.loss_fn)
        acc.update(out[s], y[s], loss_numerator=num, loss_denominator=den)
    edp = acc.result()
    valid = ~torch.isnan(y)
    t, p = y[valid].numpy(), out[valid].numpy()
    assert edp.metrics["mse"] == pytest.approx(mean_squared_error(t, p))
    assert edp.metrics["mae"] == pytest.approx(mean_absolute_error(t, p))
    assert edp.loss == pytest.approx(mean_squared_error(t, p))
    assert edp.error is edp.accuracy is edp.f1 is edp.recall is edp.precision is None
    assert (edp.kind, edp.count, edp.status) == ("regression", 39, "ok")


def test_every_target_masked_gives_an_empty_record_without_loss_or_metrics() -> None:
    adapter = task_adapter(TaskSpec.regression(1), nn.MSELoss())
    acc = adapter.accumulator(metrics=[MetricSpec("mae")])
    acc.update(logits(3, 1), torch.full((3, 1), NAN, dtype=torch.float64),
               loss_numerator=0.0, loss_denominator=0.0)
    edp = acc.result()
    assert edp == NNEvaluationDataPoint(kind="regression", count=0, status="empty")
    assert edp.state() == {"kind": "regression", "count": 0, "status": "empty"}
    y = torch.full((3,), 7)
    adapter = task_adapter(TaskSpec.categorical(3, ignore_index=7),
                           nn.CrossEntropyLoss(ignore_index=7))
    assert adapter.record(logits(3, 3), y, loss=1.5).status == "empty"
    assert adapter.record(logits(3, 3), y, loss=1.5).loss is None


def test_record_writes_the_given_loss() -> None:
    adapter = task_adapter(TaskSpec.categorical(3), nn.CrossEntropyLoss())
    edp = adapter.record(logits(5, 3), labels(5, 3), loss=torch.tensor(0.25))
    assert edp.loss == 0.25 and edp.count == 5


def test_declared_metric_replaces_a_task_metric_of_the_same_name() -> None:
    adapter = task_adapter(TaskSpec.regression(1), nn.MSELoss())
    out, y = logits(6, 1), logits(6, 1, seed=8)
    edp = adapter.accumulator(metrics=[MetricSpec("mae", name="mse")])
    edp.update(out, y)
    result = edp.result()
    assert result.metrics["mse"] == pytest.approx(mean_absolute_error(y.numpy(), out.numpy()))
