"""LoRA adapter files (spec §11.1): ownership-based selection, atomic save, safe load."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _peft_tiny import assert_unchanged, snapshot
from torch import nn

from nnx.peft import LoRALinear, apply_lora_to, load_lora_weights, save_lora_weights
from nnx.peft.files import lora_state_dict


class Decoy(nn.Module):
    """A plain layer whose name contains lora_A: it must never leak into an adapter file."""

    def __init__(self) -> None:
        super().__init__()
        self.lora_A_projection = nn.Linear(4, 4)
        self.body = nn.Linear(4, 4)
        self.scaling_projection = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.scaling_projection(self.body(self.lora_A_projection(x)))
        return out


def wrapped(seed: int = 0) -> Decoy:
    torch.manual_seed(seed)
    net = Decoy()
    apply_lora_to(net, "body", r=2, alpha=4.0)
    for m in net.modules():
        if isinstance(m, LoRALinear):
            nn.init.normal_(m.lora_B.weight)
    return net


def test_the_file_holds_only_owned_lora_tensors(tmp_path: Path) -> None:
    net = wrapped()
    path = save_lora_weights(net, tmp_path / "adapter.pt")
    assert path == (tmp_path / "adapter.pt").resolve()
    state = torch.load(path, weights_only=True)
    assert sorted(state) == ["body.lora_A.weight", "body.lora_B.weight"]
    assert torch.equal(state["body.lora_B.weight"], net.body.lora_B.weight)
    assert not state["body.lora_A.weight"].requires_grad
    assert [p.name for p in tmp_path.iterdir()] == ["adapter.pt"]  # no temp left behind


def test_a_decoy_named_lora_a_is_never_selected_even_when_it_is_wrapped(tmp_path: Path) -> None:
    net = wrapped()
    apply_lora_to(net, "lora_A_projection", r=1, alpha=1.0)
    keys = sorted(lora_state_dict(net))
    assert keys == ["body.lora_A.weight", "body.lora_B.weight",
                    "lora_A_projection.lora_A.weight", "lora_A_projection.lora_B.weight"]
    assert not any("base" in k for k in keys)


def test_round_trip_into_a_fresh_wrapped_model(tmp_path: Path) -> None:
    net = wrapped(0)
    save_lora_weights(net, tmp_path / "a.pt")
    fresh = wrapped(0)
    with torch.no_grad():
        fresh.body.lora_B.weight.zero_()
        fresh.body.lora_A.weight.zero_()
    assert load_lora_weights(fresh, tmp_path / "a.pt") == 2
    x = torch.randn(3, 4)
    assert torch.equal(fresh(x), net(x))
    assert load_lora_weights(fresh, lora_state_dict(net)) == 2  # a dict source too


def test_a_full_checkpoint_cannot_overwrite_a_frozen_base() -> None:
    source = wrapped(0)
    dest = wrapped(1)
    base_before = {k: v.clone() for k, v in dest.state_dict().items() if "lora_" not in k
                   or "projection" in k}
    full = {k: v + 100 for k, v in source.state_dict().items()}
    assert load_lora_weights(dest, full) == 2
    for k, v in base_before.items():
        assert torch.equal(dest.state_dict()[k], v), k
    assert torch.equal(dest.body.lora_B.weight, source.body.lora_B.weight + 100)


def test_a_wrong_shaped_owned_tensor_raises_torch_s_error_and_copies_nothing() -> None:
    dest = wrapped(1)
    before = snapshot(dest)
    bad = {"body.lora_A.weight": torch.zeros(2, 4) + 5, "body.lora_B.weight": torch.zeros(4, 3)}
    with pytest.raises(RuntimeError, match=r"size mismatch for body\.lora_B\.weight"):
        load_lora_weights(dest, bad)
    assert_unchanged(dest, before)


def test_loading_keeps_the_destination_dtype_and_modes() -> None:
    source = wrapped(0)
    dest = wrapped(1).double()
    dest.eval()
    dest.body.train()
    assert load_lora_weights(dest, lora_state_dict(source)) == 2
    assert dest.body.lora_A.weight.dtype == torch.float64
    torch.testing.assert_close(dest.body.lora_A.weight, source.body.lora_A.weight.double())
    assert not dest.training and dest.body.training and dest.body.lora_A.training
    assert not dest.lora_A_projection.training


def test_refusals(tmp_path: Path) -> None:
    plain = Decoy()
    with pytest.raises(ValueError, match="holds no LoRALinear; wrap it with apply_lora_to"):
        save_lora_weights(plain, tmp_path / "x.pt")
    assert not (tmp_path / "x.pt").exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="holds no LoRALinear"):
        load_lora_weights(plain, {})
    net = wrapped()
    before = snapshot(net)
    with pytest.raises(ValueError, match=r"none of the source's 1 tensors is a lora_A / lora_B"
                                         r" of this module; expected names like "
                                         r"'body\.lora_A\.weight'"):
        load_lora_weights(net, {"other.lora_A.weight": torch.zeros(2, 4)})
    with pytest.raises(TypeError, match=r"body\.lora_A\.weight must be a tensor; got list"):
        load_lora_weights(net, {"body.lora_A.weight": [1.0]})  # type: ignore[dict-item]
    assert_unchanged(net, before)


def test_a_shared_container_s_adapter_is_saved_under_every_state_dict_name() -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = nn.Sequential(nn.Linear(4, 4))
            self.alias = self.block

    net = Twice()
    apply_lora_to(net, "block.0", r=2, alpha=2.0)
    assert sorted(lora_state_dict(net)) == sorted(
        k for k in net.state_dict() if ".lora_" in k)
    assert len(lora_state_dict(net)) == 4
