"""Task adapters (spec §6.3): loss units against torch, records against scikit-learn."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
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
    CategoricalAdapter,
    LossOnlyAdapter,
    MultilabelAdapter,
    RegressionAdapter,
    TaskSpec,
    TaskValidationError,
    task_adapter,
)

NAN = float("nan")


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def logits(n: int, c: int, *rest: int, seed: int = 0, dtype: torch.dtype = torch.float64,
           grad: bool = False) -> torch.Tensor:
    out = torch.randn(n, c, *rest, generator=_gen(seed), dtype=dtype)
    return out.requires_grad_(grad)


def labels(n: int, c: int, *rest: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, c, (n, *rest), generator=_gen(seed))


def bits(n: int, k: int, seed: int = 2) -> torch.Tensor:
    return (torch.rand(n, k, generator=_gen(seed)) > 0.5).double()


def close(actual: torch.Tensor, expected: torch.Tensor, rel: float = 1e-12) -> None:
    """Same dtype and shape, equal within ``rel`` (float64 throughout unless noted)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.allclose(actual.detach(), expected.detach(), rtol=rel, atol=rel), (
        actual, expected)


def ratio(parts: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    return parts[0] / parts[1]


def sk(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zero_division warnings
        return fn(*args, **kw)


# -- loss units against torch's own mean-reduced losses ---------------------------------------

def test_cross_entropy_with_weights_and_ignore_index_matches_torch() -> None:
    loss = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.5, 0.5], dtype=torch.float64),
                               ignore_index=-100)
    adapter = task_adapter(TaskSpec.categorical(3, ignore_index=-100), loss)
    out, y = logits(12, 3), labels(12, 3)
    y[[1, 4, 7]] = -100
    num, den = adapter.loss_parts(out, y, loss)
    close(num / den, loss(out, y))
    weights = torch.tensor([1.0, 2.5, 0.5], dtype=torch.float64)
    kept = y[y != -100]
    assert float(den) == pytest.approx(float(weights[kept].sum()))


def test_cross_entropy_label_smoothing_and_spatial_targets_match_torch() -> None:
    loss = nn.CrossEntropyLoss(weight=torch.tensor([0.3, 1.0, 2.0, 1.5], dtype=torch.float64),
                               ignore_index=255, label_smoothing=0.2)
    adapter = task_adapter(TaskSpec.categorical(4, ignore_index=255), loss)
    out, y = logits(3, 4, 5, 2), labels(3, 4, 5, 2)
    y[0, 0, 0] = y[2, 3, 1] = 255
    close(ratio(adapter.loss_parts(out, y, loss)), loss(out, y))


def test_nll_gets_log_softmax_first_and_matches_cross_entropy_gradient() -> None:
    weight = torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64)
    nll = nn.NLLLoss(weight=weight, ignore_index=-1)
    adapter = task_adapter(TaskSpec.categorical(3, ignore_index=-1), nll)
    out, y = logits(10, 3, grad=True), labels(10, 3)
    y[3] = -1
    value = ratio(adapter.loss_parts(out, y, nll))
    expected = nn.NLLLoss(weight=weight, ignore_index=-1)(F.log_softmax(out, dim=1), y)
    close(value, expected)
    (grad_nll,) = torch.autograd.grad(value, out)
    ce = nn.CrossEntropyLoss(weight=weight, ignore_index=-1)(out, y)
    (grad_ce,) = torch.autograd.grad(ce, out)
    close(grad_nll, grad_ce)


def test_bce_with_logits_pos_weight_and_weight_match_torch() -> None:
    loss = nn.BCEWithLogitsLoss(weight=torch.tensor([1.0, 0.5, 2.0, 1.0], dtype=torch.float64),
                                pos_weight=torch.tensor([3.0, 1.0, 0.5, 2.0], dtype=torch.float64))
    adapter = task_adapter(TaskSpec.multilabel(4), loss)
    out, y = logits(9, 4), bits(9, 4)
    num, den = adapter.loss_parts(out, y, loss)
    close(num / den, loss(out, y))
    assert float(den) == 36


@pytest.mark.parametrize("loss", [nn.MSELoss(), nn.L1Loss(), nn.SmoothL1Loss(beta=0.3),
                                  nn.HuberLoss(delta=0.7)])
def test_regression_losses_match_torch(loss: nn.Module) -> None:
    adapter = task_adapter(TaskSpec.regression(3), loss)
    out, y = logits(8, 3, seed=3), logits(8, 3, seed=4)
    close(ratio(adapter.loss_parts(out, y, loss)), loss(out, y))


