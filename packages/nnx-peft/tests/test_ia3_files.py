"""save_ia3_weights / load_ia3_weights (spec §11.1 adapter files): each IA3Linear's
scaling only, chosen by ownership, written atomically."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from nnx.peft.ia3 import apply_ia3_to, ia3_state_dict, load_ia3_weights, save_ia3_weights


class Net(nn.Module):
    """A wrapped Linear, and a plain one whose name looks like an adapter tensor's."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(4, 3)
        self.ff = nn.Linear(3, 3)
        self.scaling_projection = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.scaling_projection(self.ff(self.q(x)))
        return out


def _adapted(seed: int = 0) -> Net:
    torch.manual_seed(seed)
    net = Net()
    apply_ia3_to(net, "q", "ff", feedforward=["ff"])
    with torch.no_grad():
        net.q.scaling.uniform_(0.5, 1.5)
        net.ff.scaling.uniform_(0.5, 1.5)
    return net


def test_the_file_holds_only_the_scalings_and_reloads_into_a_fresh_model(tmp_path: Path) -> None:
    net = _adapted()
    path = save_ia3_weights(net, tmp_path / "ia3.pt")
    state = torch.load(path, weights_only=True)
    assert sorted(state) == ["ff.scaling", "q.scaling"]  # no scaling_projection.* leaks
    fresh = Net()
    fresh.load_state_dict({k.replace(".base.", "."): v for k, v in net.state_dict().items()
                           if "scaling" not in k or "projection" in k}, strict=False)
    apply_ia3_to(fresh, "q", "ff", feedforward=["ff"])
    assert load_ia3_weights(fresh, path) == 2
    x = torch.randn(5, 4)
    assert torch.equal(fresh(x), net(x))
    assert sorted(ia3_state_dict(net)) == ["ff.scaling", "q.scaling"]


def test_a_full_checkpoint_cannot_overwrite_a_frozen_base_tensor() -> None:
    net = _adapted()
    full = {k: torch.full_like(v, 7.0) for k, v in net.state_dict().items()}
    dest = _adapted(seed=1)
    before = {k: v.clone() for k, v in dest.state_dict().items()}
    assert load_ia3_weights(dest, full) == 2
    for key, value in dest.state_dict().items():
        if key in ("q.scaling", "ff.scaling"):
            assert torch.equal(value, torch.full_like(value, 7.0))
        else:
            assert torch.equal(value, before[key]), key


def test_a_wrong_shaped_owned_tensor_raises_before_anything_is_copied() -> None:
    dest = _adapted()
    before = {k: v.clone() for k, v in dest.state_dict().items()}
    bad = {"q.scaling": torch.ones(3), "ff.scaling": torch.ones(9)}
    with pytest.raises(RuntimeError, match="size mismatch"):
        load_ia3_weights(dest, bad)
    assert all(torch.equal(v, before[k]) for k, v in dest.state_dict().items())


def test_nothing_accepted_and_bad_sources_are_refused() -> None:
    dest = _adapted()
    before = {k: v.clone() for k, v in dest.state_dict().items()}
    with pytest.raises(ValueError, match=r"none of the source's 1 tensors.*'q\.scaling'"):
        load_ia3_weights(dest, {"scaling_projection.weight": torch.ones(2, 3)})
    with pytest.raises(TypeError, match=r"q\.scaling must be a tensor; got list"):
        load_ia3_weights(dest, {"q.scaling": [1.0, 2.0, 3.0]})  # type: ignore[dict-item]
    assert all(torch.equal(v, before[k]) for k, v in dest.state_dict().items())


def test_a_module_without_ia3_is_refused_before_any_file_is_touched(tmp_path: Path) -> None:
    path = tmp_path / "ia3.pt"
    path.write_bytes(b"previous")
    with pytest.raises(ValueError, match="save_ia3_weights: the module holds no IA3Linear"):
        save_ia3_weights(Net(), path)
    assert path.read_bytes() == b"previous"
    with pytest.raises(ValueError, match="load_ia3_weights: the module holds no IA3Linear"):
        load_ia3_weights(Net(), {})
    assert [p.name for p in tmp_path.iterdir()] == ["ia3.pt"]  # no stray temp file


def test_loading_keeps_the_destination_placement_and_modes(tmp_path: Path) -> None:
    path = save_ia3_weights(_adapted(), tmp_path / "ia3.pt")
    torch.manual_seed(0)
    dest = Net().to(torch.bfloat16)
    apply_ia3_to(dest, "q", "ff", feedforward=["ff"])
    dest.q.eval()
    assert load_ia3_weights(dest, str(path)) == 2
    assert dest.q.scaling.dtype == torch.bfloat16
    assert not dest.q.training and dest.ff.training


def test_a_shared_wrapper_is_saved_under_each_of_its_names() -> None:
    torch.manual_seed(0)
    net = nn.Module()
    net.block = nn.Sequential(nn.Linear(2, 2))
    net.alias = net.block
    apply_ia3_to(net, "block.0")
    assert sorted(ia3_state_dict(net)) == ["alias.0.scaling", "block.0.scaling"]
