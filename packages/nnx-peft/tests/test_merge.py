"""merge_lora / unmerge_lora (issue 17, HF PEFT merge semantics): fold, unload, undo."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nnx import NNOptimParams
from nnx.optimizers import build_param_groups
from nnx.peft import LoRALinear, apply_lora_to, merge_lora, unmerge_lora


def plain(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def trained_lora(seed: int = 0, dtype: torch.dtype = torch.float32) -> nn.Sequential:
    net = plain(seed).to(dtype)
    apply_lora_to(net, "*", r=2, alpha=3.0)
    for m in net.modules():
        if isinstance(m, LoRALinear):
            with torch.no_grad():
                m.lora_B.weight.normal_()
    return net


X = torch.randn(6, 4, generator=torch.Generator().manual_seed(3))


def test_merge_folds_the_scaled_update_and_keeps_the_forward() -> None:
    net = trained_lora()
    expected = net(X).detach()
    w0 = net[0].base.weight.detach().clone()
    delta = 1.5 * net[0].lora_B.weight @ net[0].lora_A.weight
    assert merge_lora(net) == 2
    assert net[0].merged and net[2].merged
    torch.testing.assert_close(net[0].base.weight, w0 + delta, rtol=0, atol=1e-6)
    torch.testing.assert_close(net(X), expected, rtol=0, atol=1e-6)
    assert merge_lora(net) == 0  # already merged: nothing double-counts


def test_unmerge_restores_the_pre_merge_weight_and_forward() -> None:
    net = trained_lora()
    expected = net(X).detach()
    w0 = net[2].base.weight.detach().clone()
    merge_lora(net)
    assert unmerge_lora(net) == 2 and unmerge_lora(net) == 0
    assert not net[0].merged
    torch.testing.assert_close(net[2].base.weight, w0, rtol=0, atol=1e-6)
    torch.testing.assert_close(net(X), expected, rtol=0, atol=1e-6)


def test_a_merged_wrapper_freezes_its_adapters_so_training_cannot_double_count() -> None:
    net = trained_lora()
    optim = NNOptimParams.builder().sgd(max_lr=0.1).build()
    merge_lora(net)
    assert not net[0].lora_A.weight.requires_grad and not net[0].lora_B.weight.requires_grad
    with pytest.raises(ValueError, match="no trainable parameters"):
        build_param_groups(net, optim)
    assert not net(X).requires_grad  # forward is the frozen base only: nothing to train
    unmerge_lora(net)
    assert net[0].lora_A.weight.requires_grad and net[0].lora_B.weight.requires_grad
    (group,) = build_param_groups(net, optim)
    assert len([p for p in group["params"] if p.requires_grad]) == 4


def test_unmerge_restores_flags_a_user_had_set() -> None:
    net = trained_lora()
    net[0].lora_A.weight.requires_grad_(False)
    merge_lora(net)
    unmerge_lora(net)
    assert not net[0].lora_A.weight.requires_grad and net[0].lora_B.weight.requires_grad


def test_unload_gives_back_the_plain_architecture_loading_strictly() -> None:
    net = trained_lora()
    expected = net(X).detach()
    base = net[0].base
    assert merge_lora(net, unload=True) == 2
    assert net[0] is base and type(net[2]) is nn.Linear
    assert not any(isinstance(m, LoRALinear) for m in net.modules())
    fresh = plain(seed=9)
    fresh.load_state_dict(net.state_dict(), strict=True)
    torch.testing.assert_close(fresh(X), expected, rtol=0, atol=1e-6)
    assert not net[0].weight.requires_grad  # bases stay frozen, as in HF merge_and_unload


def test_unload_after_a_merge_and_through_a_shared_container() -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = nn.Sequential(nn.Linear(4, 4))
            self.alias = self.block

    net = Twice()
    apply_lora_to(net, "alias.0", r=2, alpha=2.0)
    assert merge_lora(net) == 1
    assert merge_lora(net, unload=True) == 0
    assert type(net.block[0]) is nn.Linear and net.alias[0] is net.block[0]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_layers_merge_in_their_dtype_with_an_fp32_product(dtype: torch.dtype) -> None:
    net = trained_lora(dtype=dtype)
    layer = net[0]
    a, b = layer.lora_A.weight.float(), layer.lora_B.weight.float()
    expected = layer.base.weight + (1.5 * (b @ a)).to(dtype)
    merge_lora(net)
    assert layer.base.weight.dtype == dtype
    assert torch.equal(layer.base.weight, expected)


def test_merge_keeps_modes_and_refuses_a_module_without_adapters() -> None:
    net = trained_lora().eval()
    net[0].train()
    merge_lora(net)
    assert not net.training and net[0].training and not net[2].training
    with pytest.raises(ValueError, match="holds no LoRALinear"):
        merge_lora(plain())
    with pytest.raises(ValueError, match="holds no LoRALinear"):
        unmerge_lora(plain())
    lone = LoRALinear(nn.Linear(4, 4), 2, 2.0)
    with pytest.raises(ValueError, match="is itself a LoRALinear"):
        merge_lora(lone, unload=True)
    assert not lone.merged


def test_delta_weight_is_the_per_wrapper_hook() -> None:
    layer = trained_lora()[0]
    torch.testing.assert_close(layer.delta_weight(),
                               1.5 * layer.lora_B.weight @ layer.lora_A.weight)
    assert layer.merge() and not layer.merge() and layer.unmerge() and not layer.unmerge()