def test_column_target_of_a_single_output_is_not_broadcast() -> None:
    loss = nn.MSELoss()
    adapter = task_adapter(TaskSpec.regression(1), loss)
    out, y = logits(6, 1, seed=3), logits(6, 1, seed=4).reshape(6)
    adapter.validate(out, y)
    close(ratio(adapter.loss_parts(out, y, loss)),
                               loss(out, y.reshape(6, 1)))


def test_sum_reduction_has_denominator_one() -> None:
    loss = nn.CrossEntropyLoss(reduction="sum")
    adapter = task_adapter(TaskSpec.categorical(3), loss)
    out, y = logits(7, 3), labels(7, 3)
    num, den = adapter.loss_parts(out, y, loss)
    assert float(den) == 1.0
    close(num, loss(out, y))
    assert adapter.reduction(loss) == "sum"
    mse = nn.MSELoss(reduction="sum")
    num, den = task_adapter(TaskSpec.regression(2), mse).loss_parts(
        logits(4, 2), logits(4, 2, seed=9), mse)
    assert float(den) == 1.0
    close(num, mse(logits(4, 2), logits(4, 2, seed=9)))


def test_masked_multilabel_and_regression_losses_use_valid_elements_only() -> None:
    pos_weight = torch.tensor([2.0, 0.5, 1.0], dtype=torch.float64)
    bce = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    out, y = logits(5, 3), bits(5, 3)
    y[0, 1] = y[3, 2] = NAN
    num, den = task_adapter(TaskSpec.multilabel(3), bce).loss_parts(out, y, bce)
    valid = ~torch.isnan(y)
    full = F.binary_cross_entropy_with_logits(out, torch.nan_to_num(y), pos_weight=pos_weight,
                                              reduction="none")
    assert float(den) == 13
    close(num / den, full[valid].mean())

    mse = nn.MSELoss()
    out, y = logits(4, 2, seed=5), logits(4, 2, seed=6)
    y[1, 0] = NAN
    num, den = task_adapter(TaskSpec.regression(2), mse).loss_parts(out, y, mse)
    valid = ~torch.isnan(y)
    close(num / den, F.mse_loss(out[valid], y[valid]))


def test_fully_masked_batch_has_zero_denominator_and_a_differentiable_zero() -> None:
    out = logits(4, 3, grad=True)
    y = torch.full((4,), -100)
    loss = nn.CrossEntropyLoss()
    num, den = task_adapter(TaskSpec.categorical(3, ignore_index=-100), loss).loss_parts(
        out, y, loss)
    assert float(num.detach()) == 0.0 and float(den) == 0.0
    num.backward()
    assert out.grad is not None and float(out.grad.abs().sum()) == 0.0


def test_targets_keep_their_dtype_under_a_reduced_precision_output() -> None:
    loss = nn.MSELoss()
    out = logits(4, 2, dtype=torch.bfloat16)
    y = torch.tensor([[0.1234567, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]])
    num, _ = task_adapter(TaskSpec.regression(2), loss).loss_parts(out, y, loss)
    assert num.dtype == torch.float32
    expected = F.mse_loss(out.float(), y, reduction="sum")
    close(num, expected, rel=1e-6)


def _split(n: int, cuts: list[int]) -> list[slice]:
    edges = [0, *sorted({c % (n + 1) for c in cuts}), n]
    return [slice(a, b) for a, b in itertools.pairwise(edges) if b > a]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 24), cuts=st.lists(st.integers(0, 24), max_size=5),
       seed=st.integers(0, 10_000))
