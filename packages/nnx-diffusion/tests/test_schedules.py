"""NoiseSchedulers / NoiseSchedule (spec §9.1, §3): validation, tables, devices, fingerprint."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from nnx.diffusion import NoiseSchedule, NoiseSchedulers


@pytest.mark.parametrize("factory", [NoiseSchedulers.LINEAR, NoiseSchedulers.COSINE])
def test_a_schedule_is_a_frozen_dataclass_of_cpu_float32_tables(factory):
    s = factory(T=50)
    assert isinstance(s, NoiseSchedule) and s.T == 50 and s.kind == factory.name
    for name in ("betas", "alphas", "alphas_cumprod", "sqrt_alphas_cumprod",
                 "sqrt_one_minus_alphas_cumprod", "posterior_variance"):
        table = getattr(s, name)
        assert table.shape == (50,) and table.dtype == torch.float32
        assert table.device.type == "cpu"
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.T = 3  # type: ignore[misc]


def test_the_derived_tables_follow_from_the_betas_in_float64():
    s = NoiseSchedulers.LINEAR(T=20, beta_min=0.01, beta_max=0.2)
    b = s.betas.double()
    cum = torch.cumprod(1 - b, 0)
    prev = torch.cat([torch.ones(1, dtype=torch.float64), cum[:-1]])
    assert torch.equal(s.alphas, (1 - b).float())
    assert torch.equal(s.alphas_cumprod, cum.float())
    assert torch.equal(s.sqrt_alphas_cumprod, cum.sqrt().float())
    assert torch.equal(s.sqrt_one_minus_alphas_cumprod, (1 - cum).sqrt().float())
    assert torch.equal(s.posterior_variance, (b * (1 - prev) / (1 - cum)).float())
    assert float(s.posterior_variance[0]) == 0.0  # no noise is added at t = 0


def test_linear_betas_span_beta_min_to_beta_max():
    s = NoiseSchedulers.LINEAR(T=5, beta_min=0.1, beta_max=0.5)
    assert torch.allclose(s.betas, torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5]))
    assert dict(s.args) == {"beta_min": 0.1, "beta_max": 0.5}


def test_cosine_betas_are_capped_at_0_999():
    s = NoiseSchedulers.COSINE(T=10)
    assert float(s.betas.max()) == pytest.approx(0.999)
    assert dict(s.args) == {"s": 0.008}


def test_the_defaults_are_the_spec_defaults():
    assert NoiseSchedulers.LINEAR().T == 1000 and NoiseSchedulers.COSINE().T == 1000
    assert dict(NoiseSchedulers.LINEAR().args) == {"beta_min": 1e-4, "beta_max": 2e-2}


@pytest.mark.parametrize("call, match", [
    (lambda: NoiseSchedulers.LINEAR(T=0), "T"),
    (lambda: NoiseSchedulers.LINEAR(T=2.0), "T"),
    (lambda: NoiseSchedulers.LINEAR(T=True), "T"),
    (lambda: NoiseSchedulers.LINEAR(T=10, beta_min=0.0), "beta_min"),
    (lambda: NoiseSchedulers.LINEAR(T=10, beta_max=1.0), "beta_max"),
    (lambda: NoiseSchedulers.LINEAR(T=10, beta_min=math.nan), "beta_min"),
    (lambda: NoiseSchedulers.LINEAR(T=10, beta_max=math.inf), "beta_max"),
    (lambda: NoiseSchedulers.LINEAR(T=10, beta_min=0.2, beta_max=0.1), "beta_min < beta_max"),
    (lambda: NoiseSchedulers.LINEAR(T=10, beta_min=0.1, beta_max=0.1), "beta_min < beta_max"),
    (lambda: NoiseSchedulers.COSINE(T=10, s=0.0), "s"),
    (lambda: NoiseSchedulers.COSINE(T=10, s=-1.0), "s"),
    (lambda: NoiseSchedulers.COSINE(T=10, s=math.inf), "s"),
])
def test_bad_arguments_are_refused_with_the_field_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_arguments_after_T_are_keyword_only():
    with pytest.raises(TypeError):
        NoiseSchedulers.LINEAR(10, 1e-4)  # type: ignore[misc]
    with pytest.raises(TypeError):
        NoiseSchedulers.COSINE(T=10, beta_min=1e-4)


def test_to_moves_once_per_device_and_cpu_is_itself():
    s = NoiseSchedulers.LINEAR(T=10)
    assert s.to("cpu") is s
    if torch.cuda.is_available():
        on = s.to("cuda")
        assert on is s.to("cuda") and on.betas.is_cuda and on.fingerprint == s.fingerprint
    meta = s.to("meta")
    assert meta is s.to("meta") and meta.betas.is_meta and meta.T == s.T
    assert s.betas.device.type == "cpu"  # the original stays on CPU


def test_the_fingerprint_names_T_and_the_betas():
    a = NoiseSchedulers.LINEAR(T=10)
    assert a.fingerprint == NoiseSchedulers.LINEAR(T=10).fingerprint
    assert a.fingerprint.startswith("T=10:")
    assert a.fingerprint != NoiseSchedulers.LINEAR(T=10, beta_max=0.03).fingerprint
    assert a.fingerprint != NoiseSchedulers.COSINE(T=10).fingerprint
    assert a.describe() == {"kind": "LINEAR", "T": 10, "args": dict(a.args),
                            "fingerprint": a.fingerprint}
