"""jepa_train_step_factory (spec §6.1, §14.1): the latent MSE through finalize_step, the EMA
after each optimizer step, the "jepa.target_encoder" component, the refusals."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _jepa_tiny import (
    N,
    TableMasks,
    patches,
    plan,
    random_masks,
    same,
    sgd,
    target_of,
    tiny_model,
    weights,
)

from nnx import Precision
from nnx._step_helpers import is_full_precision_only
from nnx.objectives.ownership import is_imperative_step
from nnx.paradigms import jepa_train_step_factory


def hand_step(net, target, x, ctx_idx, tgt_idx, lr, m):
    every = torch.arange(N).expand(x.shape[0], N)
    with torch.no_grad():
        h = F.layer_norm(target(x, every), (4,))
        h = torch.gather(h, 1, tgt_idx.unsqueeze(-1).expand(-1, -1, 4))
    loss = F.mse_loss(net.predictor(net(x, ctx_idx), ctx_idx, tgt_idx), h)
    net.zero_grad()
    loss.backward()
    online = dict(net.named_parameters())
    with torch.no_grad():
        for p in net.parameters():
            p -= lr * p.grad
        for name, t in target.named_parameters():
            if not name.startswith("predictor."):
                t.mul_(m).add_(online[name], alpha=1 - m)
    return float(loss.detach())


def test_the_step_trains_the_latent_mse_and_advances_the_ema_after_each_step(tmp_path):
    batches = patches(3)
    model, ref = tiny_model(), tiny_model()
    target, ref_target = target_of(model), target_of(ref)
    table = TableMasks(4)
    step = jepa_train_step_factory(target, model.net.predictor, table, ema_momentum=0.9)
    run = model.train(plan(batches), train_step_fn=step, root=tmp_path, verbose=False)
    again = TableMasks(4)
    losses = [hand_step(ref.net, ref_target, x, again.ctx, again.tgt, 0.1, 0.9)
              for (x,) in batches]
    got = [idp.train_edp for idp in run.idps]
    assert [e.loss for e in got] == pytest.approx(losses, abs=1e-6)
    assert all(e.error == e.loss and e.extra["latent_mse"] == e.loss for e in got)
    for mine, theirs in ((model.net, ref.net), (target, ref_target)):
        for name, p in theirs.state_dict().items():
            torch.testing.assert_close(mine.state_dict()[name], p, atol=1e-6, rtol=1e-5)
    assert [idp.update_count for idp in run.idps] == [1, 2, 3]  # one report per update
    assert step.updates == 3


def test_masks_come_from_the_global_rng_so_a_seeded_run_repeats(tmp_path):
    a, b = tiny_model(), tiny_model()
    for i, model in enumerate((a, b)):
        model.train(plan(patches(2)), train_step_fn=jepa_train_step_factory(
            target_of(model), model.net.predictor, random_masks), root=tmp_path / str(i),
            verbose=False)
    assert same(weights(a.net), weights(b.net))


def test_the_step_is_marked_full_precision_only_and_imperative_and_is_a_component():
    model = tiny_model()
    step = jepa_train_step_factory(target_of(model), model.net.predictor, random_masks)
    assert is_full_precision_only(step) and is_imperative_step(step)
    spec = step.component_spec()
    assert spec.name == "jepa.target_encoder" and spec.required


@pytest.mark.parametrize("policy", [Precision.FP16, Precision.BF16])
def test_a_reduced_precision_run_refuses_the_step_before_any_run_dir(tmp_path, policy):
    model = tiny_model(precision=policy)
    target = target_of(model)
    before, target_before, rng = weights(model.net), weights(target), torch.get_rng_state()
    with pytest.raises(ValueError, match=rf"full-precision-only.*{policy.name}"):
        model.train(plan(patches()), train_step_fn=jepa_train_step_factory(
            target, model.net.predictor, random_masks), root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists()
    assert same(weights(model.net), before) and same(weights(target), target_before)
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(p.requires_grad for p in target.parameters())


def test_accumulation_is_refused_by_finalize_step_without_an_update(tmp_path):
    model = tiny_model()
    target = target_of(model)
    before, target_before = weights(model.net), weights(target)
    step = jepa_train_step_factory(target, model.net.predictor, random_masks)
    with pytest.raises(ValueError, match="accumulate_grad_batches=2"):
        model.train(plan(patches(), optim=sgd(accumulate=2)), train_step_fn=step,
                    root=tmp_path, verbose=False)
    assert same(weights(model.net), before) and same(weights(target), target_before)
    assert all(p.grad is None for p in model.net.parameters()) and step.updates == 0


def test_a_non_finite_batch_is_never_back_propagated_nor_advances_the_ema(tmp_path):
    batches = patches(2)
    poisoned = [(torch.full((4, N, 3), float("nan")),), batches[1]]
    model = tiny_model()
    step = jepa_train_step_factory(target_of(model), model.net.predictor, random_masks)
    with pytest.warns(RuntimeWarning, match="non-finite training loss"):
        run = model.train(plan(poisoned), train_step_fn=step, root=tmp_path, verbose=False)
    assert [idp.update_count for idp in run.idps] == [0, 1]
    assert step.updates == 1


def run_step(tmp_path, n_epochs, **kwargs):
    model = tiny_model()
    step = jepa_train_step_factory(target_of(model), model.net.predictor, random_masks,
                                   ema_momentum=0.9)
    run = model.train(plan(patches(3), n_epochs=n_epochs, **kwargs), train_step_fn=step,
                      root=tmp_path, verbose=False)
    return model, step, run


def test_a_2_plus_1_stateful_resume_of_the_step_equals_3_straight_epochs(tmp_path):
    straight, s3, run3 = run_step(tmp_path / "straight", 3)
    _, _, first = run_step(tmp_path / "resumed", 2)
    resumed, s_rest, rest = run_step(tmp_path / "resumed", 1, resume_from_run_id=first.id,
                                     resume_mode="stateful")
    assert same(weights(straight.net), weights(resumed.net))
    assert same(weights(s3.target_encoder), weights(s_rest.target_encoder))
    assert s3.updates == s_rest.updates == 9
    assert [i.train_edp.loss for i in first.idps] + [i.train_edp.loss for i in rest.idps] == [
        i.train_edp.loss for i in run3.idps]
    assert "jepa.target_encoder" in rest.resume_status.restored_components


def test_a_resume_of_the_step_with_another_momentum_is_refused(tmp_path):
    from nnx.components import ComponentRestoreError

    _, _, first = run_step(tmp_path, 1)
    model = tiny_model(seed=3)
    target = target_of(model)
    before, target_before = weights(model.net), weights(target)
    with pytest.raises(ComponentRestoreError, match=r"ema_momentum=0\.9, this run's is 0\.5"):
        model.train(plan(patches(3), resume_from_run_id=first.id, resume_mode="stateful"),
                    train_step_fn=jepa_train_step_factory(target, model.net.predictor,
                                                          random_masks, ema_momentum=0.5),
                    root=tmp_path, verbose=False)
    assert same(weights(model.net), before) and same(weights(target), target_before)


def test_a_bad_target_is_refused_at_the_first_batch_before_any_update(tmp_path):
    model = tiny_model()
    before = weights(model.net)
    with pytest.raises(ValueError, match=r"not model\.net itself"):
        model.train(plan(patches()), train_step_fn=jepa_train_step_factory(
            model.net, model.net.predictor, random_masks), root=tmp_path, verbose=False)
    assert same(weights(model.net), before)
    assert all(p.requires_grad for p in model.net.parameters())


def test_the_factory_refuses_bad_arguments():
    with pytest.raises(TypeError, match="target_encoder"):
        jepa_train_step_factory("t", torch.nn.Linear(1, 1), random_masks)  # type: ignore
    with pytest.raises(ValueError, match="ema_momentum"):
        jepa_train_step_factory(torch.nn.Linear(1, 1), torch.nn.Linear(1, 1), random_masks,
                                ema_momentum=-0.1)