def test_uneven_microbatches_reduce_exactly_like_the_full_batch(
        n: int, cuts: list[int], seed: int) -> None:
    gen = _gen(seed)
    cases = []
    ce = nn.CrossEntropyLoss(weight=torch.tensor([0.5, 2.0, 1.0], dtype=torch.float64))
    y = torch.randint(0, 3, (n,), generator=gen)
    y[torch.rand(n, generator=gen) < 0.3] = -100
    cases.append((task_adapter(TaskSpec.categorical(3, ignore_index=-100), ce),
                  torch.randn(n, 3, generator=gen, dtype=torch.float64), y, ce))
    bce = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.0, 0.5], dtype=torch.float64))
    yb = (torch.rand(n, 2, generator=gen) > 0.5).double()
    yb[torch.rand(n, 2, generator=gen) < 0.2] = NAN
    cases.append((task_adapter(TaskSpec.multilabel(2), bce),
                  torch.randn(n, 2, generator=gen, dtype=torch.float64), yb, bce))
    mse = nn.MSELoss()
    yr = torch.randn(n, 2, generator=gen, dtype=torch.float64)
    yr[torch.rand(n, 2, generator=gen) < 0.2] = NAN
    cases.append((task_adapter(TaskSpec.regression(2), mse),
                  torch.randn(n, 2, generator=gen, dtype=torch.float64), yr, mse))
    for adapter, out, target, loss in cases:
        full_num, full_den = adapter.loss_parts(out, target, loss)
        parts = [adapter.loss_parts(out[s], target[s], loss) for s in _split(n, cuts)]
        num = sum(float(p[0]) for p in parts)
        den = sum(float(p[1]) for p in parts)
        assert den == pytest.approx(float(full_den), abs=1e-12)
        if float(full_den) > 0:
            assert num / den == pytest.approx(float(full_num / full_den), rel=1e-12)
        # and the accumulated record carries that loss
        acc = adapter.accumulator()
        for s, p in zip(_split(n, cuts), parts, strict=True):
            acc.update(out[s], target[s], loss_numerator=p[0], loss_denominator=p[1])
        if float(full_den) > 0:
            assert acc.result().loss == pytest.approx(float(full_num / full_den), rel=1e-12)


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


# -- the implicit default ----------------------------------------------------------------------

def test_default_for_cross_entropy_records_legacy_fields_without_task_fields() -> None:
    loss = nn.CrossEntropyLoss()
    adapter = task_adapter(None, loss)
    assert isinstance(adapter, CategoricalAdapter) and adapter.kind is None
    out, y = logits(10, 3), labels(10, 3)
    y[2] = -100  # the loss's ignore_index is honored by the default too
    edp = adapter.record(out, y, loss=1.0)
    keep = (y != -100).numpy()
    assert edp.accuracy == pytest.approx(accuracy_score(y.numpy()[keep],
                                                        out.argmax(1).numpy()[keep]))
    assert edp.kind is edp.count is edp.status is None
    assert set(edp.state()) == {"loss", "error", "accuracy", "f1", "recall", "precision"}
    close(ratio(adapter.loss_parts(out, y, loss)), loss(out, y))


def test_default_cross_entropy_accepts_class_probability_targets() -> None:
    loss = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    adapter = task_adapter(None, loss)
    out = logits(6, 3)
    soft = torch.softmax(logits(6, 3, seed=5), dim=1)
    adapter.validate(out, soft)
    close(ratio(adapter.loss_parts(out, soft, loss)), loss(out, soft))
    assert adapter.record(out, soft).accuracy == pytest.approx(
        float((out.argmax(1) == soft.argmax(1)).double().mean()))


def test_default_for_bce_decodes_logit_at_zero_like_multilabel() -> None:
    adapter = task_adapter(None, nn.BCEWithLogitsLoss())
    assert isinstance(adapter, MultilabelAdapter) and adapter.kind is None
    out = torch.tensor([[-0.1, 0.0], [0.2, -2.0]])
    assert adapter.decode(out).tolist() == [[0, 1], [1, 0]]
    edp = adapter.record(out, torch.tensor([[0.0, 1.0], [1.0, 1.0]]))
    assert edp.accuracy == pytest.approx(0.5) and edp.kind is None and not edp.metrics


def test_default_for_other_losses_reports_loss_only() -> None:
    for loss in (nn.MSELoss(), nn.KLDivLoss(reduction="batchmean")):
        adapter = task_adapter(None, loss)
        assert isinstance(adapter, LossOnlyAdapter)
        out, y = logits(4, 2), torch.softmax(logits(4, 2, seed=4), 1)
        num, den = adapter.loss_parts(out, y, loss)
        close(num / den, loss(out, y))
        edp = adapter.record(out, y, loss=0.5)
        assert edp.state() == {"loss": 0.5}


