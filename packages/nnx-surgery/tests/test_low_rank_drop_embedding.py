"""low_rank_factorize, drop_layer and expand_embedding (spec §16): their rules and their
refusals (named errors, the net untouched)."""

from __future__ import annotations

import pytest
import torch
from _surgery_nets import X, feedfwd, relu_stack, same, snapshot
from torch import nn

from nnx import NNModel, TransformRecipe
from nnx.surgery import (
    SurgeryShapeError,
    SurgeryTargetError,
    drop_layer,
    expand_embedding,
    low_rank_factorize,
)
from nnx.transforms import LowRankLinear

# -- low_rank_factorize ------------------------------------------------------------------


def test_low_rank_at_max_rank_equals_the_original() -> None:
    net = feedfwd(hidden=(8, 6))
    for layer, top in (("layers.0", 5), ("layers.1", 6), ("layers.2", 3)):
        low = low_rank_factorize(net, layer_name=layer, rank=top)
        assert isinstance(low.get_submodule(layer), LowRankLinear)
        with torch.no_grad():
            assert torch.allclose(low(X), net(X), atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize("rank", [1, 2, 4])
def test_low_rank_k_has_the_eckart_young_frobenius_error(dtype: torch.dtype, tol: float,
                                                         rank: int) -> None:
    torch.manual_seed(rank)
    net = nn.Sequential(nn.Linear(7, 5, dtype=dtype))
    weight = net[0].weight.detach()
    low = low_rank_factorize(net, layer_name="0", rank=rank)[0]
    error = torch.linalg.matrix_norm(weight - low.up.weight @ low.down.weight).item()
    s = torch.linalg.svdvals(weight.double())
    assert error == pytest.approx(s[rank:].pow(2).sum().sqrt().item(), rel=tol, abs=tol)
    assert torch.equal(low.up.bias, net[0].bias)


def test_low_rank_keeps_flags_and_mode_and_matches_core_recipe_replay() -> None:
    net = feedfwd()
    net.layers[1].weight.requires_grad_(False)
    net.layers[1].eval()
    low = low_rank_factorize(net, layer_name="layers.1", rank=3)
    part = low.layers[1]
    assert not part.down.weight.requires_grad and not part.up.weight.requires_grad
    assert part.up.bias.requires_grad and not part.training
    # The same factors core's nnx.low_rank recipe builds on an NNModel's net.
    model = NNModel(net_params=net.params)
    model.net.load_state_dict(net.state_dict())
    model.apply_transform(TransformRecipe("nnx.low_rank", 1,
                                          {"targets": ["layers.1"], "rank": 3}))
    assert model.net.state_dict().keys() == low.state_dict().keys()
    assert all(torch.equal(v, low.state_dict()[k]) for k, v in model.net.state_dict().items())


def test_low_rank_refusals() -> None:
    net = feedfwd()
    before = snapshot(net)
    with pytest.raises(SurgeryShapeError, match=r"\[1, 5\]"):
        low_rank_factorize(net, layer_name="layers.0", rank=6)
    with pytest.raises(SurgeryTargetError, match=r"not an nn\.Linear"):
        low_rank_factorize(net, layer_name="activations.0", rank=1)
    with pytest.raises(SurgeryTargetError, match="no module"):
        low_rank_factorize(net, layer_name="layers.7", rank=1)
    with pytest.raises(ValueError, match="rank"):
        low_rank_factorize(net, layer_name="layers.0", rank=0)
    tied = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    tied[1].weight = tied[0].weight
    with pytest.raises(SurgeryTargetError, match="tied"):
        low_rank_factorize(tied, layer_name="0", rank=2)
    assert same(snapshot(net), before)


# -- drop_layer ----------------------------------------------------------------------------


def test_drop_layer_removes_a_square_feedfwd_block_and_its_params() -> None:
    net = feedfwd(hidden=(6, 6, 4), dropout_probs=(0.1, 0.2, 0.3))
    short = drop_layer(net, layer_name="layers.1")
    assert short.params.hidden_dims == (6, 4)
    assert short.params.layer_dropouts == (0.1, 0.3)
    assert len(short.layers) == len(short.activations) + 1 == len(short.dropouts) + 1 == 3
    assert torch.equal(short.layers[1].weight, net.layers[2].weight)  # later layers renumber
    rebuilt = NNModel(net_params=short.params).net
    rebuilt.load_state_dict(short.state_dict())  # strict: the params build exactly it
    assert repr(rebuilt) == repr(short)
    assert short(X).shape == (16, 3)


def test_drop_layer_shape_rules() -> None:
    net = feedfwd(hidden=(6, 4))
    before = snapshot(net)
    with pytest.raises(SurgeryShapeError, match="6 → 4"):
        drop_layer(net, layer_name="layers.1")
    with pytest.raises(SurgeryShapeError, match="5 → 6"):
        drop_layer(net, layer_name="layers.0")
    square_out = feedfwd(hidden=(3,))
    with pytest.raises(SurgeryTargetError, match="output layer"):
        drop_layer(square_out, layer_name="layers.1")
    assert same(snapshot(net), before)


def test_drop_layer_in_a_sequential_removes_only_the_linear() -> None:
    net = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 3))
    short = drop_layer(net, layer_name="2")
    assert [type(m) for m in short] == [nn.Linear, nn.ReLU, nn.ReLU, nn.Linear]
    assert short(X).shape == (16, 3)
    with pytest.raises(SurgeryShapeError):
        drop_layer(relu_stack(), layer_name="0")


