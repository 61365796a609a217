"""evaluate() (spec §21; issue 26 item 11): a sum-reduction loss stays the loader's total
whatever the batch size, a mean loss is summed numerators over summed denominators, and
an empty loader raises instead of returning an all-None record."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nnx.testing import tiny_batches, tiny_model


def _rows(size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    x = torch.cat([b[0] for b in tiny_batches(1, 5)])
    y = torch.cat([b[1] for b in tiny_batches(1, 5)])
    return [(x[i:i + size], y[i:i + size]) for i in range(0, 5, size)]


def test_a_sum_reduction_loss_is_the_loaders_total_at_every_batch_size():
    model = tiny_model()
    model.loss_fn = nn.CrossEntropyLoss(reduction="sum")
    x, y = (torch.cat(t) for t in zip(*_rows(5), strict=True))
    with torch.no_grad():
        expected = float(nn.CrossEntropyLoss(reduction="sum")(model.net.eval()(x), y))
    losses = [model.evaluate(_rows(size)).loss for size in (1, 2, 5)]
    assert losses == pytest.approx([expected] * 3, rel=1e-6)


def test_a_mean_loss_is_the_same_at_every_batch_size():
    model = tiny_model()
    x, y = (torch.cat(t) for t in zip(*_rows(5), strict=True))
    with torch.no_grad():
        expected = float(nn.CrossEntropyLoss()(model.net.eval()(x), y))
    assert [model.evaluate(_rows(s)).loss for s in (1, 2, 5)] == pytest.approx(
        [expected] * 3, rel=1e-6)


def test_an_empty_loader_raises_and_leaves_the_model_as_it_was():
    model = tiny_model()
    model.net.train()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    with pytest.raises(ValueError, match="yielded no batch"):
        model.evaluate([])
    assert model.net.training
    assert all(torch.equal(v, before[k]) for k, v in model.net.state_dict().items())