def test_custom_loss_module_is_called_unchanged_and_weighted_by_its_targets() -> None:
    class Scaled(nn.Module):
        def forward(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return 2.0 * F.mse_loss(output, target)

    adapter = task_adapter(TaskSpec.regression(2), Scaled())
    out, y = logits(3, 2), logits(3, 2, seed=3)
    num, den = adapter.loss_parts(out, y, adapter.loss_fn)
    assert float(den) == 6
    close(num / den, 2.0 * F.mse_loss(out, y))


# -- decoding, probabilities and user-metric inputs --------------------------------------------

def test_decode_and_probabilities_per_kind() -> None:
    out = logits(5, 3)
    cat = task_adapter(TaskSpec.categorical(3), nn.NLLLoss())
    assert torch.equal(cat.decode(out), out.argmax(1))
    close(cat.probabilities(out).sum(1), torch.ones(5, dtype=torch.float64))
    ml = task_adapter(TaskSpec.multilabel(3), nn.BCEWithLogitsLoss())
    close(ml.probabilities(out), torch.sigmoid(out))
    reg = task_adapter(TaskSpec.regression(3), nn.MSELoss())
    assert reg.decode(out) is out
    with pytest.raises(ValueError, match=r"has no probabilities"):
        reg.probabilities(out)


def test_extra_metric_inputs_are_valid_targets_only() -> None:
    out, y = logits(6, 3), labels(6, 3)
    y[1] = -100
    t, p = task_adapter(TaskSpec.categorical(3, ignore_index=-100),
                        nn.CrossEntropyLoss()).extra_metric_inputs(out, y)
    assert t.tolist() == [v for i, v in enumerate(y.tolist()) if i != 1]
    assert p.tolist() == [v for i, v in enumerate(out.argmax(1).tolist()) if i != 1]

    out, y = torch.tensor([[1.0, -1.0], [-1.0, 1.0]]), torch.tensor([[1.0, NAN], [1.0, 1.0]])
    t, p = task_adapter(TaskSpec.multilabel(2), nn.BCEWithLogitsLoss()).extra_metric_inputs(
        out, y)
    assert t.tolist() == [1, 1, 1] and p.tolist() == [1, 0, 1]

    out, y = torch.tensor([[0.5], [1.5]]), torch.tensor([NAN, 2.0])
    t, p = task_adapter(TaskSpec.regression(1), nn.L1Loss()).extra_metric_inputs(out, y)
    assert t.tolist() == [2.0] and p.tolist() == [1.5]


# -- refusals ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("task", "loss", "needed"), [
    (TaskSpec.categorical(3), nn.MSELoss(), "CrossEntropyLoss or NLLLoss"),
    (TaskSpec.multilabel(3), nn.CrossEntropyLoss(), "BCEWithLogitsLoss"),
    (TaskSpec.multilabel(3), nn.BCELoss(), "BCEWithLogitsLoss"),
    (TaskSpec.regression(3), nn.BCEWithLogitsLoss(), "MSELoss, L1Loss"),
])
def test_a_loss_of_another_task_is_refused(task: TaskSpec, loss: nn.Module, needed: str) -> None:
    with pytest.raises(ValueError, match=f"does not suit a {task.kind} task: use {needed}"):
        task_adapter(task, loss)


def test_a_non_module_loss_is_refused() -> None:
    adapter = task_adapter(TaskSpec.regression(1), nn.MSELoss())
    with pytest.raises(ValueError, match=r"a loss must be an nn.Module"):
        adapter.check_loss(F.mse_loss)  # type: ignore[arg-type]


def test_a_loss_without_scalar_reduction_is_refused() -> None:
    with pytest.raises(ValueError, match=r"reduction='none'\) gives no scalar loss"):
        task_adapter(TaskSpec.regression(1), nn.MSELoss(reduction="none"))


def test_a_loss_ignore_index_differing_from_the_task_is_refused() -> None:
    with pytest.raises(ValueError, match=r"TaskSpec.ignore_index is 255 but "
                                         "CrossEntropyLoss.ignore_index is -100"):
        task_adapter(TaskSpec.categorical(3, ignore_index=255), nn.CrossEntropyLoss())


def test_a_loss_ignoring_a_real_class_is_refused() -> None:
    with pytest.raises(ValueError, match=r"ignore_index=1 is a class of this task"):
        task_adapter(TaskSpec.categorical(3), nn.NLLLoss(ignore_index=1))


def test_class_weights_of_another_width_are_refused() -> None:
    with pytest.raises(ValueError, match=r"has 2 class weights but the task has 3 classes"):
        task_adapter(TaskSpec.categorical(3), nn.CrossEntropyLoss(weight=torch.ones(2)))


def test_pos_weight_of_another_width_is_refused() -> None:
    with pytest.raises(ValueError, match=r"has 2 pos_weight entries but the task has 3 labels"):
        task_adapter(TaskSpec.multilabel(3), nn.BCEWithLogitsLoss(pos_weight=torch.ones(2)))


