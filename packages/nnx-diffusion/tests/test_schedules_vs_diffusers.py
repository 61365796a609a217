"""The schedules and one reverse step against diffusers' DDPMScheduler (spec §9.1, issue 18)."""

from __future__ import annotations

import pytest
import torch

from nnx.diffusion import NoiseSchedulers
from nnx.diffusion.sampling import reverse_coefficients

diffusers = pytest.importorskip("diffusers")


def test_linear_betas_equal_diffusers_exactly_and_alphas_cumprod_to_1e_6():
    ours = NoiseSchedulers.LINEAR(T=1000, beta_min=1e-4, beta_max=2e-2)
    theirs = diffusers.DDPMScheduler(num_train_timesteps=1000, beta_start=1e-4, beta_end=2e-2,
                                     beta_schedule="linear")
    assert torch.equal(ours.betas, theirs.betas)
    torch.testing.assert_close(ours.alphas_cumprod, theirs.alphas_cumprod, atol=1e-6, rtol=0)


@pytest.mark.parametrize("T", [1000, 200, 7])
def test_cosine_equals_squaredcos_cap_v2_exactly(T):
    ours = NoiseSchedulers.COSINE(T=T)
    theirs = diffusers.DDPMScheduler(num_train_timesteps=T, beta_schedule="squaredcos_cap_v2")
    assert torch.equal(ours.betas, theirs.betas)
    torch.testing.assert_close(ours.alphas_cumprod, theirs.alphas_cumprod, atol=1e-6, rtol=0)


@pytest.mark.parametrize("kind", ["linear", "squaredcos_cap_v2"])
def test_one_reverse_step_at_t_500_equals_diffusers_from_the_same_noise(kind):
    ours = (NoiseSchedulers.LINEAR if kind == "linear" else NoiseSchedulers.COSINE)(T=1000)
    theirs = diffusers.DDPMScheduler(num_train_timesteps=1000, beta_schedule=kind,
                                     clip_sample=False, variance_type="fixed_small")
    g = torch.Generator().manual_seed(0)
    x, eps = torch.randn(16, 3, generator=g), torch.randn(16, 3, generator=g)
    expected = theirs.step(eps, 500, x, generator=torch.Generator().manual_seed(7)).prev_sample
    scale, coef, sigma = reverse_coefficients(ours)
    z = torch.randn(16, 3, generator=torch.Generator().manual_seed(7))
    got = (x - coef[500] * eps) * scale[500] + sigma[500] * z
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    # The posterior variance is diffusers' fixed_small variance.
    assert float(ours.posterior_variance[500]) == pytest.approx(
        float(theirs._get_variance(500)), rel=1e-5)


def test_a_whole_sample_equals_a_diffusers_step_loop_from_the_same_generator():
    from nnx.diffusion import DiffusionMLP, sample

    torch.manual_seed(0)
    net = DiffusionMLP(input_dim=2, hidden_dims=[16], time_embed_dim=8)
    schedule = NoiseSchedulers.LINEAR(T=50, beta_min=1e-3, beta_max=0.1)
    theirs = diffusers.DDPMScheduler(num_train_timesteps=50, beta_start=1e-3, beta_end=0.1,
                                     clip_sample=False, variance_type="fixed_small")
    g = torch.Generator().manual_seed(4)
    x = torch.randn(32, 2, generator=g)
    with torch.no_grad():
        for t in theirs.timesteps:
            x = theirs.step(net(x, t.expand(32)), int(t), x, generator=g).prev_sample
    got = sample(net, schedule, (32, 2), generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(got, x, atol=1e-4, rtol=1e-4)  # 50 float32 steps, 2 formulas
