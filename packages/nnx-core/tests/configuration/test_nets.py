"""The built-in nets: construction through Nets, shapes, layer semantics, MoE routing, training."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import pytest
import torch
from torch import Tensor, nn

from nnx import Activations, Nets, NNConvParams, NNMoEParams, NNParams, NNViTParams
from nnx.nets import ConvNN, FeedFwdNN, MoEFeedFwdNN, MoELinear, ViTNN

# Small enough that the whole file runs in a few seconds on a CPU.
FF = NNParams(input_dim=4, output_dim=3, hidden_dims=(8, 8))
CONV = NNConvParams(
    input_dim=64, output_dim=3, hidden_dims=(16,), conv_channels=(4, 8), in_channels=2
)
VIT = NNViTParams(
    output_dim=3, image_size=8, patch_size=4, in_channels=2, d_model=16, n_layers=2,
    ffn_mult=2, n_heads=2,
)  # fmt: skip
MOE = NNMoEParams(input_dim=4, output_dim=3, hidden_dims=(8, 8), num_experts=4, top_k=2)

# (member, params, one input row's shape, class built)
CASES = [
    (Nets.FEED_FWD, FF, (4,), FeedFwdNN),
    (Nets.CONV, CONV, (2, 8, 8), ConvNN),
    (Nets.VIT, VIT, (2, 8, 8), ViTNN),
    (Nets.MOE, MOE, (4,), MoEFeedFwdNN),
]
IDS = [case[0].name for case in CASES]


def assert_close(actual: Tensor, expected: Tensor, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    # torch.testing.assert_close would do, but its first call costs seconds of
    # lazy imports, and this file must stay fast.
    assert actual.shape == expected.shape, f"{tuple(actual.shape)} != {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"{actual.dtype} != {expected.dtype}"
    diff = (actual - expected).abs().max().item() if actual.numel() else 0.0
    assert torch.allclose(actual, expected, rtol=rtol, atol=atol), f"max abs diff {diff}"


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


# --- construction through Nets -------------------------------------------------


@pytest.mark.parametrize(("member", "params", "row", "cls"), CASES, ids=IDS)
def test_member_builds_its_net_with_logit_shape(
    member: Nets, params: NNParams, row: tuple[int, ...], cls: type[nn.Module]
) -> None:
    net = member(params)
    assert type(net) is cls
    assert net.params is params
    out = net(torch.randn(5, *row))
    assert out.shape == (5, 3)
    assert out.dtype == torch.float32


@pytest.mark.parametrize(
    ("member", "params"),
    [
        (Nets.CONV, FF),
        (Nets.VIT, FF),
        (Nets.MOE, FF),
        (Nets.VIT, CONV),
        (Nets.CONV, MOE),
    ],
)
def test_member_refuses_the_wrong_params_class(member: Nets, params: NNParams) -> None:
    with pytest.raises(TypeError, match=f"Nets.{member.name}"):
        member(params)


@pytest.mark.parametrize(("member", "params", "row", "cls"), CASES, ids=IDS)
def test_unpack_batch(
    member: Nets, params: NNParams, row: tuple[int, ...], cls: type[nn.Module]
) -> None:
    net = member(params)
    x, y = torch.randn(2, *row), torch.tensor([0, 1])
    for batch in ((x, y), [x, y]):
        inputs, target = net.unpack_batch(batch)
        assert isinstance(inputs, tuple) and len(inputs) == 1
        assert inputs[0] is x and target is y
    inputs, target = net.unpack_batch(x)
    assert inputs[0] is x and target is None
    with pytest.raises(ValueError, match="X or \\(X, Y\\)"):
        net.unpack_batch((x, y, y))


# --- FeedFwdNN -------------------------------------------------------------------


def test_feedfwd_parameter_names() -> None:
    net = Nets.FEED_FWD(FF)
    assert [name for name, _ in net.named_parameters()] == [
        "layers.0.weight", "layers.0.bias",
        "layers.1.weight", "layers.1.bias",
        "layers.2.weight", "layers.2.bias",
    ]  # fmt: skip
    assert [tuple(p.shape) for p in net.parameters()] == [
        (8, 4), (8,), (8, 8), (8,), (3, 8), (3,)
    ]  # fmt: skip


def test_feedfwd_without_hidden_layers_is_one_linear() -> None:
    net = FeedFwdNN(NNParams(input_dim=4, output_dim=2))
    assert [name for name, _ in net.named_parameters()] == ["layers.0.weight", "layers.0.bias"]
    x = torch.randn(3, 4)
    assert_close(net(x), net.layers[0](x))


def test_feedfwd_uses_each_layers_activation() -> None:
    params = NNParams(
        input_dim=4, output_dim=3, hidden_dims=(8, 8),
        activations=(Activations.TANH, Activations.SIGMOID),
    )  # fmt: skip
    net = FeedFwdNN(params).eval()
    x = torch.randn(6, 4)
    l0, l1, l2 = net.layers
    expected = l2(torch.sigmoid(l1(torch.tanh(l0(x)))))
    assert_close(net(x), expected)
    # The output layer has no activation: logits may be negative and exceed 1.
    default = FeedFwdNN(FF).eval()
    h = torch.relu(default.layers[1](torch.relu(default.layers[0](x))))
    assert_close(default(x), default.layers[2](h))


def test_feedfwd_uses_each_layers_dropout() -> None:
    params = NNParams(input_dim=4, output_dim=3, hidden_dims=(8, 8), dropout_probs=(0.0, 1.0))
    net = FeedFwdNN(params)
    assert [d.p for d in net.dropouts] == [0.0, 1.0]
    x = torch.randn(6, 4)
    # Layer 1's dropout zeroes its whole output, leaving only the output bias.
    out = net.train()(x)
    assert_close(out, net.layers[2].bias.expand(6, 3))
    assert not torch.allclose(net.eval()(x), out)


def test_feedfwd_flattens_trailing_axes() -> None:
    net = FeedFwdNN(FF)
    x = torch.randn(5, 2, 2)
    assert_close(net(x), net(x.reshape(5, 4)))
    assert net(torch.randn(0, 4)).shape == (0, 3)


@pytest.mark.parametrize("shape", [(5, 5), (5, 2, 3), ()])
def test_feedfwd_wrong_width_is_value_error(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="FeedFwdNN expects"):
        FeedFwdNN(FF)(torch.randn(shape))


# --- ConvNN ---------------------------------------------------------------------------


def test_conv_structure_follows_params() -> None:
    net = ConvNN(CONV)
    convs = [m for m in net.features if isinstance(m, nn.Conv2d)]
    assert [(c.in_channels, c.out_channels) for c in convs] == [(2, 4), (4, 8)]
    assert sum(isinstance(m, nn.MaxPool2d) for m in net.features) == 2
    assert CONV.flat_features == 8 * 2 * 2
    assert net.head.layers[0].in_features == CONV.flat_features
    assert [layer.out_features for layer in net.head.layers] == [16, 3]


def test_conv_flat_and_image_inputs_agree() -> None:
    net = ConvNN(CONV).eval()
    images = torch.randn(5, 2, 8, 8)
    assert_close(net(images), net(images.reshape(5, 128)), rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(5, 1, 8, 8), (5, 2, 7, 7), (5, 64), (5, 2, 64), (128,)])
def test_conv_wrong_shape_is_value_error(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match=r"ConvNN expects input of shape \(N, 2, 8, 8\)"):
        ConvNN(CONV)(torch.randn(shape))


def test_conv_head_uses_each_layers_dropout() -> None:
    params = NNConvParams(
        input_dim=16, output_dim=3, hidden_dims=(8, 8), conv_channels=(4,),
        dropout_probs=(0.0, 1.0),
    )  # fmt: skip
    net = ConvNN(params).train()
    out = net(torch.randn(4, 1, 4, 4))
    assert_close(out, net.head.layers[2].bias.expand(4, 3))


# --- ViTNN ----------------------------------------------------------------------------


def test_vit_structure_follows_params() -> None:
    net = ViTNN(VIT)
    assert VIT.n_patches == 4
    assert tuple(net.pos_embed.shape) == (1, 5, 16)
    assert tuple(net.cls_token.shape) == (1, 1, 16)
    assert len(net.blocks) == 2
    block = net.blocks[0]
    assert isinstance(block, nn.TransformerEncoderLayer)
    assert block.norm_first and block.self_attn.batch_first
    assert block.linear1.out_features == 32 and block.self_attn.num_heads == 2
    assert net.patch_embed.kernel_size == (4, 4) and net.patch_embed.stride == (4, 4)
    # Small-normal init, not zeros or unit scale.
    assert 0.0 < net.pos_embed.std().item() < 0.05


def test_vit_flat_and_image_inputs_agree() -> None:
    net = ViTNN(VIT).eval()
    images = torch.randn(5, 2, 8, 8)
    assert_close(net(images), net(images.reshape(5, 128)), rtol=0, atol=0)


def test_vit_classifies_from_the_cls_token() -> None:
    net = ViTNN(VIT).eval()
    images = torch.randn(3, 2, 8, 8)
    seen: list[Tensor] = []
    net.norm.register_forward_hook(lambda _m, _i, out: seen.append(out))
    logits = net(images)
    assert tuple(seen[0].shape) == (3, 16)
    assert_close(logits, net.head(seen[0]))


@pytest.mark.parametrize("shape", [(5, 3, 8, 8), (5, 2, 4, 4), (5, 64), (5, 2, 8)])
def test_vit_wrong_shape_is_value_error(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match=r"ViTNN expects input of shape \(N, 2, 8, 8\)"):
        ViTNN(VIT)(torch.randn(shape))


# --- MoELinear ----------------------------------------------------------------------------


def _experts(layer: MoELinear, x: Tensor) -> Tensor:
    """Every expert's output for every row: (rows, experts, out)."""
    return torch.stack([expert(x) for expert in layer.experts], dim=1)


