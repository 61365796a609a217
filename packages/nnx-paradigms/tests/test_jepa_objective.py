"""jepa_objective (spec §6.5, §14.1): the latent MSE term, the EMA advanced only in
after_update, accumulation, its generator, the "jepa.objective" component and its resume
refusals, the one-update-owner rule."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from _jepa_tiny import (
    N,
    TableMasks,
    files,
    patches,
    plan,
    random_masks,
    same,
    sgd,
    target_of,
    tiny_model,
    weights,
)

from nnx import Callback, NNModel, ObjectiveContext
from nnx.components import ComponentRestoreError
from nnx.paradigms import JEPAObjective, jepa_objective, jepa_train_step_factory


def hand_loss(net, target, x, ctx_idx, tgt_idx):
    """The written-out I-JEPA loss: MSE between predicted and layer-normed target latents."""
    every = torch.arange(N).expand(x.shape[0], N)
    with torch.no_grad():
        h = F.layer_norm(target(x, every), (4,))
        h = torch.gather(h, 1, tgt_idx.unsqueeze(-1).expand(-1, -1, 4))
    pred = net.predictor(net(x, ctx_idx), ctx_idx, tgt_idx)
    return F.mse_loss(pred, h)


def ema(target, online, m):
    with torch.no_grad():
        for name, t in target.named_parameters():
            if not name.startswith("predictor."):
                t.mul_(m).add_(dict(online.named_parameters())[name], alpha=1 - m)


def test_the_term_is_the_latent_squared_error_over_its_element_count():
    model = tiny_model()
    target = target_of(model)
    table = TableMasks(4)
    objective = jepa_objective(target, model.net.predictor, table)
    objective.check_run(model, optimizers={}, callbacks=())
    (x,) = patches(1)[0]
    ctx = ObjectiveContext(model=model, batch=(x,), batch_idx=0, epoch=0,
                           precision=None)  # type: ignore[arg-type]
    result = objective(ctx)
    (term,) = result.terms
    assert term.name == "latent_mse" and term.reduction == "mean"
    assert term.denominator == 4 * 2 * 4  # B × n_tgt × D
    expected = hand_loss(model.net, target, x, table.ctx, table.tgt)
    expected = float(expected.detach())
    assert float(term.numerator.detach()) / term.denominator == pytest.approx(expected, rel=1e-6)
    assert dict(result.metrics) == {"latent_mse": pytest.approx(expected, rel=1e-6)}
    assert result.output is None  # no classification fields
    assert all(p.grad is None for p in model.net.parameters())  # never back-propagates
    assert all(not p.requires_grad for p in target.parameters())  # frozen at first use


def train(tmp_path, loader, *, accumulate=1, n_epochs=2, masks=None, momentum=0.9):
    model = tiny_model()
    objective = jepa_objective(target_of(model), model.net.predictor,
                               masks or TableMasks(8), ema_momentum=momentum)
    model.train(plan(loader, n_epochs=n_epochs, optim=sgd(0.2, accumulate=accumulate)),
                objective=objective, root=tmp_path, verbose=False)
    return model, objective


def test_accumulation_over_uneven_microbatches_equals_one_full_batch_update(tmp_path):
    x = torch.cat([b[0] for b in patches(2)])  # 8 rows
    a, oa = train(tmp_path / "a", [(x[:5],), (x[5:7],), (x[7:],)], accumulate=3)
    b, ob = train(tmp_path / "b", [(x,)])
    ref = tiny_model()
    target = target_of(ref)
    table = TableMasks(8)
    for _ in range(2):  # plain full-batch autograd, then one EMA step per update
        loss = hand_loss(ref.net, target, x, table.ctx, table.tgt)
        ref.net.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in ref.net.parameters():
                p -= 0.2 * p.grad
        ema(target, ref.net, 0.9)
    assert oa.updates == ob.updates == 2  # the accumulation window advanced the EMA once
    for got_net, got_target in ((a.net, oa.target_encoder), (b.net, ob.target_encoder)):
        for name, p in ref.net.state_dict().items():  # 1e-6: float32 sums in another order
            torch.testing.assert_close(got_net.state_dict()[name], p, atol=1e-6, rtol=1e-5)
        for name, p in target.state_dict().items():
            torch.testing.assert_close(got_target.state_dict()[name], p, atol=1e-6, rtol=1e-5)


class Updates(Callback):
    def __init__(self, objective):
        self.objective, self.seen = objective, []

    def on_optimizer_update(self, ctx, event):
        self.seen.append(self.objective.updates)


def test_the_ema_target_advances_once_per_committed_update_before_callbacks(tmp_path):
    model = tiny_model()
    target = target_of(model)
    start = weights(target)
    objective = jepa_objective(target, model.net.predictor, random_masks, seed=0)
    seen = Updates(objective)
    model.train(plan(patches(6), optim=sgd(0.2, accumulate=4)), objective=objective,
                callbacks=[seen], root=tmp_path, verbose=False)
    assert seen.seen == [1, 2]  # windows of 4 and 2 microbatches: two updates
    assert not same(weights(target), start)


def test_momentum_one_keeps_the_target_and_zero_copies_the_online_encoder(tmp_path):
    for m in (1.0, 0.0):
        model = tiny_model()
        target = target_of(model)
        start = weights(target)
        model.train(plan(patches(2)), objective=jepa_objective(
            target, model.net.predictor, random_masks, ema_momentum=m, seed=0),
            root=tmp_path / str(m), verbose=False)
        got = weights(target)
        if m == 1.0:
            assert same(got, start)
        else:
            online = weights(model.net)
            assert all(torch.equal(got[k], online[k]) for k in online
                       if not k.startswith("predictor."))
            assert all(torch.equal(got[k], start[k]) for k in start if k.startswith("predictor."))


def test_a_reduced_precision_run_trains_the_objective_under_autocast(tmp_path):
    from nnx import Precision

    model = tiny_model(precision=Precision.BF16)
    objective = jepa_objective(target_of(model), model.net.predictor, random_masks, seed=0)
    run = model.train(plan(patches(2)), objective=objective, root=tmp_path, verbose=False)
    assert all(torch.isfinite(torch.tensor(i.train_edp.loss)) for i in run.idps)
    assert objective.updates == 2


def test_the_mask_generator_is_its_own_seeded_and_leaves_the_global_rng_alone():
    objective = jepa_objective(torch.nn.Linear(1, 1), torch.nn.Linear(1, 1), random_masks,
                               seed=5)
    state = torch.get_rng_state()
    first = torch.randn(3, generator=objective.generator)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(first, torch.randn(3, generator=torch.Generator().manual_seed(5)))
    torch.manual_seed(11)
    unseeded = jepa_objective(torch.nn.Linear(1, 1), torch.nn.Linear(1, 1), random_masks)
    a = torch.randn(3, generator=unseeded.generator)  # one global draw at first use
    torch.manual_seed(11)
    b = torch.randn(3, generator=jepa_objective(torch.nn.Linear(1, 1), torch.nn.Linear(1, 1),
                                                random_masks).generator)
    assert torch.equal(a, b)  # the same global seed, the same mask stream


def run_objective(tmp_path, n_epochs, *, momentum=0.99, model=None, **kwargs):
    model = model or tiny_model()
    objective = jepa_objective(target_of(model), model.net.predictor, random_masks,
                               ema_momentum=momentum)
    run = model.train(plan(patches(3), n_epochs=n_epochs, **kwargs), objective=objective,
                      root=tmp_path, verbose=False)
    return model, objective, run


def test_a_2_plus_1_stateful_resume_equals_3_straight_epochs_bit_for_bit(tmp_path):
    straight, o3, run3 = run_objective(tmp_path / "straight", 3)
    _, _, first = run_objective(tmp_path / "resumed", 2)
    resumed, o_rest, rest = run_objective(tmp_path / "resumed", 1, resume_from_run_id=first.id,
                                          resume_mode="stateful")
    assert same(weights(straight.net), weights(resumed.net))
    assert same(weights(o3.target_encoder), weights(o_rest.target_encoder))
    assert o3.updates == o_rest.updates == 9
    losses = [i.train_edp.loss for i in run3.idps]
    assert [i.train_edp.loss for i in first.idps] + [i.train_edp.loss for i in rest.idps] == (
        losses)
    assert "jepa.objective" in rest.resume_status.restored_components


class Epochs(Callback):
    def __init__(self) -> None:
        self.ended = 0

    def on_epoch_end(self, ctx):
        self.ended += 1


class WiderNet(torch.nn.Module):
    """Another patch layout: 8 patches, so the positional table has another shape."""

    def __init__(self) -> None:
        super().__init__()
        from _jepa_tiny import D, P, Predictor
        self.proj = torch.nn.Linear(P, D)
        self.pos = torch.nn.Parameter(torch.zeros(8, D))
        self.predictor = Predictor()

    def forward(self, x, idx):
        return x


@pytest.mark.parametrize("change, error, match", [
    ("momentum", ComponentRestoreError, "ema_momentum=0.99, this run's is 0.5"),
    # Another number of patches changes the positional tables: core's shape check refuses
    # the checkpoint before the components are even read.
    ("layout", ValueError, r"do not fit this net.*'pos'"),
])
def test_a_resume_with_another_momentum_or_patch_layout_is_refused_before_restoring(
        tmp_path, change, error, match):
    _, _, first = run_objective(tmp_path, 2)
    torch.manual_seed(9)
    if change == "momentum":
        model = tiny_model(seed=9)
        objective = jepa_objective(target_of(model), model.net.predictor, random_masks,
                                   ema_momentum=0.5)
    else:
        from nnx import Devices, Losses, NNModel, NNModelParams
        model = NNModel(module=WiderNet(), params=NNModelParams(
            device=Devices.CPU, loss=Losses.MEAN_SQUARED_ERROR))
        objective = jepa_objective(copy.deepcopy(model.net), model.net.predictor,
                                   random_masks, ema_momentum=0.99)
    before, target_before = weights(model.net), weights(objective.target_encoder)
    disk, rng = files(tmp_path), torch.get_rng_state()
    epochs = Epochs()
    with pytest.raises(error, match=match):
        model.train(plan(patches(3), resume_from_run_id=first.id, resume_mode="stateful"),
                    objective=objective, callbacks=[epochs], root=tmp_path, verbose=False)
    assert same(weights(model.net), before) and epochs.ended == 0
    assert same(weights(objective.target_encoder), target_before)
    assert objective.updates == 0
    assert all(p.requires_grad for p in objective.target_encoder.parameters())
    assert files(tmp_path) == disk and torch.equal(torch.get_rng_state(), rng)


def test_a_restored_patch_layout_refuses_other_patches_before_the_first_update():
    model = tiny_model()
    objective = jepa_objective(target_of(model), model.net.predictor, random_masks, seed=0)
    state = {**objective.component_state(), "layout": [N, 2]}  # trained on P=2 patches
    objective.load_component_state(state, version=1)
    before = weights(model.net)
    ctx = ObjectiveContext(model=model, batch=patches(1)[0], batch_idx=0, epoch=0,
                           precision=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"\(N=6, P=3\).*\(N=6, P=2\)"):
        objective(ctx)
    assert same(weights(model.net), before) and objective.updates == 0


def test_the_component_state_holds_the_spec_the_target_and_the_generator():
    model = tiny_model()
    objective = jepa_objective(target_of(model), model.net.predictor, random_masks, seed=2)
    objective.check_run(model, optimizers={}, callbacks=())
    assert objective.component_spec().name == "jepa.objective"
    assert objective.component_spec().required
    torch.randn(4, generator=objective.generator)
    state = objective.component_state()
    assert state["momentum"] == 0.996 and state["updates"] == 0 and state["seed"] == 2
    assert state["predictor"] == "predictor"
    assert set(state["target"]) == set(model.net.state_dict())
    twin_model = tiny_model(seed=4)
    twin = jepa_objective(target_of(twin_model), twin_model.net.predictor, random_masks)
    assert twin.check_component_state(state, version=1) == []
    twin.load_component_state(state, version=1)
    assert same(weights(twin.target_encoder), weights(objective.target_encoder))
    assert torch.equal(torch.randn(4, generator=twin.generator),
                       torch.randn(4, generator=objective.generator))


def test_the_imperative_step_passed_as_objective_is_refused_before_anything_runs(tmp_path):
    model = tiny_model()
    before = weights(model.net)
    step = jepa_train_step_factory(target_of(model), model.net.predictor, random_masks)
    with pytest.raises(TypeError, match="imperative step"):
        model.train(plan(patches()), objective=step, root=tmp_path / "runs", verbose=False)
    objective = jepa_objective(target_of(model), model.net.predictor, random_masks)
    with pytest.raises(ValueError, match="exactly one update owner"):
        model.train(plan(patches()), objective=objective, train_step_fn=step,
                    root=tmp_path / "runs", verbose=False)
    with pytest.raises(TypeError, match="got an objective"):
        model.train(plan(patches()), train_step_fn=objective, root=tmp_path / "runs",
                    verbose=False)
    assert same(weights(model.net), before) and not (tmp_path / "runs").exists()


def overlapping(b, n, g):
    return torch.zeros(b, 2, dtype=torch.long), torch.zeros(b, 1, dtype=torch.long)


@pytest.mark.parametrize("mask_fn, match", [
    (overlapping, "share a patch"),
    (lambda b, n, g: (torch.zeros(b, 2), torch.ones(b, 1)), "LongTensor"),
    (lambda b, n, g: (torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 1, dtype=torch.long)),
     "shape"),
    (lambda b, n, g: (torch.zeros(b, 2, dtype=torch.long),
                      torch.full((b, 1), N, dtype=torch.long)), r"outside \[0, 6\)"),
    (lambda b, n, g: (torch.zeros(b, 2, dtype=torch.long),
                      torch.zeros(b, 0, dtype=torch.long)), "empty target_idx"),
])
def test_a_bad_mask_is_refused_before_any_update(tmp_path, mask_fn, match):
    model = tiny_model()
    target = target_of(model)
    before, target_before = weights(model.net), weights(target)
    with pytest.raises(ValueError, match=match):
        model.train(plan(patches()), objective=jepa_objective(target, model.net.predictor,
                                                              mask_fn), root=tmp_path,
                    verbose=False)
    assert same(weights(model.net), before) and same(weights(target), target_before)
    assert all(p.requires_grad for p in target.parameters()) and target.training


def test_a_run_is_refused_before_any_run_dir_for_a_bad_target_or_predictor(tmp_path):
    model = tiny_model()
    before = weights(model.net)
    cases = [
        (jepa_objective(model.net, model.net.predictor, random_masks), "not model.net itself"),
        (jepa_objective(target_of(model), copy.deepcopy(model.net.predictor), random_masks),
         "submodule of model.net"),
        (jepa_objective(torch.nn.Linear(3, 4), model.net.predictor, random_masks),
         "do not mirror model.net"),
    ]
    for objective, match in cases:
        flags = [p.requires_grad for p in objective.target_encoder.parameters()]
        with pytest.raises(ValueError, match=match):
            model.train(plan(patches()), objective=objective, root=tmp_path / "runs",
                        verbose=False)
        if objective.target_encoder is not model.net:
            assert [p.requires_grad for p in objective.target_encoder.parameters()] == flags
    assert same(weights(model.net), before) and not (tmp_path / "runs").exists()
    assert all(p.requires_grad for p in model.net.parameters())


def test_one_keyword_input_trains_exactly_like_one_positional_input(tmp_path):
    """Spec §6.5: the objective reads one input; a keyword only names the batch entry."""
    from nnx import KeywordInputs

    loader = patches(2)
    positional = tiny_model()
    positional.train(plan(loader), objective=jepa_objective(
        target_of(positional), positional.net.predictor, TableMasks(8)),
        root=tmp_path / "a", verbose=False)
    same_start = tiny_model()  # the same seeded weights, now read from a mapping's "x"
    keyword = NNModel(module=same_start.net, params=same_start.params,
                      batch_adapter=KeywordInputs(("x",), target=None))
    keyword.train(plan([{"x": x} for (x,) in loader]), objective=jepa_objective(
        target_of(keyword), keyword.net.predictor, TableMasks(8)),
        root=tmp_path / "b", verbose=False)
    assert same(weights(keyword.net), weights(positional.net))


def test_a_batch_with_two_inputs_or_another_rank_is_refused(tmp_path):
    for loader, match in [([(torch.randn(4, N, 3), torch.randn(4, N, 3), torch.randn(4))],
                           "PositionalInputs|exactly one input"),
                          ([(torch.randn(4, 3),)], r"\(B, N, P\)")]:
        model = tiny_model()
        before = weights(model.net)
        with pytest.raises(ValueError, match=match):
            model.train(plan(loader), objective=jepa_objective(
                target_of(model), model.net.predictor, random_masks), root=tmp_path / match[:3],
                verbose=False)
        assert same(weights(model.net), before)


@pytest.mark.parametrize("call, error", [
    (lambda: jepa_objective("t", torch.nn.Linear(1, 1), random_masks), TypeError),
    (lambda: jepa_objective(torch.nn.Linear(1, 1), "p", random_masks), TypeError),
    (lambda: jepa_objective(torch.nn.Linear(1, 1), torch.nn.Linear(1, 1), 3), TypeError),
    (lambda: jepa_objective(torch.nn.Linear(1, 1), torch.nn.Linear(1, 1), random_masks,
                            ema_momentum=1.5), ValueError),
    (lambda: jepa_objective(torch.nn.Linear(1, 1), torch.nn.Linear(1, 1), random_masks,
                            seed=-1), ValueError),
])
def test_bad_arguments_are_refused(call, error):
    with pytest.raises(error):
        call()


def test_it_is_an_objective_subclass():
    assert isinstance(jepa_objective(torch.nn.Linear(1, 1), torch.nn.Linear(1, 1),
                                     random_masks), JEPAObjective)
