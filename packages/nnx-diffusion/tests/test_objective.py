"""diffusion_objective (spec §6.5, §9, §14.1): the engine's accumulation, its own generator,
the "diffusion.objective" component and its resume refusal, the one-update-owner rule."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _nnx_diffusion_tiny import files, plan, points, same, sgd, tiny_model, weights

from nnx import Callback, KeywordInputs, NNModel, ObjectiveContext
from nnx.components import ComponentRestoreError
from nnx.diffusion import (
    DiffusionObjective,
    NoiseSchedulers,
    diffusion_objective,
    diffusion_train_step_factory,
)
from nnx.diffusion.noising import add_noise

SCHEDULE = NoiseSchedulers.LINEAR(T=20)


class Table:
    """A noise_fn handing out fixed per-row (t, ε) in loader order: the same rows get the
    same noise however the batch is split into microbatches."""

    def __init__(self, n: int, seed: int = 3) -> None:
        g = torch.Generator().manual_seed(seed)
        self.t = torch.randint(0, SCHEDULE.T, (n,), generator=g)
        self.eps = torch.randn(n, 2, generator=g)
        self.cursor = 0

    def __call__(self, x0, generator):
        lo, hi = self.cursor, self.cursor + x0.shape[0]
        self.cursor = hi % len(self.t)
        return self.t[lo:hi], self.eps[lo:hi]


def test_accumulation_over_uneven_microbatches_equals_one_full_batch_update(tmp_path):
    x = torch.cat([b[0] for b in points(2)])  # 8 rows
    uneven = [(x[:5],), (x[5:7],), (x[7:],)]
    a, b, ref = tiny_model(), tiny_model(), tiny_model()
    a.train(plan(uneven, n_epochs=2, optim=sgd(0.2, accumulate=3)),
            objective=diffusion_objective(SCHEDULE, noise_fn=Table(8)), root=tmp_path / "a",
            verbose=False)
    b.train(plan([(x,)], n_epochs=2, optim=sgd(0.2)),
            objective=diffusion_objective(SCHEDULE, noise_fn=Table(8)), root=tmp_path / "b",
            verbose=False)
    table = Table(8)
    for _ in range(2):  # plain full-batch autograd
        loss = F.mse_loss(ref.net(add_noise(SCHEDULE, x, table.t, table.eps), table.t),
                          table.eps)
        ref.net.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in ref.net.parameters():
                p -= 0.2 * p.grad
    for name, p in ref.net.state_dict().items():  # 1e-6: float32 sums in another order
        torch.testing.assert_close(a.net.state_dict()[name], p, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(b.net.state_dict()[name], p, atol=1e-6, rtol=1e-5)


def test_the_term_is_the_squared_error_sum_over_the_element_count():
    model = tiny_model()
    objective = diffusion_objective(SCHEDULE, noise_fn=Table(4))
    ctx = ObjectiveContext(model=model, batch=points(1)[0], batch_idx=0, epoch=0,
                           precision=None)  # type: ignore[arg-type]
    result = objective(ctx)
    (term,) = result.terms
    assert term.name == "noise_mse" and term.denominator == 8.0 and term.reduction == "mean"
    assert dict(result.metrics) == {"noise_mse": pytest.approx(float(term.numerator.detach()) / 8)}
    assert result.output is None  # no classification fields
    assert all(p.grad is None for p in model.net.parameters())  # it never back-propagates


def test_the_generator_is_its_own_seeded_and_leaves_the_global_rng_alone():
    objective = diffusion_objective(SCHEDULE, seed=5)
    state = torch.get_rng_state()
    first = torch.randn(3, generator=objective.generator)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(first, torch.randn(3, generator=torch.Generator().manual_seed(5)))


def test_without_a_seed_the_generator_is_seeded_by_one_global_draw_at_first_use():
    torch.manual_seed(11)
    objective = diffusion_objective(SCHEDULE)
    constructed = torch.get_rng_state()
    torch.manual_seed(11)
    assert torch.equal(torch.get_rng_state(), constructed)  # construction drew nothing
    a = torch.randn(3, generator=objective.generator)
    after = torch.get_rng_state()
    torch.manual_seed(11)
    torch.randint(0, 2**62, (1,))
    assert torch.equal(torch.get_rng_state(), after)  # exactly one draw, at first use
    torch.manual_seed(11)
    b = torch.randn(3, generator=diffusion_objective(SCHEDULE).generator)
    assert torch.equal(a, b)  # the same global seed, the same stream


def run_objective(tmp_path, n_epochs, *, schedule=SCHEDULE, **kwargs):
    model = tiny_model()
    run = model.train(plan(points(3), n_epochs=n_epochs, **kwargs),
                      objective=diffusion_objective(schedule), root=tmp_path, verbose=False)
    return model, run


def test_a_2_plus_1_stateful_resume_equals_3_straight_epochs_bit_for_bit(tmp_path):
    straight, run3 = run_objective(tmp_path / "straight", 3)
    _, first = run_objective(tmp_path / "resumed", 2)
    resumed, rest = run_objective(tmp_path / "resumed", 1, resume_from_run_id=first.id,
                                  resume_mode="stateful")
    assert same(weights(straight), weights(resumed))
    losses = [i.train_edp.loss for i in run3.idps]
    assert [i.train_edp.loss for i in first.idps] + [i.train_edp.loss for i in rest.idps] == (
        losses)
    assert "diffusion.objective" in rest.resume_status.restored_components


class Epochs(Callback):
    def __init__(self) -> None:
        self.ended = 0

    def on_epoch_end(self, ctx):
        self.ended += 1


@pytest.mark.parametrize("other, match", [
    (NoiseSchedulers.LINEAR(T=30), "T=20.*T=30"),
    (NoiseSchedulers.COSINE(T=20), "differs from this run's NoiseSchedulers.COSINE"),
    (NoiseSchedulers.LINEAR(T=20, beta_max=0.03), "resume with the same schedule"),
])
def test_a_resume_with_another_schedule_is_refused_before_anything_is_restored(tmp_path, other,
                                                                            match):
    _, first = run_objective(tmp_path, 2)
    model = tiny_model(seed=9)
    before, disk, rng = weights(model), files(tmp_path), torch.get_rng_state()
    epochs = Epochs()
    with pytest.raises(ComponentRestoreError, match=match):
        model.train(plan(points(3), resume_from_run_id=first.id, resume_mode="stateful"),
                    objective=diffusion_objective(other), callbacks=[epochs], root=tmp_path,
                    verbose=False)
    assert same(weights(model), before) and epochs.ended == 0
    assert files(tmp_path) == disk and torch.equal(torch.get_rng_state(), rng)


def test_the_component_state_holds_the_schedule_and_the_generator():
    objective = diffusion_objective(SCHEDULE, seed=2)
    assert objective.component_spec().name == "diffusion.objective"
    assert objective.component_spec().required
    torch.randn(4, generator=objective.generator)
    state = objective.component_state()
    assert state["T"] == 20 and state["fingerprint"] == SCHEDULE.fingerprint
    assert state["kind"] == "LINEAR" and state["seed"] == 2
    twin = diffusion_objective(SCHEDULE)
    assert twin.check_component_state(state, version=1) == []
    twin.load_component_state(state, version=1)
    assert torch.equal(torch.randn(4, generator=twin.generator),
                       torch.randn(4, generator=objective.generator))


def test_the_imperative_step_passed_as_objective_is_refused_before_anything_runs(tmp_path):
    model = tiny_model()
    before = weights(model)
    with pytest.raises(TypeError, match="imperative step"):
        model.train(plan(points()), objective=diffusion_train_step_factory(SCHEDULE),
                    root=tmp_path / "runs", verbose=False)
    with pytest.raises(ValueError, match="exactly one update owner"):
        model.train(plan(points()), objective=diffusion_objective(SCHEDULE),
                    train_step_fn=diffusion_train_step_factory(SCHEDULE),
                    root=tmp_path / "runs", verbose=False)
    with pytest.raises(TypeError, match="got an objective"):
        model.train(plan(points()), train_step_fn=diffusion_objective(SCHEDULE),
                    root=tmp_path / "runs", verbose=False)
    assert same(weights(model), before) and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("noise_fn, match", [
    (lambda x, g: (torch.zeros(x.shape[0]), torch.zeros_like(x)), "integer tensor"),
    (lambda x, g: (torch.zeros(1, dtype=torch.long), torch.zeros_like(x)), "shape"),
    (lambda x, g: (torch.full((x.shape[0],), 20), torch.zeros_like(x)), r"outside \[0, 20\)"),
    (lambda x, g: (torch.zeros(x.shape[0], dtype=torch.long), torch.zeros(1)), "eps shaped"),
])
def test_a_bad_noise_fn_result_is_refused_before_any_update(tmp_path, noise_fn, match):
    model = tiny_model()
    before = weights(model)
    with pytest.raises(ValueError, match=match):
        model.train(plan(points()), objective=diffusion_objective(SCHEDULE, noise_fn=noise_fn),
                    root=tmp_path, verbose=False)
    assert same(weights(model), before)


def keyword_model(inputs) -> NNModel:
    """tiny_model's net and weights, its x_0 read from a dict batch by keyword."""
    plain = tiny_model()
    return NNModel(module=plain.net, params=plain.params,
                   batch_adapter=KeywordInputs(inputs, target=None))


