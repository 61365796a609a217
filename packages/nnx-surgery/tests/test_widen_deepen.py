"""widen / deepen (spec §16): function-preserving Net2Net edits on validated topologies,
refused up front (named errors, the net untouched) anywhere else."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import pytest
import torch
from _surgery_nets import X, feedfwd, relu_stack, same, snapshot
from torch import nn

from nnx import Activations, FeedFwdNN, NNModel
from nnx.surgery import (
    DeepenSiteError,
    SurgeryBoundaryError,
    SurgeryShapeError,
    SurgeryTargetError,
    deepen,
    drop_layer,
    expand_embedding,
    low_rank_factorize,
    widen,
)

TOL = 1e-5


def close(a: nn.Module, b: nn.Module) -> bool:
    with torch.no_grad():
        return bool(torch.allclose(a(X), b(X), atol=TOL, rtol=0))


# -- function preservation -------------------------------------------------------------


@pytest.mark.parametrize("layer", ["layers.0", "layers.1"])
@pytest.mark.parametrize("new_width", [7, 13, 30])
def test_widen_preserves_a_relu_feedfwd_function(layer: str, new_width: int) -> None:
    net = feedfwd()
    wide = widen(net, layer_name=layer, new_width=new_width)
    assert wide.get_submodule(layer).out_features == new_width
    assert close(wide, net)


def test_widen_preserves_a_sequential_through_elementwise_modules_in_train_mode_too() -> None:
    net = relu_stack(nn.GELU(), nn.Dropout(0.0), nn.Identity())
    wide = widen(net, layer_name="0", new_width=11)
    assert [type(m) for m in wide] == [type(m) for m in net]
    assert wide[0].out_features == 11 and wide[4].in_features == 11
    assert close(wide, net) and close(wide.eval(), net.eval())


@pytest.mark.parametrize("layer", ["layers.0", "layers.1"])
def test_deepen_preserves_a_relu_feedfwd_function_in_train_mode_with_dropout(layer: str) -> None:
    net = feedfwd(dropout_prob=0.3)
    deep = deepen(net, after_layer_name=layer)
    assert isinstance(deep, FeedFwdNN) and len(deep.layers) == 4
    torch.manual_seed(1)
    want = net(X)  # the same dropout draws: the inserted layer's dropout draws nothing
    torch.manual_seed(1)
    assert torch.allclose(deep(X), want, atol=TOL, rtol=0)
    assert close(deep.eval(), net.eval())


def test_deepen_inserts_identity_and_relu_right_after_the_sequential_relu() -> None:
    net = relu_stack(nn.ReLU(), nn.Dropout(0.2))
    deep = deepen(net, after_layer_name="0")
    assert [type(m) for m in deep] == [nn.Linear, nn.ReLU, nn.Linear, nn.ReLU, nn.Dropout,
                                       nn.Linear]
    assert torch.equal(deep[2].weight, torch.eye(6)) and not deep[2].bias.any()
    assert close(deep.eval(), net.eval())


def test_a_named_sequential_keeps_its_keys_and_the_new_block_is_named_after_the_site() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(OrderedDict(fc=nn.Linear(5, 6), act=nn.ReLU(), out=nn.Linear(6, 3)))
    deep = deepen(net, after_layer_name="fc")
    assert list(deep._modules) == ["fc", "act", "fc_deepened", "fc_deepened_relu", "out"]
    assert close(deep, net)


def test_a_sequential_nested_in_a_module_is_cut_in_place_of_the_old_container() -> None:
    class Holder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = relu_stack()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.body(x)
            return out

    net = Holder()
    for new in (widen(net, layer_name="body.0", new_width=9),
                deepen(net, after_layer_name="body.0")):
        assert type(new) is Holder and new.body is not net.body and close(new, net)


# -- FeedFwdNN params stay aligned ------------------------------------------------------


def test_feedfwd_params_follow_the_new_layers_and_rebuild_the_same_state_dict() -> None:
    net = feedfwd(dropout_prob=0.1, activations=(Activations.RELU, Activations.TANH))
    wide = widen(net, layer_name="layers.1", new_width=9)
    deep = deepen(net, after_layer_name="layers.0")
    assert wide.params.hidden_dims == (6, 9)
    assert wide.params.activations == (Activations.RELU, Activations.TANH)
    assert deep.params.hidden_dims == (6, 6, 6)
    assert deep.params.layer_activations == (Activations.RELU, Activations.RELU,
                                             Activations.TANH)
    assert deep.params.layer_dropouts == (0.1, 0.0, 0.1)
    for new in (wide, deep):
        rebuilt = NNModel(net_params=new.params).net
        assert {k: v.shape for k, v in rebuilt.state_dict().items()} == {
            k: v.shape for k, v in new.state_dict().items()}
        assert repr(rebuilt) == repr(new)


def test_params_with_one_shared_activation_stay_in_their_plain_form() -> None:
    wide = widen(feedfwd(), layer_name="layers.0", new_width=8)
    assert wide.params.activations is None and wide.params.dropout_probs is None


# -- flags, modes, the input untouched ------------------------------------------------


def test_replaced_tensors_keep_requires_grad_and_modules_keep_their_mode() -> None:
    net = feedfwd(hidden=(6, 6, 6))
    net.layers[1].weight.requires_grad_(False)  # frozen weight, trainable bias
    net.layers[2].requires_grad_(False)
    net.layers[1].eval()
    wide = widen(net, layer_name="layers.1", new_width=10)
    assert not wide.layers[1].weight.requires_grad and wide.layers[1].bias.requires_grad
    assert not wide.layers[2].weight.requires_grad and not wide.layers[2].bias.requires_grad
    assert not wide.layers[1].training and wide.layers[2].training
    deep = deepen(net, after_layer_name="layers.1")
    assert not deep.layers[1].weight.requires_grad  # the old layers as they were
    assert deep.layers[2].weight.requires_grad  # the new layer trains
    assert not deep.layers[2].training  # in the site's mode


def test_widen_s_consumer_keeps_its_own_flags_and_mode() -> None:
    net = feedfwd()
    net.layers[1].eval()  # the consumer in eval mode, its bias frozen
    net.layers[1].bias.requires_grad_(False)
    wide = widen(net, layer_name="layers.0", new_width=9)
    assert wide.layers[0].training and not wide.layers[1].training
    assert wide.layers[1].weight.requires_grad and not wide.layers[1].bias.requires_grad


def test_a_rebuilt_sequential_keeps_each_child_s_own_mode() -> None:
    net = relu_stack(nn.ReLU(), nn.Dropout(0.5))
    net[2].eval()  # one child in eval mode inside a container in training mode
    deep = deepen(net, after_layer_name="0")
    assert deep.training and [m.training for m in deep] == [True, True, True, True, False,
                                                           True]
    net.eval()
    assert not any(m.training for m in deepen(net, after_layer_name="0").modules())


def tagger() -> nn.Module:
    return nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 2))


@pytest.mark.parametrize("make, cut", [
    (feedfwd, lambda n: widen(n, layer_name="layers.0", new_width=9)),
    (feedfwd, lambda n: deepen(n, after_layer_name="layers.0")),
    (feedfwd, lambda n: drop_layer(n, layer_name="layers.1")),
    (feedfwd, lambda n: low_rank_factorize(n, layer_name="layers.0", rank=2)),
    (tagger, lambda n: expand_embedding(n, layer_name="0", new_num_embeddings=7)),
], ids=["widen", "deepen", "drop_layer", "low_rank_factorize", "expand_embedding"])
def test_the_input_net_is_untouched_and_shares_no_tensor(make: Callable[[], nn.Module],
                                                         cut: Callable[[nn.Module], nn.Module],
                                                         ) -> None:
    """Every primitive returns a fresh module (spec §16)."""
    net = make()
    before = snapshot(net)
    new = cut(net)
    assert same(snapshot(net), before) and new is not net
    ours = {p.data_ptr() for p in net.parameters()}
    assert not ours & {p.data_ptr() for p in new.parameters()}


# -- refusals (each before anything changes) ----------------------------------------


@pytest.mark.parametrize("boundary", [nn.LayerNorm(6), nn.BatchNorm1d(6), nn.Softmax(dim=-1),
                                      nn.Sequential(nn.ReLU())])
def test_widen_refuses_a_non_elementwise_boundary(boundary: nn.Module) -> None:
    net = relu_stack(nn.ReLU(), boundary)
    before = snapshot(net)
    with pytest.raises(SurgeryBoundaryError, match=type(boundary).__name__):
        widen(net, layer_name="0", new_width=9)
    assert same(snapshot(net), before)


def test_widen_refuses_the_output_layer_a_narrower_width_and_other_containers() -> None:
    net = feedfwd()
    with pytest.raises(SurgeryTargetError, match="output layer"):
        widen(net, layer_name="layers.2", new_width=9)
    with pytest.raises(SurgeryShapeError, match="must be larger"):
        widen(net, layer_name="layers.0", new_width=6)
    with pytest.raises(SurgeryTargetError, match="no module"):
        widen(net, layer_name="layers.9", new_width=9)
    with pytest.raises(SurgeryTargetError, match=r"not an nn\.Linear"):
        widen(net, layer_name="activations.0", new_width=9)
    holder = nn.ModuleDict({"a": nn.Linear(5, 6), "b": nn.Linear(6, 3)})
    with pytest.raises(SurgeryTargetError, match="ModuleDict"):
        widen(holder, layer_name="a", new_width=9)


def test_aliased_modules_are_refused() -> None:
    shared = nn.Linear(6, 6)
    net = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), shared, nn.ReLU(), shared)
    before = snapshot(net)
    with pytest.raises(SurgeryTargetError, match="shared under several names"):
        widen(net, layer_name="2", new_width=9)
    with pytest.raises(SurgeryTargetError, match="shared under several names"):
        widen(net, layer_name="0", new_width=9)  # its consumer is the aliased one
    assert same(snapshot(net), before)
    tied = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 6))
    tied[4].weight = tied[2].weight
    with pytest.raises(SurgeryTargetError, match="tied"):
        deepen(tied, after_layer_name="2")


@pytest.mark.parametrize("act", [Activations.GELU, Activations.TANH, Activations.IDENTITY,
                                 Activations.LEAKY_RELU])
def test_deepen_refuses_a_non_relu_effective_activation(act: Activations) -> None:
    net = feedfwd(activations=(Activations.RELU, act))  # the per-layer override counts
    before = snapshot(net)
    with pytest.raises(DeepenSiteError, match=act.name):
        deepen(net, after_layer_name="layers.1")
    assert same(snapshot(net), before)
    deepen(net, after_layer_name="layers.0")  # the ReLU layer is fine


def test_deepen_refuses_a_swapped_activation_module_and_the_output_layer() -> None:
    net = feedfwd()
    net.activations[0] = nn.GELU()  # the params say RELU, the module that runs does not
    with pytest.raises(DeepenSiteError, match="GELU"):
        deepen(net, after_layer_name="layers.0")
    with pytest.raises(DeepenSiteError, match="output layer"):
        deepen(net, after_layer_name="layers.2")


@pytest.mark.parametrize("after", [(nn.GELU(),), (nn.Dropout(0.1), nn.ReLU()),
                                   (nn.LeakyReLU(),)])
def test_deepen_refuses_a_sequential_site_not_followed_by_relu(after: tuple[nn.Module, ...],
                                                               ) -> None:
    net = relu_stack(*after)
    before = snapshot(net)
    with pytest.raises(DeepenSiteError, match=r"not an nn\.ReLU"):
        deepen(net, after_layer_name="0")
    assert same(snapshot(net), before)
    with pytest.raises(DeepenSiteError, match="followed by nothing"):
        deepen(net, after_layer_name=str(len(net) - 1))


def test_a_feedfwd_subclass_is_not_assumed_to_wire_its_layers_the_same_way() -> None:
    class Other(FeedFwdNN):
        pass

    net = Other(feedfwd().params)
    with pytest.raises(SurgeryTargetError, match="ModuleList"):
        widen(net, layer_name="layers.0", new_width=9)
