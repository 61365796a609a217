"""Probability-aware prediction: declared specs, categorical vs bernoulli (§3.1)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from nnx import TaskSpec
from nnx._engine.prediction import (
    PredictionResult,
    PredictResult,
    ProbabilitySpec,
    prediction_from_logits,
)

LOGITS = torch.tensor([[2.0, 0.5, -1.0], [-3.0, 4.0, 0.0], [0.1, 0.1, 3.0], [1.0, 1.0, 0.0]])


def test_categorical_rows_sum_to_one_and_argmax_maps_through_labels():
    spec = ProbabilitySpec("categorical", labels=("cat", "dog", "eel"))
    result = prediction_from_logits(LOGITS, spec)
    assert result.probabilities is not None
    torch.testing.assert_close(result.probabilities.sum(dim=1), torch.ones(4))
    torch.testing.assert_close(result.probabilities, torch.softmax(LOGITS, dim=1))
    assert result.class_indices.tolist() == [0, 1, 2, 0]  # tie on row 3: first maximum
    assert isinstance(result.decoded, np.ndarray)
    assert result.decoded.tolist() == ["cat", "dog", "eel", "cat"]
    assert result.sample_ids.tolist() == [0, 1, 2, 3]
    assert result.spec is spec
    assert torch.equal(result.logits, LOGITS)


def test_categorical_integer_labels_and_no_labels():
    spec = ProbabilitySpec("categorical", labels=(10, 20, 30))
    with_labels = prediction_from_logits(LOGITS, spec)
    assert torch.equal(with_labels.decoded, torch.tensor([10, 20, 30, 10]))
    plain = prediction_from_logits(LOGITS, ProbabilitySpec("categorical"))
    assert torch.equal(plain.decoded, plain.class_indices)


def test_categorical_class_axis_on_dense_output():
    # (N, T, C) sequence logits: classes on axis 2; every (n, t) row sums to 1.
    logits = torch.randn(2, 5, 4, generator=torch.Generator().manual_seed(0))
    result = prediction_from_logits(logits, ProbabilitySpec("categorical", class_axis=2))
    assert result.probabilities is not None
    torch.testing.assert_close(result.probabilities.sum(dim=2), torch.ones(2, 5))
    assert torch.equal(result.class_indices, logits.argmax(dim=2))


def test_bernoulli_is_elementwise_sigmoid_not_normalized():
    result = prediction_from_logits(LOGITS, ProbabilitySpec("bernoulli"))
    assert result.probabilities is not None
    torch.testing.assert_close(result.probabilities, torch.sigmoid(LOGITS))
    assert not torch.allclose(result.probabilities.sum(dim=1), torch.ones(4))
    assert torch.equal(result.decoded, (LOGITS >= 0).to(torch.int64))


def test_bernoulli_default_threshold_is_exactly_logit_ge_zero():
    # float32 sigmoid rounds -1e-8 up to exactly 0.5; the indicator must still be 0.
    logits = torch.tensor([[-1e-8, 0.0]])
    result = prediction_from_logits(logits, ProbabilitySpec("bernoulli"))
    assert result.decoded.tolist() == [[0, 1]]


def test_bernoulli_threshold_decodes_probability_ge_threshold():
    spec = ProbabilitySpec("bernoulli", threshold=0.8)
    result = prediction_from_logits(torch.tensor([[1.0, 1.5, -2.0]]), spec)
    # sigmoid: 0.731, 0.818, 0.119
    assert result.decoded.tolist() == [[0, 1, 0]]


def test_bernoulli_threshold_is_applied_on_the_logit_scale():
    # sigmoid(x) >= t  <=>  x >= log(t / (1 - t)); the multilabel task adapter's
    # decode uses the same cut, so predict() and predict_proba() agree exactly.
    t = 0.3
    logits = torch.randn(64, 3, generator=torch.Generator().manual_seed(1)) * 3
    result = prediction_from_logits(logits, ProbabilitySpec("bernoulli", threshold=t))
    assert torch.equal(result.decoded, (logits >= math.log(t / (1 - t))).long())
    assert 0 < int(result.decoded.sum()) < logits.numel()


def test_half_logits_get_float32_probabilities():
    result = prediction_from_logits(LOGITS.half(), ProbabilitySpec("categorical"))
    assert result.probabilities is not None and result.probabilities.dtype == torch.float32
    assert result.logits.dtype == torch.float16  # the raw output is kept as is


def test_class_indices_refused_for_bernoulli_and_regression():
    bern = prediction_from_logits(LOGITS, ProbabilitySpec("bernoulli"))
    with pytest.raises(AttributeError, match=r"only for categorical.*bernoulli"):
        _ = bern.class_indices
    assert not hasattr(bern, "class_indices")
    reg = prediction_from_logits(LOGITS, None)
    with pytest.raises(AttributeError, match="regression"):
        _ = reg.class_indices


def test_regression_has_no_probabilities_and_decodes_values():
    result = prediction_from_logits(LOGITS, None, sample_ids=[7, 7, 3, 1])
    assert result.probabilities is None and result.spec is None
    assert torch.equal(result.decoded, LOGITS)
    assert result.sample_ids.tolist() == [7, 7, 3, 1]  # ids may repeat


def test_logits_are_detached_and_sample_ids_a_private_read_only_copy():
    logits = LOGITS.clone().requires_grad_(True)
    ids = torch.arange(4)
    result = prediction_from_logits(logits * 1.0, ProbabilitySpec("categorical"), sample_ids=ids)
    assert result.probabilities is not None
    assert not result.logits.requires_grad and not result.probabilities.requires_grad
    ids[0] = 99
    assert result.sample_ids.dtype == np.int64 and result.sample_ids[0] == 0
    with pytest.raises(ValueError, match="read-only"):
        result.sample_ids[0] = 5


def test_direct_construction_normalizes_sample_ids():
    result = PredictionResult(LOGITS, None, LOGITS, None, np.arange(4, dtype=np.int32))
    assert result.sample_ids.dtype == np.int64 and result.sample_ids.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="one id per row"):
        PredictionResult(LOGITS, None, LOGITS, None, np.arange(3))


def test_empty_batch_is_a_valid_prediction():
    result = prediction_from_logits(torch.empty(0, 3), ProbabilitySpec("categorical"), [])
    assert result.sample_ids.shape == (0,) and result.class_indices.shape == (0,)


def test_numpy_logits_accepted():
    result = prediction_from_logits(LOGITS.numpy(), ProbabilitySpec("categorical"))
    assert result.class_indices.tolist() == [0, 1, 2, 0]


@pytest.mark.parametrize(
    ("logits", "spec", "ids", "match"),
    [
        (LOGITS, ProbabilitySpec("categorical", class_axis=2), None, "class_axis=2"),
        (LOGITS, ProbabilitySpec("categorical", labels=("a", "b")), None, "2 entries"),
        (LOGITS.long(), ProbabilitySpec("categorical"), None, "floating"),
        (LOGITS[:, :1], ProbabilitySpec("categorical"), None, ">= 2 classes"),
        (LOGITS, ProbabilitySpec("categorical"), [0, 1], "one id per row"),
        (LOGITS, ProbabilitySpec("categorical"), [0.0, 1.0, 2.0, 3.0], "integers"),
        (LOGITS, "categorical", None, "ProbabilitySpec"),
    ],
)
def test_prediction_refusals(logits, spec, ids, match):
    with pytest.raises(ValueError, match=match):
        prediction_from_logits(logits, spec, sample_ids=ids)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kind": "softmax"}, "kind"),
        ({"kind": "categorical", "class_axis": 0}, "class_axis"),
        ({"kind": "categorical", "class_axis": True}, "class_axis"),
        ({"kind": "categorical", "labels": ("a", "b", "a")}, "duplicates: 'a'"),
        ({"kind": "categorical", "labels": ("a", 1)}, "all strings or all integers"),
        ({"kind": "categorical", "labels": ("a",)}, ">= 2"),
        ({"kind": "categorical", "labels": "ab"}, "sequence"),
        ({"kind": "categorical", "labels": (True, False)}, r"labels\[0\]"),
        ({"kind": "categorical", "threshold": 0.5}, "bernoulli"),
        ({"kind": "bernoulli", "threshold": 1.0}, "threshold"),
        ({"kind": "bernoulli", "threshold": float("nan")}, "threshold"),
    ],
)
def test_spec_refusals(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ProbabilitySpec(**kwargs)


def test_spec_normalizes_and_is_frozen():
    spec = ProbabilitySpec("bernoulli", labels=[np.int64(3), 4])
    assert spec.labels == (3, 4) and type(spec.labels[0]) is int
    assert spec.threshold == 0.5
    assert spec == ProbabilitySpec("bernoulli", labels=(3, 4), threshold=0.5)
    assert ProbabilitySpec("categorical").threshold is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.kind = "categorical"  # type: ignore[misc]


def test_for_task_maps_each_kind():
    assert ProbabilitySpec.for_task(TaskSpec.categorical(3)) == ProbabilitySpec("categorical")
    assert ProbabilitySpec.for_task(TaskSpec.multilabel(4, threshold=0.3)) == ProbabilitySpec(
        "bernoulli", threshold=0.3
    )
    assert ProbabilitySpec.for_task(TaskSpec.regression(2)) is None
    named = ProbabilitySpec.for_task(TaskSpec.categorical(2), labels=["no", "yes"])
    assert named is not None and named.labels == ("no", "yes")
    with pytest.raises(ValueError, match="3 outputs"):
        ProbabilitySpec.for_task(TaskSpec.categorical(3), labels=["no", "yes"])


def test_result_types_are_frozen_and_checked():
    plain = PredictResult(logits=LOGITS, classes=LOGITS.argmax(1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        plain.classes = LOGITS  # type: ignore[misc]
    with pytest.raises(ValueError, match="both None"):
        PredictionResult(LOGITS, None, LOGITS, ProbabilitySpec("categorical"), torch.arange(4))
