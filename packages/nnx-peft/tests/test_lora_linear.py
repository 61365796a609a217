"""LoRALinear (spec §11, §11.1, §2.3): init, placement, modes, forward, validation."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from nnx.peft import LoRALinear
from nnx.peft.targeting import AdapterWrapper


def linear(seed: int = 0, n_in: int = 4, n_out: int = 3, **kw: object) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(n_in, n_out, **kw)  # type: ignore[arg-type]


def test_shapes_names_freezing_and_scaling() -> None:
    base = linear()
    lora = LoRALinear(base, r=2, alpha=6.0)
    assert isinstance(lora, AdapterWrapper) and lora.base is base
    assert lora.lora_A.weight.shape == (2, 4) and lora.lora_B.weight.shape == (3, 2)
    assert lora.lora_A.bias is None and lora.lora_B.bias is None
    assert lora.scaling == 3.0 and (lora.r, lora.alpha) == (2, 6.0)
    assert list(lora.state_dict()) == ["base.weight", "base.bias", "lora_A.weight",
                                       "lora_B.weight"]
    assert not base.weight.requires_grad and not base.bias.requires_grad
    assert lora.lora_A.weight.requires_grad and lora.lora_B.weight.requires_grad
    assert (lora.in_features, lora.out_features) == (4, 3)


def test_init_is_exactly_the_base_and_a_is_kaiming_uniform() -> None:
    base = linear()
    lora = LoRALinear(base, r=3, alpha=1.0)
    x = torch.randn(5, 4)
    assert torch.equal(lora(x), base(x))
    assert torch.count_nonzero(lora.lora_B.weight) == 0
    # kaiming_uniform_(a=sqrt(5)) on fan_in=4: bound = 1/sqrt(fan_in)
    bound = 1 / math.sqrt(4)
    assert lora.lora_A.weight.abs().max() <= bound and lora.lora_A.weight.std() > 0
    # The only RNG draw is HF PEFT's kaiming_uniform_(a=sqrt(5)) on A (B is zeros).
    base = linear(seed=7)
    state = torch.get_rng_state()
    drawn = LoRALinear(base, r=3, alpha=1.0).lora_A.weight
    torch.set_rng_state(state)
    expected = torch.empty(3, 4)
    nn.init.kaiming_uniform_(expected, a=math.sqrt(5))
    assert torch.equal(drawn, expected)


def test_forward_is_base_plus_scaled_low_rank_update() -> None:
    lora = LoRALinear(linear(), r=2, alpha=3.0)
    with torch.no_grad():
        lora.lora_B.weight.normal_()
    x = torch.randn(5, 4)
    w, b = lora.base.weight, lora.base.bias
    a, bb = lora.lora_A.weight, lora.lora_B.weight
    expected = x @ w.T + b + 1.5 * (x @ a.T @ bb.T)
    torch.testing.assert_close(lora(x), expected, rtol=0, atol=1e-6)


def test_inference_on_a_large_input_composes_the_weight_and_equals_the_adapter_path() -> None:
    lora = LoRALinear(linear(n_in=4, n_out=3), r=2, alpha=3.0).eval()
    with torch.no_grad():
        lora.lora_B.weight.normal_()
    small, large = torch.randn(1, 4), torch.randn(64, 4)
    with torch.no_grad():
        assert not lora._compose(small) and lora._compose(large)
        composed = lora(large)
    assert not lora._compose(large)  # grad enabled and the adapters train
    adapter_path = lora(large).detach()
    torch.testing.assert_close(composed, adapter_path, rtol=0, atol=1e-6)
    # Never where it would change the function: active dropout, hooks, a subclass.
    drop = LoRALinear(linear(), r=2, alpha=3.0, dropout=0.5).train()
    hooked = LoRALinear(linear(), r=2, alpha=3.0)
    hooked.base.register_forward_hook(lambda *_: None)
    with torch.no_grad():
        assert not drop._compose(large) and not hooked._compose(large)
        assert drop.eval()._compose(large)
    # At init the composed weight is W + 0: still exactly the base.
    fresh = LoRALinear(linear(), r=2, alpha=3.0)
    with torch.no_grad():
        assert torch.equal(fresh(large), fresh.base(large))


def test_only_the_adapters_get_gradients() -> None:
    lora = LoRALinear(linear(), r=2, alpha=2.0)
    lora(torch.randn(3, 4)).sum().backward()
    assert lora.base.weight.grad is None and lora.base.bias.grad is None
    assert lora.lora_A.weight.grad is not None and lora.lora_B.weight.grad is not None


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_adapters_take_the_base_dtype_and_the_base_is_never_recast(dtype: torch.dtype) -> None:
    base = linear().to(dtype)
    weight = base.weight
    lora = LoRALinear(base, r=2, alpha=2.0)
    assert lora.base.weight is weight and weight.dtype == dtype
    assert lora.lora_A.weight.dtype == dtype and lora.lora_B.weight.dtype == dtype
    assert lora.lora_A.weight.device == weight.device


def test_a_meta_base_composes_on_meta_without_a_move() -> None:
    base = nn.Linear(4, 3, device="meta")
    lora = LoRALinear(base, r=2, alpha=2.0)
    assert lora.base.weight.is_meta and lora.lora_A.weight.is_meta and lora.lora_B.weight.is_meta
    assert lora(torch.empty(2, 4, device="meta")).shape == (2, 3)


@pytest.mark.parametrize("training", [True, False])
def test_the_mode_is_copied_from_the_wrapped_linear(training: bool) -> None:
    base = linear().train(training)
    lora = LoRALinear(base, r=2, alpha=2.0, dropout=0.5)
    assert isinstance(lora.lora_dropout, nn.Dropout) and lora.lora_dropout.p == 0.5
    assert lora.training is training and lora.lora_dropout.training is training
    assert base.training is training


def test_eval_wrapper_with_dropout_is_deterministic_and_train_activates_it() -> None:
    lora = LoRALinear(linear().eval(), r=2, alpha=2.0, dropout=0.9)
    with torch.no_grad():
        lora.lora_B.weight.normal_()
    x = torch.randn(8, 4)
    assert torch.equal(lora(x), lora(x))
    lora.train()
    torch.manual_seed(0)
    first = lora(x)
    torch.manual_seed(1)
    assert not torch.equal(first, lora(x))


def test_zero_dropout_is_an_identity_module() -> None:
    assert isinstance(LoRALinear(linear(), r=1, alpha=1.0).lora_dropout, nn.Identity)


def test_init_weights_false_draws_no_rng_and_starts_at_the_base() -> None:
    base = linear()
    state = torch.get_rng_state()
    lora = LoRALinear(base, r=2, alpha=2.0, init_weights=False)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.count_nonzero(lora.lora_A.weight) == 0


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"r": 0, "alpha": 1.0}, r"LoRALinear r must be an integer >= 1; got 0"),
    ({"r": True, "alpha": 1.0}, r"LoRALinear r must be an integer >= 1; got True"),
    ({"r": 2.0, "alpha": 1.0}, r"LoRALinear r must be an integer"),
    ({"r": 2, "alpha": 0.0}, r"LoRALinear alpha must be .*> 0"),
    ({"r": 2, "alpha": -1.0}, r"LoRALinear alpha must be .*> 0"),
    ({"r": 2, "alpha": float("nan")}, r"LoRALinear alpha must be .*> 0"),
    ({"r": 2, "alpha": float("inf")}, r"LoRALinear alpha must be .*> 0"),
    ({"r": 2, "alpha": "8"}, r"LoRALinear alpha must be a finite real number"),
    ({"r": 2, "alpha": True}, r"LoRALinear alpha must be a finite real number"),
    ({"r": 2, "alpha": 1.0, "dropout": 1.0}, r"LoRALinear dropout must be .*\[0, 1\)"),
    ({"r": 2, "alpha": 1.0, "dropout": -0.1}, r"LoRALinear dropout must be .*\[0, 1\)"),
])
def test_bad_arguments_are_refused_before_the_base_is_frozen(kwargs: dict[str, object],
                                                             match: str) -> None:
    base = linear()
    with pytest.raises(ValueError, match=match):
        LoRALinear(base, **kwargs)  # type: ignore[arg-type]
    assert base.weight.requires_grad and base.bias.requires_grad


def test_non_linear_and_lazy_bases_are_refused() -> None:
    with pytest.raises(TypeError, match=r"wraps an nn\.Linear; got ReLU"):
        LoRALinear(nn.ReLU(), r=1, alpha=1.0)  # type: ignore[arg-type]
    lazy = nn.LazyLinear(3)
    with pytest.raises(ValueError, match="uninitialized lazy Linear"):
        LoRALinear(lazy, r=1, alpha=1.0)


def test_numpy_integer_rank_is_a_plain_int() -> None:
    np = pytest.importorskip("numpy")
    lora = LoRALinear(linear(), r=np.int64(2), alpha=np.float32(4.0))
    assert type(lora.r) is int and lora.r == 2 and type(lora.alpha) is float