def test_a_batch_adapter_yielding_one_keyword_input_trains_like_a_positional_one(tmp_path):
    batches = points()
    positional, keyword = tiny_model(), keyword_model("x")
    positional.train(plan(batches), objective=diffusion_objective(SCHEDULE, seed=4),
                     root=tmp_path / "p", verbose=False)
    keyword.train(plan([{"x": x} for (x,) in batches]),
                  objective=diffusion_objective(SCHEDULE, seed=4), root=tmp_path / "k",
                  verbose=False)
    assert not same(weights(keyword), weights(tiny_model()))  # it trained
    assert same(weights(keyword), weights(positional))  # on x_0, called as net(x_t, t)


def test_a_batch_adapter_yielding_two_inputs_is_refused_before_any_update(tmp_path):
    model = keyword_model(("x", "y"))
    before = weights(model)
    with pytest.raises(ValueError, match=r"exactly one input \(x_0\).*0 positional and 2 keyword"):
        model.train(plan([{"x": x, "y": x} for (x,) in points()]),
                    objective=diffusion_objective(SCHEDULE, seed=4), root=tmp_path,
                    verbose=False)
    assert same(weights(model), before)


def test_the_noise_fn_receives_x0_and_the_generator():
    seen = []

    def noise_fn(x0, generator):
        seen.append((x0.shape, generator))
        return torch.zeros(x0.shape[0], dtype=torch.long), torch.zeros_like(x0)

    objective = diffusion_objective(SCHEDULE, seed=0, noise_fn=noise_fn)
    ctx = ObjectiveContext(model=tiny_model(), batch=points(1)[0], batch_idx=0, epoch=0,
                           precision=None)  # type: ignore[arg-type]
    objective(ctx)
    assert seen == [((4, 2), objective.generator)]


@pytest.mark.parametrize("call, error", [
    (lambda: diffusion_objective("linear"), TypeError),  # type: ignore[arg-type]
    (lambda: diffusion_objective(SCHEDULE, seed=-1), ValueError),
    (lambda: diffusion_objective(SCHEDULE, noise_fn=3), TypeError),  # type: ignore[arg-type]
])
def test_bad_arguments_are_refused(call, error):
    with pytest.raises(error):
        call()


def test_it_is_an_objective_subclass():
    assert isinstance(diffusion_objective(SCHEDULE), DiffusionObjective)
