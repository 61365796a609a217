"""The finalize_step contract of the SimCLR, Mixup, CutMix and MoE step factories (spec §6.1,
§6.5): full-precision-only and imperative marks, the FP16/BF16 refusal before any run
directory exists, the objective= refusal, finalize_step's accumulation refusal, the NaN
guard, grad clipping, and the names nnx exports."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest
import torch
from _paradigms_mix_tiny import (
    classifier,
    grad_flags,
    image_classifier,
    images,
    moe_classifier,
    plan,
    rows,
    same,
    weights,
)

import nnx
import nnx.paradigms
from nnx import NNOptimParams, Precision
from nnx._step_helpers import is_full_precision_only
from nnx.objectives.ownership import is_imperative_step
from nnx.paradigms import (
    cutmix_train_step_factory,
    mixup_train_step_factory,
    moe_train_step_factory,
    simclr_train_step_factory,
)


def pairs(n: int = 2):
    return [(x, x + 0.1) for x, _ in rows(n)]


# (name, step factory, model builder, loader builder)
CASES = [
    ("simclr", simclr_train_step_factory, classifier, pairs),
    ("mixup", mixup_train_step_factory, classifier, rows),
    ("cutmix", cutmix_train_step_factory, image_classifier, images),
    ("moe", moe_train_step_factory, moe_classifier, rows),
]
IDS = [c[0] for c in CASES]


def poison(batch):
    return (torch.full_like(batch[0], float("nan")), *tuple(batch[1:]))


@pytest.mark.parametrize("name, factory, build, data", CASES, ids=IDS)
def test_every_step_is_marked_full_precision_only_and_imperative(name, factory, build, data):
    step = factory()
    assert is_full_precision_only(step) and is_imperative_step(step)


@pytest.mark.parametrize("policy", [Precision.FP16, Precision.BF16])
@pytest.mark.parametrize("name, factory, build, data", CASES, ids=IDS)
def test_a_reduced_precision_run_refuses_the_step_before_any_run_dir(tmp_path, name, factory,
                                                                     build, data, policy):
    model = build(precision=policy)
    before, flags, rng = weights(model), grad_flags(model), torch.get_rng_state()
    with pytest.raises(ValueError, match=rf"full-precision-only.*{policy.name}"):
        model.train(plan(data()), train_step_fn=factory(), root=tmp_path / "runs",
                    verbose=False)
    assert not (tmp_path / "runs").exists()
    assert same(weights(model), before) and grad_flags(model) == flags
    assert torch.equal(torch.get_rng_state(), rng)


@pytest.mark.parametrize("name, factory, build, data", CASES, ids=IDS)
def test_passing_the_step_as_objective_is_refused_before_anything(tmp_path, name, factory,
                                                                  build, data):
    model = build()
    before, flags, rng = weights(model), grad_flags(model), torch.get_rng_state()
    with pytest.raises(TypeError, match="objective= got an imperative step"):
        model.train(plan(data()), objective=factory(), root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists()
    assert same(weights(model), before) and grad_flags(model) == flags
    assert torch.equal(torch.get_rng_state(), rng)


@pytest.mark.parametrize("name, factory, build, data", CASES, ids=IDS)
def test_accumulation_is_refused_by_finalize_step_without_an_update(tmp_path, name, factory,
                                                                    build, data):
    model = build()
    before = weights(model)
    optim = NNOptimParams.builder().sgd(max_lr=0.1).accumulate_grad(2).build()
    with pytest.raises(ValueError, match="accumulate_grad_batches=2"):
        model.train(plan(data(), optim=optim), train_step_fn=factory(), root=tmp_path,
                    verbose=False)
    assert same(weights(model), before)
    assert all(p.grad is None for p in model.net.parameters())


@pytest.mark.parametrize("name, factory, build, data", CASES, ids=IDS)
def test_a_non_finite_batch_is_never_back_propagated(tmp_path, name, factory, build, data):
    batches = data(2)
    model = build()
    with pytest.warns(RuntimeWarning, match="non-finite training loss"):
        run = model.train(plan([poison(batches[0]), batches[1]]), train_step_fn=factory(),
                          root=tmp_path, verbose=False)
    assert [idp.update_count for idp in run.idps] == [0, 1]
    assert all(torch.isfinite(p).all() for p in model.net.parameters())


@pytest.mark.parametrize("name, factory, build, data", CASES, ids=IDS)
def test_the_grad_clip_norm_is_honored(tmp_path, name, factory, build, data):
    model = build()
    start = weights(model)
    optim = NNOptimParams.builder().sgd(max_lr=1.0).grad_clip(1e-3).build()
    model.train(plan(data(1), optim=optim), train_step_fn=factory(), root=tmp_path,
                verbose=False)
    moved = torch.cat([(model.net.state_dict()[k] - v).flatten().double()
                       for k, v in start.items() if v.is_floating_point()])
    assert float(moved.norm()) == pytest.approx(1e-3, rel=1e-3)  # lr 1 × the clipped norm


NAMES = ["nt_xent_loss", "simclr_train_step_factory", "mixup_train_step_factory",
         "cutmix_train_step_factory", "moe_train_step_factory"]


@pytest.mark.parametrize("name", NAMES)
def test_each_name_is_announced_and_resolves_from_nnx(name):
    declared = {ep.name: ep.value for ep in entry_points(group="nnx.exports")}
    assert declared[name].startswith("nnx.paradigms.")
    assert getattr(nnx, name) is getattr(nnx.paradigms, name)
    assert name in nnx.paradigms.__all__
