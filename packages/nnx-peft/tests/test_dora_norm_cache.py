"""DoRALinear's row-norm cache (issue 31): eval / ``no_grad`` / ``inference_mode``
forwards reuse ``||W + (alpha/r)·B·A||`` while W, A and B are unchanged; any write,
optimizer step, ``load_state_dict``, ``.to()`` or merge invalidates it; it never
enters the state, copies or pickles; training still equals HF PEFT at a wide shape."""

from __future__ import annotations

import copy
import io
import pickle
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from nnx.peft.dora import DoRALinear, _factored_is_cheaper

#: (in, out, rows): few rows take the factored formula, many the composed weight.
FACTORED, COMPOSED = (96, 24, 4), (24, 16, 64)


def _layer(in_f: int, out_f: int, seed: int = 0, r: int = 4) -> DoRALinear:
    """A DoRA layer in eval with trained-looking A, B and magnitude."""
    torch.manual_seed(seed)
    layer = DoRALinear(nn.Linear(in_f, out_f), r=r, alpha=8.0).eval()
    with torch.no_grad():
        layer.lora_B.weight.normal_(std=0.5)
        layer.magnitude.mul_(torch.empty_like(layer.magnitude).uniform_(0.5, 1.5))
    return layer


def _fresh(layer: DoRALinear) -> DoRALinear:
    """A newly built layer (no cache) loaded with ``layer``'s current weights."""
    fresh = DoRALinear(nn.Linear(layer.base.in_features, layer.base.out_features),
                       r=layer.r, alpha=layer.alpha).to(layer.base.weight.dtype).eval()
    fresh.load_state_dict(layer.state_dict())
    return fresh


def _eval(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out: torch.Tensor = layer(x)
    return out


def _cached_norm(layer: DoRALinear) -> torch.Tensor:
    assert layer._norm_cache is not None
    return layer._norm_cache[2]


def test_the_shapes_take_the_two_formulas() -> None:
    assert _factored_is_cheaper(FACTORED[2], FACTORED[1], FACTORED[0], 4)
    assert not _factored_is_cheaper(COMPOSED[2], COMPOSED[1], COMPOSED[0], 4)
    # The shapes: a batch of 64 at 4096 -> 1024, and 4096 rows at 1024 x 1024.
    assert _factored_is_cheaper(64, 1024, 4096, 8)
    assert not _factored_is_cheaper(4096, 1024, 1024, 8)


@pytest.mark.parametrize("shape", [FACTORED, COMPOSED])
def test_a_cached_eval_forward_equals_the_uncached_one_exactly(
        shape: tuple[int, int, int]) -> None:
    in_f, out_f, rows = shape
    layer = _layer(in_f, out_f)
    x = torch.randn(rows, in_f)
    first = _eval(layer, x)
    norm = _cached_norm(layer)
    again = _eval(layer, x)
    assert _cached_norm(layer) is norm  # the second forward reused the vector
    assert torch.equal(again, first)
    assert torch.equal(again, _eval(_fresh(layer), x))  # and equals a layer without one
    with torch.inference_mode():
        assert torch.equal(layer(x), first)
    with_grad = layer(x)  # the differentiable path: the same function to rounding
    torch.testing.assert_close(with_grad.detach(), first, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", [
    lambda ps: torch.optim.SGD(ps, lr=0.1),
    lambda ps: torch.optim.Adam(ps, lr=0.1, foreach=True),
    # Fused optimizers write without bumping version counters.
    lambda ps: torch.optim.AdamW(ps, lr=0.1, fused=True),
], ids=["sgd", "adam-foreach", "adamw-fused"])
def test_an_optimizer_step_invalidates_the_cached_norm(
        make: Callable[[Any], torch.optim.Optimizer]) -> None:
    layer = _layer(*FACTORED[:2])
    x = torch.randn(FACTORED[2], FACTORED[0])
    opt = make([p for p in layer.parameters() if p.requires_grad])
    before = _eval(layer, x)
    layer.train()
    layer(x).pow(2).sum().backward()  # the training forward refreshes the cache
    opt.step()
    layer.eval()
    after = _eval(layer, x)
    assert not torch.equal(after, before)
    assert torch.equal(after, _eval(_fresh(layer), x))


def test_load_state_dict_invalidates_the_cached_norm() -> None:
    layer, other = _layer(*FACTORED[:2]), _layer(*FACTORED[:2], seed=1)
    x = torch.randn(FACTORED[2], FACTORED[0])
    _eval(layer, x)
    layer.load_state_dict(other.state_dict())
    assert torch.equal(_eval(layer, x), _eval(other, x))


@pytest.mark.parametrize("name", ["base.weight", "lora_A.weight", "lora_B.weight"])
def test_an_in_place_write_invalidates_the_cached_norm(name: str) -> None:
    layer = _layer(*COMPOSED[:2])
    x = torch.randn(COMPOSED[2], COMPOSED[0])
    before = _eval(layer, x)
    with torch.no_grad():
        layer.get_parameter(name).add_(0.25)
    after = _eval(layer, x)
    assert not torch.equal(after, before)
    assert torch.equal(after, _eval(_fresh(layer), x))


