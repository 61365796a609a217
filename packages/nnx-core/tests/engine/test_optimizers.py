"""The shared build hook: AdamW vs Adam, param groups, strict ownership (§3.1, §7, §8.1)."""

from __future__ import annotations

import pytest
import torch
from _support.optimizers import EncoderHead, per_parameter, single_weight, spec_example_groups
from torch import nn

from nnx import NNOptimParams, NNParamGroupSpec, Optims, build_optimizer, build_param_groups


def test_adamw_builder_variant_builds_torch_adamw():
    module, _ = single_weight(1.0)
    opt = build_optimizer(module, NNOptimParams.builder().adamw(max_lr=1e-3).build())
    assert type(opt) is torch.optim.AdamW
    assert opt.param_groups[0]["weight_decay"] == 1e-2


@pytest.mark.parametrize(
    ("name", "cls", "extra"),
    [
        (Optims.ADAM, torch.optim.Adam, {"amsgrad": False}),
        (Optims.ADAM_AMSGRAD, torch.optim.Adam, {"amsgrad": True}),
        (Optims.ADAMW, torch.optim.AdamW, {}),
        (Optims.SGD, torch.optim.SGD, {"nesterov": False, "momentum": 0.0}),
        (Optims.SGD_NESTEROV, torch.optim.SGD, {"nesterov": True, "momentum": 0.9}),
    ],
)
def test_enum_factory_builds_each_optimizer(name, cls, extra):
    net = nn.Linear(2, 2)
    momentum = 0.9 if name is Optims.SGD_NESTEROV else None
    opt = name(net=net, lr_start=1e-3, momentum=momentum)
    assert type(opt) is cls
    group = opt.param_groups[0]
    assert group["lr"] == 1e-3
    for key, value in extra.items():
        assert group[key] == value
    if name.is_adam_family:
        assert group["betas"] == (0.9, 0.999) and group["eps"] == 1e-8


def test_non_strict_unmatched_join_a_default_group_and_empty_patterns_are_silent():
    net = EncoderHead()
    optim = NNOptimParams(max_lr=1e-3, weight_decay=0.1, param_groups=[
        NNParamGroupSpec(name_pattern="encoder.*", lr=1e-4),
        NNParamGroupSpec(name_pattern="decoder.*", lr=1e-2),  # matches nothing
    ])
    groups = build_param_groups(net, optim)
    assert [g["name"] for g in groups] == ["encoder.*", "default"]
    assert groups[1]["lr"] == 1e-3 and groups[1]["weight_decay"] == 0.1
    assert sum(len(g["params"]) for g in groups) == 4


def test_strict_drops_unmatched_and_refuses_a_spec_set_matching_nothing():
    net = nn.Module()
    net.G = nn.Linear(2, 2)
    net.D = nn.Linear(2, 1)
    g_only = NNOptimParams(param_groups=[NNParamGroupSpec(name_pattern="G.*")])
    opt = build_optimizer(net, g_only, strict_param_groups=True)
    owned = {id(p) for group in opt.param_groups for p in group["params"]}
    assert owned == {id(p) for p in net.G.parameters()}
    nothing = NNOptimParams(param_groups=[NNParamGroupSpec(name_pattern="X.*")])
    with pytest.raises(ValueError, match=r"\(strict\): param_groups 'X\.\*' match no trainable"):
        build_optimizer(net, nothing, strict_param_groups=True)
    # Non-strict, the same specs fall back to the default group.
    assert len(build_param_groups(net, nothing)) == 1


def test_without_param_groups_every_parameter_is_in_the_one_group_frozen_ones_included():
    """§3.1: "every parameter in one group when param_groups is None" (§6.5: so gradual
    unfreezing trains); with param_groups, parameters frozen at build time are dropped."""
    net = EncoderHead()
    for p in net.encoder.parameters():
        p.requires_grad_(False)
    for strict in (False, True):
        (group,) = build_param_groups(net, NNOptimParams(), strict=strict)
        assert [id(p) for p in group["params"]] == [id(p) for p in net.parameters()]
    specs = NNOptimParams(param_groups=[NNParamGroupSpec(name_pattern="*")])
    for strict in (False, True):
        groups = build_param_groups(net, specs, strict=strict)
        owned = {id(p) for g in groups for p in g["params"]}
        assert owned == {id(p) for p in net.head.parameters()}
    for p in net.head.parameters():
        p.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        build_optimizer(net, NNOptimParams())


@pytest.mark.parametrize("optim", [
    NNOptimParams.builder().adamw(max_lr=0.1, weight_decay=0.5).build(),
    NNOptimParams.builder().sgd(max_lr=0.1, momentum=0.9, weight_decay=0.5).build(),
    NNOptimParams.builder().adam(max_lr=0.1, weight_decay=0.5).build(),
], ids=["adamw", "sgd", "adam"])
def test_a_frozen_parameter_in_the_group_never_moves_not_even_by_weight_decay(optim):
    net = EncoderHead()
    for p in net.encoder.parameters():
        p.requires_grad_(False)
    optimizer = build_optimizer(net, optim)
    frozen = {k: v.detach().clone() for k, v in net.encoder.state_dict().items()}
    head = {k: v.detach().clone() for k, v in net.head.state_dict().items()}
    for _ in range(3):
        optimizer.zero_grad()
        net.head(net.encoder(torch.randn(5, 3))).pow(2).sum().backward()
        optimizer.step()
    assert all(torch.equal(v, net.encoder.state_dict()[k]) for k, v in frozen.items())
    assert not all(torch.equal(v, net.head.state_dict()[k]) for k, v in head.items())


def test_resolved_group_lr_must_be_finite():
    net = EncoderHead()
    optim = NNOptimParams(max_lr=1e300, param_groups=[
        NNParamGroupSpec(name_pattern="head.*", lr_multiplier=1e300)])
    with pytest.raises(ValueError, match=r"param group 'head\.\*' resolved lr must be a finite"):
        build_optimizer(net, optim)


def test_group_overrides_apply_under_adamw_too():
    net = EncoderHead()
    optim = NNOptimParams(name=Optims.ADAMW, max_lr=1e-3, weight_decay=5e-4,
                          param_groups=spec_example_groups())
    opt = build_optimizer(net, optim)
    assert type(opt) is torch.optim.AdamW
    assert per_parameter(opt, net)["encoder.bias"] == (pytest.approx(1e-5), 0.0)


def test_build_optimizer_refuses_other_configs():
    with pytest.raises(TypeError, match="needs an NNOptimParams"):
        build_optimizer(nn.Linear(1, 1), {"name": "ADAM"})  # type: ignore[arg-type]


def test_building_changes_nothing_in_the_model():
    net = EncoderHead()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    flags = [p.requires_grad for p in net.parameters()]
    build_optimizer(net, NNOptimParams(param_groups=spec_example_groups()))
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert flags == [p.requires_grad for p in net.parameters()]