@pytest.mark.parametrize(("num_experts", "top_k"), [(1, 1), (0, 1), (4, 0), (4, 5), (2, -1)])
def test_moe_linear_validates(num_experts: int, top_k: int) -> None:
    with pytest.raises(ValueError, match="MoELinear needs"):
        MoELinear(4, 3, num_experts=num_experts, top_k=top_k)


def test_moe_linear_is_a_linear_drop_in() -> None:
    layer = MoELinear(4, 3, num_experts=3, top_k=2, bias=False)
    assert all(expert.bias is None for expert in layer.experts)
    assert tuple(layer.router.weight.shape) == (3, 4)
    x = torch.randn(2, 5, 4)
    out = layer(x)
    assert out.shape == (2, 5, 3)
    assert_close(out, layer(x.reshape(10, 4)).reshape(2, 5, 3))
    with pytest.raises(ValueError, match=r"\(\.\.\., 4\)"):
        layer(torch.randn(2, 5))


def test_moe_all_experts_is_the_dense_softmax_mixture() -> None:
    layer = MoELinear(4, 3, num_experts=4, top_k=4)
    x = torch.randn(7, 4)
    gates = torch.softmax(x @ layer.router.weight.T + layer.router.bias, dim=-1)
    expected = (gates.unsqueeze(-1) * _experts(layer, x)).sum(dim=1)
    assert_close(layer(x), expected)


