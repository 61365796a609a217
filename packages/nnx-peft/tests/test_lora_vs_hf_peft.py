"""LoRA against Hugging Face PEFT (a test-only dependency) on the same weights."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from nnx.peft import LoRALinear, apply_lora_to, merge_lora

peft = pytest.importorskip("peft")


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 10)
        self.fc2 = nn.Linear(10, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.fc2(torch.relu(self.fc1(x)))
        return out


R, ALPHA = 3, 5.0
X = torch.randn(7, 6, generator=torch.Generator().manual_seed(1))


def pair() -> tuple[nn.Module, nn.Module]:
    """(nnx-wrapped, PEFT-wrapped) copies of one base, NNx's adapter values copied in."""
    torch.manual_seed(0)
    base = Net()
    ours = copy.deepcopy(base)
    apply_lora_to(ours, "fc*", r=R, alpha=ALPHA)
    config = peft.LoraConfig(r=R, lora_alpha=ALPHA, target_modules=["fc1", "fc2"],
                             lora_dropout=0.0)
    theirs = peft.get_peft_model(copy.deepcopy(base), config)
    return ours, theirs


def hf_layer(theirs: nn.Module, name: str) -> nn.Module:
    return theirs.base_model.model.get_submodule(name)


def copy_adapters(ours: nn.Module, theirs: nn.Module) -> None:
    for name in ("fc1", "fc2"):
        mine, hf = ours.get_submodule(name), hf_layer(theirs, name)
        assert isinstance(mine, LoRALinear)
        with torch.no_grad():
            nn.init.normal_(mine.lora_B.weight)
            hf.lora_A["default"].weight.copy_(mine.lora_A.weight)
            hf.lora_B["default"].weight.copy_(mine.lora_B.weight)
        assert hf.scaling["default"] == mine.scaling == ALPHA / R


def test_at_initialization_both_are_exactly_the_base() -> None:
    torch.manual_seed(0)
    base = Net()
    ours, theirs = pair()
    assert torch.equal(ours(X), base(X))
    assert torch.equal(theirs(X), base(X))
    assert torch.equal(ours(X), theirs(X))


def test_forward_matches_peft_to_1e_6() -> None:
    ours, theirs = pair()
    copy_adapters(ours, theirs)
    torch.testing.assert_close(ours(X), theirs(X), rtol=0, atol=1e-6)


def test_merged_weight_matches_merge_and_unload() -> None:
    ours, theirs = pair()
    copy_adapters(ours, theirs)
    expected = {n: ours.get_submodule(n).base.weight.detach()
                + (ALPHA / R) * ours.get_submodule(n).lora_B.weight.detach()
                @ ours.get_submodule(n).lora_A.weight.detach() for n in ("fc1", "fc2")}
    merge_lora(ours, unload=True)
    unloaded = theirs.merge_and_unload()
    for name in ("fc1", "fc2"):
        mine, hf = ours.get_submodule(name), unloaded.get_submodule(name)
        assert type(mine) is nn.Linear and type(hf) is nn.Linear
        torch.testing.assert_close(mine.weight, hf.weight, rtol=0, atol=1e-6)
        torch.testing.assert_close(mine.weight, expected[name], rtol=0, atol=1e-6)
        assert torch.equal(mine.bias, hf.bias)
    torch.testing.assert_close(ours(X), unloaded(X), rtol=0, atol=1e-6)


def test_state_dict_key_shape_follows_peft() -> None:
    ours, theirs = pair()
    mine = sorted(k for k in ours.state_dict() if "lora_" in k)
    hf = sorted(k.replace("base_model.model.", "").replace(".default", "")
                for k in theirs.state_dict() if "lora_" in k)
    assert mine == hf == ["fc1.lora_A.weight", "fc1.lora_B.weight", "fc2.lora_A.weight",
                          "fc2.lora_B.weight"]