def test_task_adapter_refuses_a_non_taskspec() -> None:
    with pytest.raises(ValueError, match=r"task must be a TaskSpec or None"):
        task_adapter({"kind": "regression"}, nn.MSELoss())  # type: ignore[arg-type]


CAT = task_adapter(TaskSpec.categorical(3, ignore_index=-100), nn.CrossEntropyLoss())
ML = task_adapter(TaskSpec.multilabel(2), nn.BCEWithLogitsLoss())
REG = task_adapter(TaskSpec.regression(2), nn.MSELoss())
REG1 = task_adapter(TaskSpec.regression(1), nn.MSELoss())


@pytest.mark.parametrize(("adapter", "output", "target", "message"), [
    (CAT, logits(4, 3), torch.zeros(4), "must be integer class indices; got torch.float32"),
    (CAT, logits(4, 3), torch.tensor([0, 1, 3, 2]), r"class indices in \[0, 3\) or "
                                                     r"ignore_index=-100; got 3"),
    (CAT, logits(4, 3), torch.tensor([0, -1, 1, 2]), "got -1"),
    (CAT, logits(4, 3), torch.zeros(4, 1, dtype=torch.long), r"must be shaped \(4,\)"),
    (CAT, logits(4, 5), torch.zeros(4, dtype=torch.long), "has 5 classes on axis 1 but the "
                                                          "task declares 3"),
    (CAT, torch.zeros(4, 3, dtype=torch.long), torch.zeros(4, dtype=torch.long),
     "must be floating logits"),
    (ML, logits(4, 2), torch.full((4, 2), 2.0), "must be 0/1 .*; got 2.0"),
    (ML, logits(4, 2), torch.zeros(4, 2, 1), r"shaped like the output \(4, 2\)"),
    (ML, logits(4, 3), torch.zeros(4, 3), "task's 2 labels on axis 1"),
    (REG, logits(4, 2), torch.zeros(4, 2, dtype=torch.long), "must be floating; got torch.int64"),
    (REG, logits(4, 2), torch.zeros(4), "nothing broadcasts"),
    (REG1, logits(4, 1), torch.zeros(1, 4), "nothing broadcasts"),
    (REG1, logits(4, 1), torch.zeros(4, 4), "nothing broadcasts"),
    (REG, logits(4, 3), torch.zeros(4, 3), r"shaped \(N, 2, ...\)"),
])
def test_validation_refusals(adapter, output, target, message: str) -> None:
    with pytest.raises(TaskValidationError, match=message) as info:
        adapter.validate(output, target)
    assert isinstance(info.value, ValueError)


def test_a_custom_loss_refuses_a_masked_batch() -> None:
    class Custom(nn.Module):
        def forward(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return (output - target).abs().mean()

    y = torch.tensor([[1.0, NAN]])
    for task in (TaskSpec.regression(2), TaskSpec.multilabel(2)):
        adapter = task_adapter(task, Custom())
        with pytest.raises(TaskValidationError, match=r"scores complete batches only"):
            adapter.loss_parts(logits(1, 2), y, adapter.loss_fn)


def test_accumulator_needs_numerator_and_denominator_together() -> None:
    acc = REG.accumulator()
    with pytest.raises(ValueError, match=r"pass loss_numerator and loss_denominator together"):
        acc.update(logits(2, 2), logits(2, 2), loss_numerator=1.0)


def test_accumulator_refuses_a_metric_the_model_cannot_provide_before_any_batch() -> None:
    with pytest.raises(ValueError, match=r"needs probabilities inputs"):
        REG.accumulator(metrics=[MetricSpec("nll")])


def test_adapter_types() -> None:
    assert isinstance(REG, RegressionAdapter) and REG.kind == "regression"
    assert REG.metric_inputs == frozenset({"continuous"})
    assert CAT.metric_inputs == frozenset({"labels", "probabilities"})


def test_default_loss_only_accepts_a_plain_callable() -> None:
    adapter = task_adapter(None, F.mse_loss)  # type: ignore[arg-type]
    out, y = logits(4, 2), logits(4, 2, seed=3)
    close(ratio(adapter.loss_parts(out, y, F.mse_loss)),  # type: ignore[arg-type]
          F.mse_loss(out, y))
    with pytest.raises(ValueError, match=r"a loss must be an nn.Module; got int"):
        task_adapter(None, 3)  # type: ignore[arg-type]
