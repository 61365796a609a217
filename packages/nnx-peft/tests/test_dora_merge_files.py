"""DoRA with LoRA's helpers: merge_lora / unmerge_lora fold the magnitude (equal to HF
PEFT's merge_and_unload), save_lora_weights holds lora_A/B only, the magnitude rides the
full state_dict()."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from torch import nn

from nnx.peft import (
    apply_dora_to,
    load_lora_weights,
    merge_lora,
    save_lora_weights,
    unmerge_lora,
)


def mlp(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))


def _trained(net: nn.Sequential) -> nn.Sequential:
    """DoRA on both Linears with what training would have grown: nonzero B, moved magnitude."""
    apply_dora_to(net, "0", "2", r=2, alpha=4.0)
    with torch.no_grad():
        for i in (0, 2):
            net[i].lora_B.weight.normal_()
            net[i].magnitude.mul_(torch.empty_like(net[i].magnitude).uniform_(0.5, 1.5))
    return net


def test_merge_lora_unload_equals_hf_merge_and_unload_and_loads_into_the_plain_net() -> None:
    peft = pytest.importorskip("peft")
    plain = mlp()
    theirs = peft.get_peft_model(copy.deepcopy(plain), peft.LoraConfig(
        r=2, lora_alpha=4, target_modules=["0", "2"], use_dora=True))
    ours = _trained(copy.deepcopy(plain))
    for i in ("0", "2"):
        hf = theirs.base_model.model.get_submodule(i)
        with torch.no_grad():
            hf.lora_A["default"].weight.copy_(ours.get_submodule(i).lora_A.weight)
            hf.lora_B["default"].weight.copy_(ours.get_submodule(i).lora_B.weight)
            hf.lora_magnitude_vector["default"].weight.copy_(ours.get_submodule(i).magnitude)
    x = torch.randn(5, 4)
    before = ours(x).detach()
    hf_merged = theirs.merge_and_unload()
    assert merge_lora(ours, unload=True) == 2
    assert type(ours[0]) is nn.Linear and type(ours[2]) is nn.Linear
    for i in (0, 2):
        torch.testing.assert_close(ours[i].weight, hf_merged[i].weight, rtol=0, atol=1e-6)
        assert torch.equal(ours[i].bias, hf_merged[i].bias)
    torch.testing.assert_close(ours(x), before, rtol=0, atol=1e-6)
    fresh = mlp(seed=3)
    fresh.load_state_dict(ours.state_dict(), strict=True)
    torch.testing.assert_close(fresh(x), before, rtol=0, atol=1e-6)


def test_merge_then_unmerge_lora_restores_the_base_and_the_trainable_flags() -> None:
    net = _trained(mlp())
    w0 = net[0].base.weight.detach().clone()
    x = torch.randn(5, 4)
    before = net(x).detach()
    assert merge_lora(net) == 2 and merge_lora(net) == 0
    assert net[0].merged and not net[0].magnitude.requires_grad
    torch.testing.assert_close(net(x), before, rtol=0, atol=1e-6)
    assert unmerge_lora(net) == 2 and unmerge_lora(net) == 0
    torch.testing.assert_close(net[0].base.weight, w0, rtol=0, atol=1e-6)
    assert net[0].magnitude.requires_grad and net[0].lora_A.weight.requires_grad
    torch.testing.assert_close(net(x), before, rtol=0, atol=1e-6)


def test_the_lora_file_omits_magnitude_and_the_full_state_dict_carries_it(tmp_path: Path) -> None:
    net = _trained(mlp())
    path = save_lora_weights(net, tmp_path / "dora_lora.pt")
    saved = torch.load(path, weights_only=True)
    assert sorted(saved) == ["0.lora_A.weight", "0.lora_B.weight",
                             "2.lora_A.weight", "2.lora_B.weight"]
    x = torch.randn(5, 4)
    # lora_A/B alone do not restore a DoRA layer: the magnitude is part of it.
    partial = apply_dora_to(fresh := mlp(), "0", "2", r=2, alpha=4.0)
    assert partial == 2 and load_lora_weights(fresh, path) == 4
    assert not torch.allclose(fresh(x), net(x), atol=1e-4)
    # The complete state_dict() does.
    full = mlp(seed=7)
    apply_dora_to(full, "0", "2", r=2, alpha=4.0)
    full.load_state_dict(net.state_dict(), strict=True)
    assert torch.equal(full(x), net(x))
    assert "0.magnitude" in net.state_dict()
