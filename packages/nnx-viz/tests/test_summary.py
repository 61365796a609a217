"""summary: torchinfo's ModelStatistics with tied tensors counted once, frozen layers
out of trainable_params, a batch split by the model's adapter, and §13.2."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from _viz_tiny import assert_same, feed_forward, mixed, snapshot
from torch import nn

from nnx import PositionalInputs

torchinfo = pytest.importorskip("torchinfo")

from nnx.viz import summary  # noqa: E402


def unique_numel(net: nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for p in net.parameters()}.values())


class TiedPair(nn.Module):
    """An encoder and a decoder sharing one weight (input / output embeddings)."""

    def __init__(self) -> None:
        super().__init__()
        self.encode = nn.Linear(6, 4, bias=False)
        self.decode = nn.Linear(4, 6, bias=False)
        self.hidden = nn.Linear(4, 4)
        self.decode.weight = nn.Parameter(self.encode.weight.detach().t().contiguous())
        self.tied = nn.Linear(6, 4, bias=False)
        self.tied.weight = self.encode.weight  # the tie

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.hidden(self.encode(x)) + self.tied(x)
        return self.decode(h)


def test_a_tied_tensor_is_counted_once_where_torchinfo_counts_it_twice():
    net = TiedPair()
    raw = torchinfo.summary(net, input_size=(2, 6), verbose=0)
    stats = summary(net, input_size=(2, 6))
    assert raw.total_params == unique_numel(net) + net.encode.weight.numel()  # the bug
    assert stats.total_params == stats.trainable_params == unique_numel(net)
    assert isinstance(stats, torchinfo.ModelStatistics)
    assert f"Total params: {unique_numel(net)}" in str(stats)


@pytest.mark.skipif(importlib.util.find_spec("nnx.lm") is None, reason="nnx-lm not installed")
def test_a_tied_transformer_is_counted_once():
    from nnx.lm import NNTransformerParams, TransformerNN

    torch.manual_seed(0)
    net = TransformerNN(NNTransformerParams(vocab_size=50, d_model=16, n_heads=2,
                                            n_layers=2, max_seq_len=8))
    assert net.lm_head is None  # tied: the output projection is the embedding
    ids = torch.randint(0, 50, (2, 8))
    stats = summary(net, batch=(ids, ids))  # the net's own adapter splits (ids, targets)
    assert stats.total_params == unique_numel(net)
    assert stats.total_mult_adds > 0


def test_trainable_params_drop_when_a_layer_is_frozen():
    model = feed_forward()
    full = summary(model, input_size=(1, 8))
    assert full.total_params == full.trainable_params == unique_numel(model.net)
    model.freeze("layers.0.*")
    frozen = summary(model, input_size=(1, 8))
    first = sum(p.numel() for n, p in model.net.named_parameters() if n.startswith("layers.0."))
    assert frozen.total_params == full.total_params
    assert frozen.trainable_params == full.trainable_params - first > 0


def test_without_an_input_only_the_parameters_are_listed():
    model = feed_forward()
    stats = summary(model)
    assert stats.total_params == unique_numel(model.net) and stats.total_mult_adds == 0


class Flipped(PositionalInputs):
    def split(self, batch):
        target, x = batch
        return (x,), {}, target


def test_a_batch_is_split_by_the_models_adapter_and_runs_once():
    model = feed_forward()
    x, y = torch.randn(5, 8), torch.tensor([0, 1, 2, 0, 1])
    by_batch = summary(model, batch=(x, y))
    by_size = summary(model, input_size=(5, 8))
    assert by_batch.total_mult_adds == by_size.total_mult_adds > 0
    assert str(by_batch) == str(by_size)
    # An explicit adapter wins over the model's: here the first tensor is the target.
    flipped = summary(model.net, batch=(y, x), batch_adapter=Flipped())
    assert str(flipped) == str(by_size)


def test_input_size_and_batch_together_are_refused():
    with pytest.raises(ValueError, match="not both"):
        summary(feed_forward(), (1, 8), batch=(torch.randn(1, 8), torch.zeros(1)))


@pytest.mark.parametrize("how", ["input_size", "batch"])
def test_summary_restores_a_mixed_tree(how):
    net = mixed()
    seen = []
    net.drop.register_forward_pre_hook(lambda m, a: seen.append(m.training))
    before = snapshot(net)
    if how == "input_size":
        summary(net, input_size=(3, 4))
    else:
        summary(net, batch=(torch.randn(3, 4), torch.zeros(3)))
    assert seen == [False]
    assert_same(net, before)


def test_summary_restores_the_tree_when_the_forward_raises():
    net = mixed()
    net.boom.armed = True
    before = snapshot(net)
    with pytest.raises(RuntimeError, match="torchinfo"):
        summary(net, input_size=(3, 4))
    assert_same(net, before)
