"""IA3Linear (spec §11): HF PEFT's (IA)^3 layer, for both feed-forward and other targets."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from nnx.peft import IA3Linear


class _Block(nn.Module):
    """An attention-ish projection ``q`` and a feed-forward ``ff``, as (IA)^3 sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(5, 4)
        self.ff = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.ff(torch.relu(self.q(x)))
        return out


def test_scaling_starts_at_ones_and_the_layer_equals_its_base() -> None:
    torch.manual_seed(0)
    for ff, size in ((False, 4), (True, 5)):
        base = nn.Linear(5, 4)
        layer = IA3Linear(base, feedforward=ff)
        assert layer.scaling.shape == (size,) and torch.equal(layer.scaling, torch.ones(size))
        x = torch.randn(3, 5)
        assert torch.equal(layer(x), base(x))


def test_base_is_frozen_and_only_the_scaling_trains() -> None:
    base = nn.Linear(3, 2)
    layer = IA3Linear(base)
    assert layer.base is base
    assert [n for n, p in layer.named_parameters() if p.requires_grad] == ["scaling"]
    assert not base.weight.requires_grad and not base.bias.requires_grad
    layer(torch.randn(4, 3)).sum().backward()
    assert layer.scaling.grad is not None and base.weight.grad is None


def test_output_scaling_multiplies_the_output_bias_included() -> None:
    torch.manual_seed(1)
    base = nn.Linear(3, 2)
    layer = IA3Linear(base)
    with torch.no_grad():
        layer.scaling.copy_(torch.tensor([2.0, -0.5]))
    x = torch.randn(4, 3)
    torch.testing.assert_close(layer(x), (x @ base.weight.T + base.bias) * layer.scaling,
                               rtol=0, atol=1e-7)


def test_feedforward_scaling_multiplies_the_input() -> None:
    torch.manual_seed(1)
    base = nn.Linear(3, 2)
    layer = IA3Linear(base, feedforward=True)
    with torch.no_grad():
        layer.scaling.copy_(torch.tensor([2.0, -0.5, 0.25]))
    x = torch.randn(4, 3)
    torch.testing.assert_close(layer(x), base(x * layer.scaling), rtol=0, atol=0)


@pytest.mark.parametrize("training", [True, False])
def test_the_wrapper_copies_the_base_mode(training: bool) -> None:
    base = nn.Linear(2, 2).train(training)
    assert IA3Linear(base).training is training
    assert base.training is training


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_scaling_is_allocated_from_the_base_weight_dtype(dtype: torch.dtype) -> None:
    base = nn.Linear(3, 2).to(dtype)
    before = base.weight
    layer = IA3Linear(base)
    assert layer.scaling.dtype == dtype and layer.scaling.device == base.weight.device
    assert layer.base.weight is before and before.dtype == dtype  # the base is never recast


def test_a_meta_skeleton_composes() -> None:
    base = nn.Linear(3, 2, device="meta")
    layer = IA3Linear(base, feedforward=True)
    assert layer.scaling.is_meta and layer.scaling.shape == (3,)
    assert layer(torch.empty(1, 3, device="meta")).shape == (1, 2)


def test_bad_arguments_are_refused_before_anything_changes() -> None:
    base = nn.Linear(3, 2)
    with pytest.raises(TypeError, match=r"IA3Linear wraps an nn\.Linear"):
        IA3Linear(nn.Conv1d(1, 1, 1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"IA3Linear\.feedforward must be a bool"):
        IA3Linear(base, feedforward=1)  # type: ignore[arg-type]
    assert base.weight.requires_grad and base.bias.requires_grad  # nothing was frozen


def test_forward_equals_hf_peft_for_both_kinds_of_target() -> None:
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    ours = _Block()
    theirs = peft.get_peft_model(
        copy.deepcopy(ours),
        peft.IA3Config(target_modules=["q", "ff"], feedforward_modules=["ff"]),
    )
    ours.q = IA3Linear(ours.q)  # type: ignore[assignment]
    ours.ff = IA3Linear(ours.ff, feedforward=True)  # type: ignore[assignment]
    q_scale = torch.rand(4) + 0.5  # random, non-one values in both models
    ff_scale = torch.rand(4) - 0.5
    hf_q = theirs.base_model.model.q
    hf_ff = theirs.base_model.model.ff
    assert hf_q.ia3_l["default"].shape == (4, 1)    # output-side: out_features
    assert hf_ff.ia3_l["default"].shape == (1, 4)   # input-side: in_features
    with torch.no_grad():
        ours.q.scaling.copy_(q_scale)
        ours.ff.scaling.copy_(ff_scale)
        hf_q.ia3_l["default"].copy_(q_scale.view(4, 1))
        hf_ff.ia3_l["default"].copy_(ff_scale.view(1, 4))
    x = torch.randn(6, 5)
    torch.testing.assert_close(ours(x), theirs(x), rtol=0, atol=1e-6)
    torch.testing.assert_close(ours.q(x), hf_q(x), rtol=0, atol=1e-6)
    h = torch.randn(6, 4)
    torch.testing.assert_close(ours.ff(h), hf_ff(h), rtol=0, atol=1e-6)


def test_non_linear_and_lazy_bases_are_refused_like_lora() -> None:
    with pytest.raises(TypeError, match=r"IA3Linear wraps an nn\.Linear"):
        IA3Linear(nn.Conv1d(2, 2, 1))  # type: ignore[arg-type]
    lazy = nn.LazyLinear(3)
    with pytest.raises(ValueError, match="uninitialized lazy Linear"):
        IA3Linear(lazy)
    assert not hasattr(lazy, "scaling")