# -- expand_embedding ----------------------------------------------------------------------


def embedder(padding_idx: int | None = None) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(5, 3, padding_idx=padding_idx, max_norm=4.0),
                         nn.Linear(3, 2))


def test_expand_embedding_keeps_old_rows_and_fills_new_ones_with_their_mean() -> None:
    net = embedder()
    old = net[0].weight.detach().clone()
    big = expand_embedding(net, layer_name="0", new_num_embeddings=8)
    emb = big[0]
    assert emb.num_embeddings == 8 and emb.max_norm == 4.0
    assert torch.equal(emb.weight[:5], old)
    assert torch.allclose(emb.weight[5:], old.mean(0).expand(3, 3))
    assert torch.equal(net[0].weight, old) and net[0].num_embeddings == 5  # input untouched


def test_the_padding_row_stays_and_is_left_out_of_the_mean() -> None:
    net = embedder(padding_idx=1)
    old = net[0].weight.detach().clone()
    emb = expand_embedding(net, layer_name="0", new_num_embeddings=6)[0]
    assert emb.padding_idx == 1 and not emb.weight[1].any()
    assert torch.allclose(emb.weight[5], old[[0, 2, 3, 4]].mean(0))


def test_expand_embedding_keeps_requires_grad_and_mode() -> None:
    net = embedder()
    net[0].weight.requires_grad_(False)
    net[0].eval()
    emb = expand_embedding(net, layer_name="0", new_num_embeddings=7)[0]
    assert not emb.weight.requires_grad and not emb.training


def test_expand_embedding_refusals() -> None:
    net = embedder()
    before = snapshot(net)
    with pytest.raises(SurgeryShapeError, match="must be larger"):
        expand_embedding(net, layer_name="0", new_num_embeddings=5)
    with pytest.raises(SurgeryTargetError, match=r"not an nn\.Embedding"):
        expand_embedding(net, layer_name="1", new_num_embeddings=9)
    tied = nn.ModuleDict({"emb": nn.Embedding(4, 3), "head": nn.Linear(3, 4, bias=False)})
    tied["head"].weight = tied["emb"].weight
    with pytest.raises(SurgeryTargetError, match="tied"):
        expand_embedding(tied, layer_name="emb", new_num_embeddings=6)
    with pytest.raises(SurgeryTargetError, match="NNx built-in net"):
        expand_embedding(feedfwd(), layer_name="layers.0", new_num_embeddings=6)
    assert same(snapshot(net), before)
