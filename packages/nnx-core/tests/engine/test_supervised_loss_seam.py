"""nnx.extend.supervised_loss (issue 31): an add-on step's supervised term as the default
step computes it. The value is the loss module's documented mean (Σ loss over the scored
targets / their count) in float64, the record equals the eager top-1 record, a bad target
is refused with TaskValidationError, and finalize_step reads the step's values with its loss.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from nnx.extend import SupervisedLoss, supervised_loss
from nnx.tasks.adapters import TaskValidationError, task_adapter


def _model(loss_fn: nn.Module) -> SimpleNamespace:
    # What supervised_loss reads of a TrainableModel: its task adapter and its loss.
    return SimpleNamespace(task_adapter=task_adapter(None, loss_fn), loss_fn=loss_fn)


def _batch(dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    output = torch.randn(9, 4, generator=g, dtype=dtype, requires_grad=True)
    return output, torch.randint(0, 4, (9,), generator=g)


def _written_out(output: torch.Tensor, target: torch.Tensor, ignore: int = -100) -> torch.Tensor:
    """§3.1's mean by hand: Σ −log softmax(output)[y] over the scored rows / their count."""
    keep = target != ignore
    rows = -torch.log_softmax(output, dim=1)[keep.nonzero().squeeze(1), target[keep]]
    return rows.sum() / keep.sum()


@pytest.mark.parametrize("loss_fn", [nn.CrossEntropyLoss(), nn.NLLLoss(),
                                     nn.CrossEntropyLoss(ignore_index=2)],
                         ids=["ce", "nll", "ce-ignore"])
def test_the_value_is_the_documented_mean_in_float64(loss_fn: nn.Module) -> None:
    output, target = _batch()
    hard = supervised_loss(_model(loss_fn), output, target)
    assert isinstance(hard, SupervisedLoss)
    expected = _written_out(output, target, getattr(loss_fn, "ignore_index", -100))
    # torch's mean divides the summed loss by the count, as the formula does: in float64
    # the two agree to rounding of the last place.
    torch.testing.assert_close(hard.loss, expected, rtol=1e-15, atol=0)
    assert hard.value == pytest.approx(float(expected.detach()), rel=1e-15)
    grad, = torch.autograd.grad(hard.loss, output)
    ref, = torch.autograd.grad(expected, output)
    torch.testing.assert_close(grad, ref, rtol=1e-12, atol=1e-15)


def test_sum_reduction_and_class_weights_keep_the_module_s_normalization() -> None:
    output, target = _batch()
    summed = supervised_loss(_model(nn.CrossEntropyLoss(reduction="sum")), output, target)
    torch.testing.assert_close(summed.loss, F.cross_entropy(output, target, reduction="sum"))
    weight = torch.tensor([1.0, 2.0, 0.5, 3.0], dtype=torch.float64)
    weighted = supervised_loss(_model(nn.CrossEntropyLoss(weight=weight)), output, target)
    torch.testing.assert_close(weighted.loss, F.cross_entropy(output, target, weight=weight))


def test_every_target_ignored_is_an_exact_zero_on_the_graph() -> None:
    output, _ = _batch()
    target = torch.full((9,), -100)
    hard = supervised_loss(_model(nn.CrossEntropyLoss()), output, target)
    assert float(hard.loss.detach()) == 0.0 and hard.value == 0.0
    grad, = torch.autograd.grad(hard.loss, output)
    assert torch.equal(grad, torch.zeros_like(output))
    record = hard.record(1.5)
    assert record.loss == 1.5 and record.error is None


def test_the_record_equals_the_eager_top1_record_and_carries_extra() -> None:
    output, target = _batch(torch.float32)
    hard = supervised_loss(_model(nn.CrossEntropyLoss()), output, target)
    record = hard.record(0.25, hard=hard.value, distillation=0.5)
    miss = float((output.detach().argmax(1) != target).double().mean())
    assert record.loss == 0.25
    assert record.extra == {"hard": hard.value, "distillation": 0.5}
    assert record.error == pytest.approx(miss) and record.accuracy == pytest.approx(1 - miss)


@pytest.mark.parametrize("bad", [torch.tensor([0, 1, 4, 2, 0, 1, 1, 2, 3]),
                                 torch.tensor([0, 1, -2, 2, 0, 1, 1, 2, 3]),
                                 torch.zeros(9, 2)],
                         ids=["index-too-high", "negative-index", "float-wrong-shape"])
def test_a_bad_target_is_refused_with_task_validation_error(bad: torch.Tensor) -> None:
    output, _ = _batch(torch.float32)
    with pytest.raises(TaskValidationError):
        supervised_loss(_model(nn.CrossEntropyLoss()), output, bad)
    assert output.grad is None
