"""The default step's cheap per-batch path keeps the record and the update (spec §6.3, §6.1).

``TaskAdapter.training_batch`` validates a batch and brings its labels to the
host once; its record must be the one ``TaskAdapter.record`` writes, its
refusals the ones ``validate`` raises, and a one-microbatch window must train
exactly like a hand-written loop with a mean loss.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from _nnx_core_tiny import tiny_model
from torch import nn

from nnx import NNOptimParams, NNTrainParams, TaskSpec
from nnx.tasks import CategoricalAdapter, TaskValidationError, task_adapter
from nnx.tasks._macro import _macro_numpy, macro_scores, pairwise_sum


def logits(n: int, c: int, *rest: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, c, *rest, generator=torch.Generator().manual_seed(seed))


def labels(n: int, c: int, *rest: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, c, (n, *rest), generator=torch.Generator().manual_seed(seed))


def _cases():
    y = labels(40, 5)
    masked = y.clone()
    masked[[0, 7, 9]] = -100
    yield "default", task_adapter(None, nn.CrossEntropyLoss()), logits(40, 5), y
    yield "default masked", task_adapter(None, nn.CrossEntropyLoss()), logits(40, 5), masked
    yield "all masked", task_adapter(None, nn.CrossEntropyLoss()), logits(6, 5), torch.full(
        (6,), -100)
    task = TaskSpec.categorical(5, ignore_index=-1)
    minus = y.clone()
    minus[3] = -1
    yield "task", task_adapter(task, nn.CrossEntropyLoss(ignore_index=-1)), logits(40, 5), minus
    yield "task all masked", task_adapter(task, nn.CrossEntropyLoss(ignore_index=-1)), logits(
        4, 5), torch.full((4,), -1)
    yield "sequence", task_adapter(None, nn.CrossEntropyLoss()), logits(8, 5, 6), labels(8, 5, 6)
    yield "wide", task_adapter(TaskSpec.categorical(70), nn.CrossEntropyLoss()), logits(
        50, 70), labels(50, 70)
    yield "uint8", task_adapter(None, nn.CrossEntropyLoss()), logits(40, 5), y.to(torch.uint8)
    yield "nll", task_adapter(None, nn.NLLLoss()), logits(40, 5), y
    yield "sum", task_adapter(None, nn.CrossEntropyLoss(reduction="sum")), logits(40, 5), y
    yield "smoothing", task_adapter(None, nn.CrossEntropyLoss(label_smoothing=0.1)), logits(
        40, 5), y
    yield "class weights", task_adapter(None, nn.CrossEntropyLoss(
        weight=torch.tensor([1.0, 2.0, 0.5, 1.0, 3.0]))), logits(40, 5), masked
    inside = y.clone()
    inside[[1, 2]] = 2
    spec = TaskSpec.categorical(5, ignore_index=2)
    yield "ignore inside", task_adapter(spec, nn.CrossEntropyLoss(ignore_index=2)), logits(
        40, 5), inside


CASES = list(_cases())


@pytest.mark.parametrize("normalize", [False, True], ids=["window", "one-microbatch"])
@pytest.mark.parametrize(("adapter", "output", "target"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_training_batch_records_and_splits_its_loss_like_the_adapter(adapter, output, target,
                                                                       normalize):
    loss_fn = adapter.loss_fn
    output = output.requires_grad_()
    batch = adapter.training_batch(output, target, loss_fn, normalize=normalize)
    numerator, denominator = adapter.loss_parts(output, target, loss_fn)
    weight, total = float(denominator), float(numerator.detach())
    assert batch.weight == weight
    assert batch.summed == (adapter.reduction(loss_fn) == "sum")
    assert batch.total == pytest.approx(total, rel=1e-6)
    expected = (total if batch.summed else total / weight) if weight > 0 else math.nan
    if weight > 0:
        assert batch.value == pytest.approx(expected, rel=1e-6)
    else:
        assert math.isnan(batch.value)
    assert batch.normalized == (normalize and not batch.summed and weight > 0)
    back = numerator / weight if batch.normalized else numerator
    torch.testing.assert_close(batch.numerator, back)
    loss = None if weight <= 0 else batch.value
    # The record is exactly TaskAdapter.record's, field for field.
    assert batch.record(loss) == adapter.record(output.detach(), target, loss=loss)


def test_the_one_microbatch_window_is_torchs_mean_loss() -> None:
    adapter = task_adapter(None, nn.CrossEntropyLoss())
    out, y = logits(30, 4).requires_grad_(), labels(30, 4)
    batch = adapter.training_batch(out, y, adapter.loss_fn, normalize=True)
    mean = nn.CrossEntropyLoss()(out, y)
    assert torch.equal(batch.numerator, mean) and batch.value == mean.item()


BAD = [
    ("too large", logits(6, 3), torch.tensor([0, 1, 2, 3, 0, 1])),
    ("negative", logits(6, 3), torch.tensor([0, 1, -3, 2, 0, 1])),
    ("float targets", logits(6, 3), torch.zeros(6, 3, dtype=torch.float64)[:, 0]),
    ("bool targets", logits(6, 3), torch.zeros(6, dtype=torch.bool)),
    ("shape", logits(6, 3), torch.zeros(5, dtype=torch.long)),
    ("integer output", torch.zeros(6, 3, dtype=torch.long), torch.zeros(6, dtype=torch.long)),
]


@pytest.mark.parametrize("task", [None, TaskSpec.categorical(3)], ids=["default", "task"])
@pytest.mark.parametrize(("output", "target"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_training_batch_refuses_what_validate_refuses(task, output, target) -> None:
    adapter = task_adapter(task, nn.CrossEntropyLoss())
    with pytest.raises(TaskValidationError) as expected:
        adapter.validate(output, target)
    with pytest.raises(TaskValidationError) as got:
        adapter.training_batch(output, target, adapter.loss_fn, normalize=True)
    assert str(got.value) == str(expected.value)


def test_the_task_width_is_checked_before_any_label_is_read() -> None:
    adapter = task_adapter(TaskSpec.categorical(4), nn.CrossEntropyLoss())
    with pytest.raises(TaskValidationError, match="declares 4"):
        adapter.training_batch(logits(5, 3), labels(5, 3), adapter.loss_fn)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_the_default_step_trains_and_records_exactly_like_a_plain_loop(tmp_path, optimizer):
    x, y = logits(64, 4, seed=3), labels(64, 3, seed=4)
    batches = [(x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]
    model, reference = tiny_model(), tiny_model().net
    if optimizer == "sgd":
        params = NNOptimParams.builder().sgd(max_lr=0.1).build()
        opt: torch.optim.Optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    else:
        params = NNOptimParams.builder().adam(max_lr=1e-2).build()
        opt = torch.optim.Adam(reference.parameters(), lr=1e-2)
    losses = []
    for _ in range(2):
        for bx, by in batches:
            opt.zero_grad(set_to_none=True)
            loss = nn.CrossEntropyLoss()(reference(bx), by)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    run = model.train(NNTrainParams(n_epochs=2, train_loader=batches, optim=params,
                                    scheduler=None), root=tmp_path, verbose=False)
    for a, b in zip(model.net.parameters(), reference.parameters(), strict=True):
        assert torch.equal(a, b)
    assert [idp.train_edp.loss for idp in run.idps] == losses


def test_pairwise_sum_is_numpys_sum_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    for n in [*range(0, 40), 127, 128, 129, 255, 256, 300, 1000]:
        values = rng.random(n) * 10 ** float(rng.integers(-3, 6))
        assert pairwise_sum(values.tolist()) == float(np.add.reduce(values))


def test_macro_scores_are_the_same_floats_on_either_path() -> None:
    rng = np.random.default_rng(1)
    for k in (1, 3, 7, 8, 10, 37, 128, 129, 300):
        tp = rng.integers(0, 30, k)
        n_true, n_pred = tp + rng.integers(0, 9, k), tp + rng.integers(0, 9, k)
        n_true[0] = n_pred[0] = tp[0] = 0
        present = (n_true + n_pred) > 0
        python = macro_scores(tp.tolist(), n_true.tolist(), n_pred.tolist(), present.tolist())
        assert python == macro_scores(tp, n_true, n_pred, present)
        assert python == _macro_numpy(tp, n_true, n_pred, present)


def test_a_categorical_adapter_keeps_its_type() -> None:
    assert isinstance(task_adapter(None, nn.CrossEntropyLoss()), CategoricalAdapter)