def test_a_dtype_round_trip_invalidates_the_cached_norm() -> None:
    layer = _layer(*FACTORED[:2])
    x = torch.randn(FACTORED[2], FACTORED[0])
    _eval(layer, x)
    layer.double()
    assert layer._norm_cache is None  # whatever the allocator hands out next
    assert torch.equal(_eval(layer, x.double()), _eval(_fresh(layer), x.double()))
    _eval(layer, x.double())
    layer.half().float()  # rounds W, A and B; the dtype comes back the same
    assert layer._norm_cache is None
    assert torch.equal(_eval(layer, x), _eval(_fresh(layer), x))


def test_merge_and_unmerge_do_not_reuse_a_norm() -> None:
    layer = _layer(*COMPOSED[:2])
    x = torch.randn(COMPOSED[2], COMPOSED[0])
    before = _eval(layer, x)
    assert layer.merge()
    torch.testing.assert_close(_eval(layer, x), before, rtol=0, atol=1e-5)
    assert layer.unmerge()
    assert torch.equal(_eval(layer, x), _eval(_fresh(layer), x))


def test_an_inference_mode_norm_then_a_grad_forward_gives_the_right_gradients() -> None:
    layer = _layer(*FACTORED[:2])
    x = torch.randn(FACTORED[2], FACTORED[0])
    with torch.inference_mode():
        layer(x)  # caches a norm autograd may not save
    assert _cached_norm(layer).is_inference()
    ref = _fresh(layer)
    for module in (layer, ref):
        module.train()
        # row_scale() first: with grad enabled it divides by the cached norm.
        (module.row_scale().sum() + module(x).pow(2).sum()).backward()
    assert not _cached_norm(layer).is_inference()
    assert torch.equal(_eval(layer, x), _eval(ref, x))
    for mine, theirs in zip(layer.parameters(), ref.parameters(), strict=True):
        assert (mine.grad is None) == (theirs.grad is None)
        if mine.grad is not None:
            assert theirs.grad is not None and torch.equal(mine.grad, theirs.grad)


def test_the_cache_stays_out_of_the_state_and_the_copies() -> None:
    layer = _layer(*FACTORED[:2])
    keys = list(layer.state_dict())
    x = torch.randn(FACTORED[2], FACTORED[0])
    want = _eval(layer, x)
    assert layer._norm_cache is not None
    assert list(layer.state_dict()) == keys
    assert keys == ["magnitude", "base.weight", "base.bias", "lora_A.weight", "lora_B.weight"]
    buffer = io.BytesIO()
    torch.save(layer, buffer)
    buffer.seek(0)
    copies = [copy.deepcopy(layer), pickle.loads(pickle.dumps(layer)),
              torch.load(buffer, weights_only=False)]
    for twin in copies:
        assert twin._norm_cache is None
        assert torch.equal(_eval(twin, x), want)
    assert layer._norm_cache is not None  # copying left the original's cache alone


def test_training_at_a_wide_shape_equals_hf_peft_forward_and_gradients() -> None:
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(256, 64))
    theirs = peft.get_peft_model(copy.deepcopy(base), peft.LoraConfig(
        r=8, lora_alpha=16, target_modules=["0"], use_dora=True))
    ours = DoRALinear(base[0], r=8, alpha=16.0)
    hf = theirs.base_model.model[0]
    torch.manual_seed(1)
    with torch.no_grad():
        ours.lora_A.weight.normal_(std=0.1)
        ours.lora_B.weight.normal_(std=0.1)
        ours.magnitude.mul_(torch.empty_like(ours.magnitude).uniform_(0.5, 1.5))
        hf.lora_A["default"].weight.copy_(ours.lora_A.weight)
        hf.lora_B["default"].weight.copy_(ours.lora_B.weight)
        hf.lora_magnitude_vector["default"].weight.copy_(ours.magnitude)
    x, g = torch.randn(8, 256), torch.randn(8, 64)
    for _ in range(2):  # a second step: the norm follows the update
        y_ours, y_theirs = ours(x), theirs(x)
        torch.testing.assert_close(y_ours, y_theirs, rtol=1e-5, atol=1e-5)
        (y_ours * g).sum().backward()
        (y_theirs * g).sum().backward()
        pairs = [(ours.lora_A.weight, hf.lora_A["default"].weight),
                 (ours.lora_B.weight, hf.lora_B["default"].weight),
                 (ours.magnitude, hf.lora_magnitude_vector["default"].weight)]
        for mine, their in pairs:
            assert mine.grad is not None and their.grad is not None
            torch.testing.assert_close(mine.grad, their.grad, rtol=1e-5, atol=1e-5)
        with torch.no_grad():
            for mine, their in pairs:
                mine.sub_(0.1 * mine.grad)
                their.sub_(0.1 * their.grad)
                mine.grad, their.grad = None, None
        ours.eval(), theirs.eval()
        for rows in (8, 512):  # both eval formulas, the norm cached
            xs = torch.randn(rows, 256)
            with torch.no_grad():
                torch.testing.assert_close(ours(xs), theirs(xs), rtol=1e-5, atol=1e-5)
                torch.testing.assert_close(ours(xs), theirs(xs), rtol=1e-5, atol=1e-5)
        ours.train(), theirs.train()


def test_a_training_forward_recomputes_the_norm_even_after_a_data_write() -> None:
    # A hand-written step through .data bumps no version counter: eval could not
    # see it, but the differentiable path recomputes the norm every forward.
    layer = _layer(*FACTORED[:2]).train()
    x = torch.randn(FACTORED[2], FACTORED[0])
    layer(x)
    layer.lora_B.weight.data.add_(0.25)
    assert torch.equal(layer(x), _fresh(layer).train()(x))
