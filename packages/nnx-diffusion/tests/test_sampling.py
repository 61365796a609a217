"""sample (spec §9.4, §13.2): the reverse process, its modes contract and its RNG hygiene."""

from __future__ import annotations

import pytest
import torch
from _nnx_diffusion_tiny import tiny_model
from torch import nn

from nnx.diffusion import DiffusionMLP, NoiseSchedulers, diffusion_objective, sample
from nnx.diffusion.sampling import reverse_coefficients

SCHEDULE = NoiseSchedulers.COSINE(T=15)


def test_it_returns_samples_of_the_requested_shape_without_gradients():
    model = tiny_model()
    out = sample(model, SCHEDULE, (7, 2), generator=torch.Generator().manual_seed(0))
    assert out.shape == (7, 2) and not out.requires_grad and torch.isfinite(out).all()
    assert all(p.grad is None for p in model.net.parameters())


def test_the_same_generator_seed_reproduces_the_samples():
    model = tiny_model()
    a = sample(model, SCHEDULE, (5, 2), generator=torch.Generator().manual_seed(3))
    b = sample(model, SCHEDULE, (5, 2), generator=torch.Generator().manual_seed(3))
    c = sample(model, SCHEDULE, (5, 2), generator=torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_it_runs_the_ddpm_posterior_loop_with_no_noise_at_t_0():
    torch.manual_seed(0)
    net = DiffusionMLP(input_dim=2, hidden_dims=[4], time_embed_dim=4)
    schedule = NoiseSchedulers.LINEAR(T=3, beta_min=0.1, beta_max=0.3)
    scale, coef, sigma = reverse_coefficients(schedule)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 2, generator=g)
    with torch.no_grad():
        for t in (2, 1, 0):
            x = (x - coef[t] * net(x, torch.full((4,), t))) * scale[t]
            if t:
                x = x + sigma[t] * torch.randn(4, 2, generator=g)
    got = sample(net, schedule, (4, 2), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(got, x, atol=1e-6, rtol=1e-6)
    b = schedule.betas.double()
    cum = torch.cumprod(1 - b, 0)
    assert scale[1] == pytest.approx(float((1 - b[1]).rsqrt()))
    assert coef[1] == pytest.approx(float(b[1] / (1 - cum[1]).sqrt()))
    assert sigma[0] == 0.0


def test_a_generator_keeps_the_global_rng_and_an_objectives_stream_untouched():
    model = tiny_model()
    objective = diffusion_objective(SCHEDULE, seed=0)
    stream = objective.generator.get_state()
    global_state = torch.get_rng_state()
    sample(model, SCHEDULE, (3, 2), generator=torch.Generator().manual_seed(9))
    assert torch.equal(torch.get_rng_state(), global_state)
    assert torch.equal(objective.generator.get_state(), stream)


def test_without_a_generator_the_global_rng_drives_it():
    model = tiny_model()
    torch.manual_seed(5)
    a = sample(model, SCHEDULE, (3, 2))
    torch.manual_seed(5)
    assert torch.equal(a, sample(model, SCHEDULE, (3, 2)))


class Probe(nn.Module):
    """A forward(x, t) net with a mixed-mode tree that records the modes it runs in."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(2, 2), nn.Dropout(0.5)
        self.seen: list[tuple[bool, bool, bool]] = []
        self.fail_at = fail_at

    def forward(self, x, t):
        self.seen.append((self.training, self.a.training, self.b.training))
        if self.fail_at is not None and int(t[0]) == self.fail_at:
            raise RuntimeError("boom")
        return self.b(self.a(x))


def test_it_runs_in_eval_mode_and_restores_every_submodules_mode():
    net = Probe()
    net.train()
    net.a.eval()  # a mixed tree: restored per module, not flattened to the root flag
    sample(net, SCHEDULE, (2, 2), generator=torch.Generator().manual_seed(0))
    assert set(net.seen) == {(False, False, False)}
    assert (net.training, net.a.training, net.b.training) == (True, False, True)


def test_the_modes_are_restored_when_the_net_raises_mid_call():
    net = Probe(fail_at=7)
    net.train()
    net.b.eval()
    with pytest.raises(RuntimeError, match="boom"):
        sample(net, SCHEDULE, (2, 2))
    assert (net.training, net.a.training, net.b.training) == (True, True, False)


def test_an_nn_model_and_its_bare_net_sample_alike():
    model = tiny_model()
    a = sample(model, SCHEDULE, (3, 2), generator=torch.Generator().manual_seed(2))
    b = sample(model.net, SCHEDULE, (3, 2), generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b)


@pytest.mark.parametrize("call, error", [
    (lambda m: sample(m, "cosine", (2, 2)), TypeError),
    (lambda m: sample(m, SCHEDULE, ()), ValueError),
    (lambda m: sample(m, SCHEDULE, (0, 2)), ValueError),
    (lambda m: sample(m, SCHEDULE, (2, 2), generator=3), TypeError),
    (lambda m: sample(object(), SCHEDULE, (2, 2)), TypeError),
])
def test_bad_arguments_are_refused_before_the_net_runs(call, error):
    net = Probe()
    with pytest.raises(error):
        call(net)
    assert net.seen == []