def test_moe_top1_output_is_exactly_one_experts_output() -> None:
    layer = MoELinear(4, 3, num_experts=4, top_k=1)
    x = torch.randn(32, 4)
    out, per_expert = layer(x), _experts(layer, x)
    chosen = layer.router(x).argmax(dim=-1)
    assert chosen.unique().numel() > 1  # the check below covers several experts
    for row in range(32):
        matches = [e for e in range(4) if torch.allclose(out[row], per_expert[row, e], atol=1e-6)]
        assert matches == [chosen[row].item()]


def test_moe_top2_renormalizes_the_chosen_gates() -> None:
    layer = MoELinear(4, 3, num_experts=4, top_k=2)
    x = torch.randn(9, 4)
    probs = torch.softmax(layer.router(x), dim=-1)
    per_expert = _experts(layer, x)
    expected = torch.empty(9, 3)
    for row in range(9):
        first, second = probs[row].argsort(descending=True)[:2].tolist()
        p1, p2 = probs[row, first], probs[row, second]
        expected[row] = (p1 * per_expert[row, first] + p2 * per_expert[row, second]) / (p1 + p2)
    assert_close(layer(x), expected)


def test_moe_aux_loss_matches_the_switch_formula_and_trains_the_router() -> None:
    layer = MoELinear(4, 3, num_experts=4, top_k=2)
    assert layer.last_aux_loss is None
    x = torch.randn(16, 4)
    layer(x)
    aux = layer.last_aux_loss
    assert aux is not None and aux.ndim == 0
    assert math.isfinite(aux.item()) and aux.item() > 0
    probs = torch.softmax(layer.router(x), dim=-1).detach()
    frac = torch.bincount(probs.argmax(-1), minlength=4).float() / 16
    assert_close(aux.detach(), 4 * (frac * probs.mean(0)).sum())
    aux.backward()
    grad = layer.router.weight.grad
    assert grad is not None and grad.abs().sum() > 0
    # Each forward replaces the loss with that batch's.
    layer(x[:4])
    assert layer.last_aux_loss is not aux


