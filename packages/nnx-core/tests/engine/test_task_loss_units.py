"""Task adapters' loss units against torch's own mean-reduced losses (spec §6.3): weights,
ignore_index, label smoothing, masks, dtypes and uneven microbatches."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from _support.task_adapters import NAN, _gen, bits, close, labels, logits, ratio
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from nnx.tasks import (
    TaskSpec,
    task_adapter,
)

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
