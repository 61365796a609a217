"""DoRALinear (spec §11 DoRA): forward, gradients and merge equal to HF PEFT's
``LoraConfig(use_dora=True)``, the precision rules, zero rows, placement and modes."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch import nn

from nnx.peft.dora import DoRALinear
from nnx.peft.lora import LoRALinear


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(6, 5)
        self.out = nn.Linear(5, 3, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.out(torch.tanh(self.q(x)))
        return out


def _ours(dropout: float = 0.0, dtype: torch.dtype = torch.float32) -> _Net:
    """Our net with both Linears DoRA-wrapped and random (non-init) A / B / magnitude."""
    torch.manual_seed(0)
    ours = _Net().to(dtype)
    for name in ("q", "out"):
        mine = DoRALinear(getattr(ours, name), r=2, alpha=3.0, dropout=dropout)
        setattr(ours, name, mine)
    torch.manual_seed(1)
    with torch.no_grad():
        for name in ("q", "out"):
            mine = getattr(ours, name)
            mine.lora_A.weight.normal_()
            mine.lora_B.weight.normal_()
            mine.magnitude.uniform_(0.5, 2.0)
    return ours


def _pair(dropout: float = 0.0, dtype: torch.dtype = torch.float32) -> tuple[_Net, Any]:
    """:func:`_ours`, and HF PEFT's net on the same base weights and the same A / B /
    magnitude values."""
    peft = pytest.importorskip("peft")
    ours = _ours(dropout, dtype)
    torch.manual_seed(0)
    theirs = peft.get_peft_model(_Net().to(dtype), peft.LoraConfig(
        r=2, lora_alpha=3, target_modules=["q", "out"], lora_dropout=dropout, use_dora=True))
    for name in ("q", "out"):
        mine = getattr(ours, name)
        hf = getattr(theirs.base_model.model, name)
        assert torch.equal(hf.base_layer.weight, mine.base.weight)  # the same base weights
        with torch.no_grad():
            hf.lora_A["default"].weight.copy_(mine.lora_A.weight)
            hf.lora_B["default"].weight.copy_(mine.lora_B.weight)
            hf.lora_magnitude_vector["default"].weight.copy_(mine.magnitude)
    return ours, theirs


def test_magnitude_starts_at_the_row_norms_and_the_layer_equals_its_base() -> None:
    torch.manual_seed(0)
    base = nn.Linear(4, 3)
    layer = DoRALinear(base, r=2, alpha=4.0)
    torch.testing.assert_close(layer.magnitude, base.weight.norm(dim=1), rtol=0, atol=0)
    assert isinstance(layer, LoRALinear)
    assert layer.magnitude.shape == (3,) and layer.magnitude.requires_grad
    x = torch.randn(5, 4)
    torch.testing.assert_close(layer(x), base(x), rtol=0, atol=1e-6)
    torch.testing.assert_close(layer.effective_weight(), base.weight, rtol=0, atol=1e-6)
    trainable = sorted(n for n, p in layer.named_parameters() if p.requires_grad)
    assert trainable == ["lora_A.weight", "lora_B.weight", "magnitude"]


def test_forward_is_magnitude_times_the_row_normalized_composed_weight() -> None:
    torch.manual_seed(0)
    base = nn.Linear(4, 3)
    layer = DoRALinear(base, r=2, alpha=4.0)
    with torch.no_grad():
        layer.lora_B.weight.normal_()
        layer.magnitude.uniform_(0.5, 2.0)
    v = base.weight + 2.0 * layer.lora_B.weight @ layer.lora_A.weight
    w_eff = layer.magnitude.unsqueeze(1) * v / v.norm(dim=1, keepdim=True)
    x = torch.randn(5, 4)
    torch.testing.assert_close(layer(x), x @ w_eff.T + base.bias, rtol=0, atol=1e-6)
    torch.testing.assert_close(layer.effective_weight(), w_eff.detach(), rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forward_and_gradients_equal_hf_peft(dtype: torch.dtype) -> None:
    ours, theirs = _pair(dtype=dtype)
    x = torch.randn(7, 6, dtype=dtype)
    g = torch.randn(7, 3, dtype=dtype)
    # 1e-6 absolute; in FP32 also 1e-6 relative, for gradient entries ~10 (1 ulp ~ 1e-6).
    rtol = 1e-6 if dtype == torch.float32 else 0.0
    y_ours, y_theirs = ours(x), theirs(x)
    torch.testing.assert_close(y_ours, y_theirs, rtol=rtol, atol=1e-6)
    (y_ours * g).sum().backward()
    (y_theirs * g).sum().backward()
    for name in ("q", "out"):
        mine = getattr(ours, name)
        hf = getattr(theirs.base_model.model, name)
        pairs = [(mine.lora_A.weight, hf.lora_A["default"].weight),
                 (mine.lora_B.weight, hf.lora_B["default"].weight),
                 (mine.magnitude, hf.lora_magnitude_vector["default"].weight)]
        for p_ours, p_theirs in pairs:
            assert p_ours.grad is not None and p_theirs.grad is not None
            torch.testing.assert_close(p_ours.grad, p_theirs.grad, rtol=rtol, atol=1e-6)
        assert mine.base.weight.grad is None


def test_the_row_norm_is_a_constant_in_backward() -> None:
    # Paper §4.3 / HF PEFT: d/dB flows through V in the numerator only.
    torch.manual_seed(0)
    layer = DoRALinear(nn.Linear(4, 3, bias=False), r=2, alpha=2.0)
    with torch.no_grad():
        layer.lora_B.weight.normal_()
    x = torch.randn(5, 4)
    layer(x).sum().backward()
    b = layer.lora_B.weight.detach().clone().requires_grad_(True)
    v = layer.base.weight + b @ layer.lora_A.weight
    w_eff = layer.magnitude.detach().unsqueeze(1) * v / v.norm(dim=1, keepdim=True).detach()
    (x @ w_eff.T).sum().backward()
    assert layer.lora_B.weight.grad is not None
    torch.testing.assert_close(layer.lora_B.weight.grad, b.grad, rtol=0, atol=1e-6)


def test_training_dropout_equals_hf_peft_on_the_same_mask() -> None:
    ours, theirs = _pair(dropout=0.5)
    ours.train()
    theirs.train()
    x = torch.randn(7, 6)
    torch.manual_seed(123)
    y_ours = ours(x)
    torch.manual_seed(123)
    y_theirs = theirs(x)
    torch.testing.assert_close(y_ours, y_theirs, rtol=0, atol=1e-6)
    # The frozen path sees x, the composed update dropout(x): not W' x + b.
    layer = ours.q
    full = x @ layer.effective_weight().T + layer.base.bias
    torch.manual_seed(123)
    assert not torch.allclose(layer(x), full, atol=1e-4)
    ours.eval()
    theirs.eval()
    torch.testing.assert_close(ours(x), theirs(x), rtol=0, atol=1e-6)


def test_merge_equals_hf_merge_and_unload_and_unmerge_restores() -> None:
    ours, theirs = _pair()
    x = torch.randn(7, 6)
    before = ours(x).detach()
    w_q = ours.q.base.weight.detach().clone()
    merged = theirs.merge_and_unload()
    assert ours.q.merge() and not ours.q.merge()
    assert ours.out.merge()
    torch.testing.assert_close(ours.q.base.weight, merged.q.weight, rtol=0, atol=1e-6)
    torch.testing.assert_close(ours.out.base.weight, merged.out.weight, rtol=0, atol=1e-6)
    torch.testing.assert_close(ours.q.base.bias, merged.q.bias, rtol=0, atol=0)
    torch.testing.assert_close(ours(x), before, rtol=0, atol=1e-6)
    assert not any(p.requires_grad for p in ours.q.parameters())  # nothing counts twice
    assert ours.q.unmerge() and not ours.q.unmerge()
    torch.testing.assert_close(ours.q.base.weight, w_q, rtol=0, atol=1e-6)
    assert ours.q.magnitude.requires_grad and ours.q.lora_B.weight.requires_grad
    assert not ours.q.base.weight.requires_grad


def test_delta_weight_is_the_composed_update_merged_or_not() -> None:
    ours = _ours()
    layer = ours.q
    want = layer.effective_weight() - layer.base.weight.detach()
    torch.testing.assert_close(layer.delta_weight(), want, rtol=0, atol=1e-6)
    layer.merge()
    torch.testing.assert_close(layer.delta_weight(), want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_zero_row_gives_a_finite_output_equal_to_the_base_at_init(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    base = nn.Linear(4, 3).to(dtype)
    with torch.no_grad():
        base.weight[1].zero_()
    layer = DoRALinear(base, r=2, alpha=2.0)
    assert layer.magnitude[1] == 0
    x = torch.randn(5, 4, dtype=dtype)
    y = layer(x)
    assert torch.isfinite(y).all()
    tol = 1e-6 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(y, base(x), rtol=0, atol=tol)
    torch.testing.assert_close(y[:, 1], base.bias[1].expand(5), rtol=0, atol=0)
    y.sum().backward()
    for p in (layer.lora_A.weight, layer.lora_B.weight, layer.magnitude):
        assert p.grad is not None and torch.isfinite(p.grad).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_learned_update_on_a_zero_row_stays_differentiable(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    base = nn.Linear(4, 3).to(dtype)
    with torch.no_grad():
        base.weight[1].zero_()
    layer = DoRALinear(base, r=2, alpha=2.0)
    with torch.no_grad():  # what training grew: an update and a magnitude on that row
        layer.lora_B.weight.normal_()
        layer.magnitude[1] = 0.7
    x = torch.randn(5, 4, dtype=dtype)
    y = layer(x)
    assert torch.isfinite(y).all()
    # W' row 1 = 0.7 · V1 / ||V1||: a unit direction times the magnitude.
    torch.testing.assert_close(layer.effective_weight()[1].float().norm(),
                               torch.tensor(0.7), rtol=0, atol=1e-2)
    y.sum().backward()
    for p in (layer.lora_A.weight, layer.lora_B.weight, layer.magnitude):
        assert p.grad is not None and torch.isfinite(p.grad).all()
    assert layer.magnitude.grad is not None and layer.magnitude.grad[1] != 0
    assert layer.lora_B.weight.grad is not None and layer.lora_B.weight.grad[1].abs().sum() > 0


def test_half_layers_normalize_in_fp32_and_fp64_keeps_fp64() -> None:
    torch.manual_seed(0)
    ref = nn.Linear(8, 4)
    bf = DoRALinear(copy.deepcopy(ref).to(torch.bfloat16), r=2, alpha=2.0)
    with torch.no_grad():
        bf.lora_B.weight.normal_()
    assert bf._composed().dtype == torch.float32
    assert bf.row_scale().dtype == torch.bfloat16 and bf.effective_weight().dtype == torch.bfloat16
    v = bf.base.weight.float() + bf.lora_B.weight.float() @ bf.lora_A.weight.float()
    want = (bf.magnitude.float() / v.norm(dim=1)).to(torch.bfloat16)
    assert torch.equal(bf.row_scale(), want)
    d = DoRALinear(copy.deepcopy(ref).double(), r=2, alpha=2.0)
    assert d._composed().dtype == torch.float64 and d.row_scale().dtype == torch.float64
    assert d.magnitude.dtype == torch.float64


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_magnitude_is_allocated_from_the_base_weight(dtype: torch.dtype) -> None:
    base = nn.Linear(4, 3).to(dtype)
    weight = base.weight
    layer = DoRALinear(base, r=2, alpha=2.0)
    assert layer.magnitude.dtype == dtype and layer.magnitude.device == weight.device
    assert layer.base is base and base.weight is weight and weight.dtype == dtype


def test_a_meta_skeleton_composes() -> None:
    layer = DoRALinear(nn.Linear(4, 3, device="meta"), r=2, alpha=2.0)
    assert layer.magnitude.is_meta and layer.magnitude.shape == (3,)
    assert layer(torch.empty(2, 4, device="meta")).shape == (2, 3)


@pytest.mark.parametrize("training", [True, False])
def test_the_wrapper_and_its_dropout_copy_the_base_mode(training: bool) -> None:
    base = nn.Linear(3, 2).train(training)
    layer = DoRALinear(base, r=1, alpha=1.0, dropout=0.3)
    assert layer.training is training and layer.lora_dropout.training is training
    assert base.training is training


@pytest.mark.parametrize("alpha", [0.0, -1.0, float("nan"), float("inf"), "2"])
def test_alpha_must_be_finite_and_positive(alpha: object) -> None:
    base = nn.Linear(3, 2)
    with pytest.raises(ValueError, match="DoRALinear alpha"):
        DoRALinear(base, r=1, alpha=alpha)  # type: ignore[arg-type]
    assert base.weight.requires_grad  # nothing was frozen


def test_a_full_state_dict_round_trip_restores_the_forward() -> None:
    ours = _ours()
    state = ours.state_dict()
    assert "q.magnitude" in state and "out.magnitude" in state
    torch.manual_seed(5)
    fresh = _Net()
    fresh.q = DoRALinear(fresh.q, r=2, alpha=3.0)  # type: ignore[assignment]
    fresh.out = DoRALinear(fresh.out, r=2, alpha=3.0)  # type: ignore[assignment]
    fresh.load_state_dict(state, strict=True)
    x = torch.randn(4, 6)
    torch.testing.assert_close(fresh(x), ours(x), rtol=0, atol=0)


def test_a_later_train_call_activates_the_update_dropout() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 6)).eval()
    layer = DoRALinear(net[0], r=2, alpha=2.0, dropout=0.5)
    net[0] = layer
    with torch.no_grad():
        layer.lora_B.weight.normal_()
    x = torch.randn(4, 6)
    assert not layer.training and torch.equal(net(x), net(x))
    net.train()
    assert layer.training and layer.lora_dropout.training
    assert not torch.equal(net(x), net(x))  # two masks, two outputs


def test_a_half_layer_runs_forward_and_merge_in_its_dtype() -> None:
    torch.manual_seed(0)
    base = nn.Linear(8, 4).to(torch.bfloat16)
    layer = DoRALinear(base, r=2, alpha=2.0)
    with torch.no_grad():
        layer.lora_B.weight.normal_()
    x = torch.randn(3, 8, dtype=torch.bfloat16)
    y = layer(x)
    assert y.dtype == torch.bfloat16
    want = nn.functional.linear(x.float(), layer.effective_weight().float(), base.bias.float())
    torch.testing.assert_close(y.float(), want, rtol=2e-2, atol=2e-2)
    assert layer.merge()
    assert base.weight.dtype == torch.bfloat16
    torch.testing.assert_close(layer(x).float(), y.float(), rtol=2e-2, atol=2e-2)


def test_batched_sequence_input_equals_hf_peft() -> None:
    ours, theirs = _pair()
    x = torch.randn(2, 3, 6)  # (batch, seq, features): rows are flattened and restored
    y = ours(x)
    assert y.shape == (2, 3, 3)
    torch.testing.assert_close(y, theirs(x), rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_a_zero_base_row_with_a_loaded_magnitude_stays_finite(dtype: torch.dtype) -> None:
    # A magnitude trained elsewhere, loaded onto a base whose row was pruned since.
    torch.manual_seed(0)
    base = nn.Linear(4, 3).to(dtype)
    with torch.no_grad():
        base.weight[2].zero_()
    layer = DoRALinear(base, r=2, alpha=2.0)
    with torch.no_grad():
        layer.magnitude[2] = 0.7
    x = torch.randn(5, 4, dtype=dtype)
    y = layer(x)
    assert torch.isfinite(y).all() and torch.isfinite(layer.row_scale()).all()
    assert torch.equal(y[:, 2], base.bias[2].expand(5))
    y.float().sum().backward()
    for p in (layer.lora_A.weight, layer.lora_B.weight, layer.magnitude):
        assert p.grad is not None and torch.isfinite(p.grad).all()


def test_inference_uses_the_composed_weight_and_equals_the_training_path_and_hf() -> None:
    ours, theirs = _pair()
    x = torch.randn(7, 6)
    with_grad = ours(x)  # the differentiable path
    with torch.no_grad():
        fast = ours(x)  # one matmul with W'
        torch.testing.assert_close(fast, theirs(x), rtol=0, atol=1e-6)
    torch.testing.assert_close(fast, with_grad.detach(), rtol=0, atol=1e-6)
    q, out = ours.q, ours.out
    hidden = torch.tanh(nn.functional.linear(x, q.effective_weight(), q.base.bias))
    assert torch.equal(fast, nn.functional.linear(hidden, out.effective_weight()))


def test_an_all_frozen_layer_still_gives_exact_input_gradients() -> None:
    ours = _ours()
    layer = ours.q
    x = torch.randn(4, 6, requires_grad=True)
    layer(x).sum().backward()  # trainable: the differentiable path
    want = x.grad
    x.grad = None
    for p in layer.parameters():
        p.requires_grad_(False)
    assert not layer._tracks_grad()
    layer(x).sum().backward()
    assert want is not None and x.grad is not None
    torch.testing.assert_close(x.grad, want, rtol=0, atol=1e-6)


def test_an_unfrozen_base_weight_keeps_the_differentiable_path() -> None:
    ours = _ours()
    layer = ours.q
    for p in (layer.lora_A.weight, layer.lora_B.weight, layer.magnitude):
        p.requires_grad_(False)
    layer.base.weight.requires_grad_(True)  # a user who unfroze the base
    layer(torch.randn(3, 6)).sum().backward()
    assert layer.base.weight.grad is not None and layer.base.bias.grad is None