def test_moe_aux_loss_is_one_for_uniform_routing_and_grows_when_it_collapses() -> None:
    layer = MoELinear(4, 3, num_experts=4, top_k=1)
    x = torch.randn(16, 4)
    with torch.no_grad():
        layer.router.weight.zero_()
        layer.router.bias.zero_()
    layer(x)
    # Uniform probabilities: Σ f_e · (1/E) · E = 1 whatever the (tied) top-1 picks.
    assert layer.last_aux_loss is not None
    assert_close(layer.last_aux_loss, torch.tensor(1.0))
    with torch.no_grad():
        layer.router.bias.copy_(torch.tensor([10.0, 0.0, 0.0, 0.0]))
    layer(x)
    assert layer.last_aux_loss is not None and layer.last_aux_loss.item() > 3.5


def test_moe_layer_copies_after_a_forward() -> None:
    layer = MoELinear(4, 3, num_experts=2, top_k=1)
    layer(torch.randn(3, 4))
    clone = copy.deepcopy(layer)
    assert clone.last_aux_loss is None
    assert layer.last_aux_loss is not None  # the original keeps its loss
    x = torch.randn(3, 4)
    assert_close(clone(x), layer(x))


# --- MoEFeedFwdNN ---------------------------------------------------------------------


def test_moe_net_structure_and_parameter_names() -> None:
    net = Nets.MOE(MOE)
    assert [type(layer) for layer in net.layers] == [MoELinear, MoELinear, nn.Linear]
    assert all(layer.num_experts == 4 and layer.top_k == 2 for layer in net.layers[:2])
    names = [name for name, _ in net.named_parameters()]
    assert all(name.startswith("layers.") for name in names)
    assert "layers.0.router.weight" in names and "layers.1.experts.3.bias" in names
    assert names[-2:] == ["layers.2.weight", "layers.2.bias"]


def test_moe_net_aux_loss() -> None:
    params = NNMoEParams(
        input_dim=4, output_dim=3, hidden_dims=(8, 8), num_experts=4, top_k=2,
        aux_loss_weight=0.5,
    )  # fmt: skip
    net = MoEFeedFwdNN(params)
    before = net.aux_loss()
    assert before.shape == () and before.item() == 0.0
    net(torch.randn(10, 4))
    per_layer: list[Tensor] = []
    for layer in net.layers[:2]:
        assert isinstance(layer, MoELinear) and layer.last_aux_loss is not None
        per_layer.append(layer.last_aux_loss)
    expected = 0.5 * (per_layer[0] + per_layer[1])
    assert_close(net.aux_loss(), expected)
    net.aux_loss().backward()
    assert net.layers[0].router.weight.grad is not None


# --- training ---------------------------------------------------------------------------


@pytest.mark.parametrize(("member", "params", "row", "cls"), CASES, ids=IDS)
def test_a_few_adam_steps_reduce_the_loss(
    member: Nets, params: NNParams, row: tuple[int, ...], cls: type[nn.Module]
) -> None:
    net = member(params).train()
    x, y = torch.randn(16, *row), torch.randint(0, 3, (16,))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    extra: Callable[[], Tensor] = getattr(net, "aux_loss", lambda: torch.zeros(()))

    def loss_value() -> Tensor:
        (inputs,), target = net.unpack_batch((x, y))
        return nn.functional.cross_entropy(net(inputs), target) + extra()

    first = loss_value()
    for _ in range(30):
        opt.zero_grad()
        loss = loss_value()
        loss.backward()
        opt.step()
    with torch.no_grad():
        last = loss_value()
    assert last.item() < 0.8 * first.item()
