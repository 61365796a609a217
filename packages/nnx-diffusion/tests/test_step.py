"""diffusion_train_step_factory (spec §9.3, §6.1): the noise MSE through finalize_step."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _nnx_diffusion_tiny import plan, points, same, sgd, tiny_model, weights

from nnx import KeywordInputs, NNModel, NNOptimParams, Precision
from nnx._step_helpers import is_full_precision_only
from nnx.diffusion import NoiseSchedulers, diffusion_train_step_factory
from nnx.diffusion.noising import add_noise
from nnx.objectives.ownership import is_imperative_step


def hand_step(model, x0, schedule, lr):
    """One plain-autograd DDPM step drawing t and ε from the global RNG as the step does."""
    t = torch.randint(0, schedule.T, (x0.shape[0],))
    eps = torch.randn_like(x0)
    loss = F.mse_loss(model.net(add_noise(schedule, x0, t, eps), t), eps)
    model.net.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in model.net.parameters():
            p -= lr * p.grad
    return float(loss.detach())


def test_the_step_trains_the_noise_mse_and_records_it_as_loss_and_error(tmp_path):
    schedule = NoiseSchedulers.LINEAR(T=20)
    batches = points(3)
    model, ref = tiny_model(), tiny_model()
    run = model.train(plan(batches), train_step_fn=diffusion_train_step_factory(schedule),
                      root=tmp_path, verbose=False)
    torch.manual_seed(0)  # plan(seed=0): the run seeds the global RNG the same way
    losses = [hand_step(ref, x, schedule, 0.1) for (x,) in batches]
    got = [idp.train_edp for idp in run.idps]
    assert [e.loss for e in got] == pytest.approx(losses, abs=1e-6)
    assert all(e.error == e.loss for e in got)
    for name, p in ref.net.state_dict().items():
        torch.testing.assert_close(model.net.state_dict()[name], p, atol=1e-6, rtol=1e-5)
    assert [idp.update_count for idp in run.idps] == [1, 2, 3]  # one report per update


def test_the_step_is_marked_full_precision_only_and_imperative():
    step = diffusion_train_step_factory(NoiseSchedulers.COSINE(T=10))
    assert is_full_precision_only(step) and is_imperative_step(step)


@pytest.mark.parametrize("policy", [Precision.FP16, Precision.BF16])
def test_a_reduced_precision_run_refuses_the_step_before_any_run_dir(tmp_path, policy):
    model = tiny_model(precision=policy)
    before, rng = weights(model), torch.get_rng_state()
    with pytest.raises(ValueError, match=rf"full-precision-only.*{policy.name}"):
        model.train(plan(points()), train_step_fn=diffusion_train_step_factory(
            NoiseSchedulers.LINEAR(T=10)), root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists()
    assert same(weights(model), before) and torch.equal(torch.get_rng_state(), rng)


def test_accumulation_is_refused_by_finalize_step_without_an_update(tmp_path):
    model = tiny_model()
    before = weights(model)
    with pytest.raises(ValueError, match="accumulate_grad_batches=2"):
        model.train(plan(points(), optim=sgd(accumulate=2)),
                    train_step_fn=diffusion_train_step_factory(NoiseSchedulers.LINEAR(T=10)),
                    root=tmp_path, verbose=False)
    assert same(weights(model), before)
    assert all(p.grad is None for p in model.net.parameters())


def test_the_grad_clip_norm_is_honored(tmp_path):
    schedule = NoiseSchedulers.LINEAR(T=20)
    batch = points(1)
    clipped, free = tiny_model(), tiny_model()
    start = weights(clipped)
    optim = NNOptimParams.builder().sgd(max_lr=1.0).grad_clip(1e-3).build()
    clipped.train(plan(batch, optim=optim), train_step_fn=diffusion_train_step_factory(schedule),
                  root=tmp_path / "a", verbose=False)
    free.train(plan(batch, optim=sgd(1.0)), train_step_fn=diffusion_train_step_factory(schedule),
               root=tmp_path / "b", verbose=False)
    moved = torch.cat([(clipped.net.state_dict()[k] - v).flatten() for k, v in start.items()])
    assert float(moved.norm()) == pytest.approx(1e-3, rel=1e-3)  # lr 1 × the clipped norm
    assert not same(weights(free), weights(clipped))


def test_a_non_finite_batch_is_never_back_propagated(tmp_path):
    batches = points(2)
    poisoned = [(torch.full((4, 2), float("nan")),), batches[1]]
    model = tiny_model()
    with pytest.warns(RuntimeWarning, match="non-finite training loss"):
        run = model.train(plan(poisoned), train_step_fn=diffusion_train_step_factory(
            NoiseSchedulers.LINEAR(T=10)), root=tmp_path, verbose=False)
    assert [idp.update_count for idp in run.idps] == [0, 1]


def test_a_batch_with_two_inputs_or_integer_data_is_refused_before_any_update(tmp_path):
    step = diffusion_train_step_factory(NoiseSchedulers.LINEAR(T=10))
    for loader, match in [([(torch.randn(4, 2), torch.randn(4, 2), torch.randn(4, 2))],
                           "PositionalInputs"),
                          ([(torch.ones(4, 2, dtype=torch.long),)], "floating tensor")]:
        model = tiny_model()
        before = weights(model)
        with pytest.raises(ValueError, match=match):
            model.train(plan(loader), train_step_fn=step, root=tmp_path / match,
                        verbose=False)
        assert same(weights(model), before)


def test_the_step_reads_x0_from_one_keyword_input_too(tmp_path):
    schedule = NoiseSchedulers.LINEAR(T=20)
    batches = points(3)
    plain = tiny_model()
    model = NNModel(module=plain.net, params=plain.params,
                    batch_adapter=KeywordInputs("x", target=None))
    ref = tiny_model()
    run = model.train(plan([{"x": x} for (x,) in batches]),
                      train_step_fn=diffusion_train_step_factory(schedule), root=tmp_path,
                      verbose=False)
    torch.manual_seed(0)
    losses = [hand_step(ref, x, schedule, 0.1) for (x,) in batches]
    assert [idp.train_edp.loss for idp in run.idps] == pytest.approx(losses, abs=1e-6)


def test_the_factory_refuses_anything_but_a_schedule():
    with pytest.raises(TypeError, match="NoiseSchedule"):
        diffusion_train_step_factory("linear")  # type: ignore[arg-type]

