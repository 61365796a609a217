"""The nnx.dora and nnx.ia3 v1 transform recipes (spec §4.2): a DoRA or IA3 run's
checkpoints rebuild their adapters, and a split run resumes bit for bit."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _peft_tiny import assert_unchanged, snapshot

from nnx import NNModel, NNTrainParams, TransformRecipe, run_id
from nnx.peft import (
    DoRALinear,
    IA3Linear,
    apply_dora_to,
    dora_recipe,
    ia3_recipe,
    materialize_dora,
    materialize_ia3,
)
from nnx.testing import sgd, tiny_batches, tiny_model
from nnx.transforms import registered_transforms, resolve_transform

X = torch.randn(5, 4, generator=torch.Generator().manual_seed(9))


def plan(**changes: object) -> NNTrainParams:
    base: dict[str, object] = dict(n_epochs=2, train_loader=tiny_batches(),
                                   val_loader=tiny_batches(seed=1), optim=sgd(0.5), seed=0)
    base.update(changes)
    return NNTrainParams(**base)  # type: ignore[arg-type]


def dora_model(seed: int = 0) -> tuple[NNModel, TransformRecipe]:
    model = tiny_model(seed)
    recipe = dora_recipe(model.net, "layers.*", r=2, alpha=4.0, dropout=0.25)
    model.apply_transform(recipe)
    return model, recipe


def ia3_model(seed: int = 0) -> tuple[NNModel, TransformRecipe]:
    model = tiny_model(seed)
    recipe = ia3_recipe(model.net, "layers.*", feedforward="layers.1")
    model.apply_transform(recipe)
    return model, recipe


def test_the_recipes_resolve_globs_and_the_ops_are_registered() -> None:
    model = tiny_model()
    before = snapshot(model.net)
    assert dora_recipe(model.net, "layers.*", r=2, alpha=4) == TransformRecipe(
        "nnx.dora", 1, {"targets": ["layers.0", "layers.1"], "r": 2, "alpha": 4.0,
                        "dropout": 0.0})
    assert ia3_recipe(model.net, "layers.*", feedforward=["layers.1"]) == TransformRecipe(
        "nnx.ia3", 1, {"targets": ["layers.0", "layers.1"], "feedforward": ["layers.1"]})
    assert_unchanged(model.net, before)
    assert {("nnx.dora", 1), ("nnx.ia3", 1)} <= set(registered_transforms())
    assert resolve_transform(TransformRecipe("nnx.dora", 1)) is materialize_dora
    assert resolve_transform(TransformRecipe("nnx.ia3", 1)) is materialize_ia3
    with pytest.raises(ValueError, match=r"feedforward pattern.*'layers\.9'"):
        ia3_recipe(model.net, "layers.*", feedforward="layers.9")
    apply_dora_to(model.net, "layers.*", r=2, alpha=4.0)
    with pytest.raises(ValueError, match="select only already-adapted layers"):
        dora_recipe(model.net, "layers.*", r=2, alpha=4.0)


@pytest.mark.parametrize(("op", "config", "match"), [
    ("nnx.dora", {"targets": ["layers.0"], "r": 2, "alpha": 1.0},
     "must have exactly 'targets', 'r', 'alpha' and 'dropout'"),
    ("nnx.dora", {"targets": ["layers.0"], "r": 2, "alpha": 0.0, "dropout": 0.0},
     r"alpha must be .*> 0"),
    ("nnx.ia3", {"targets": ["layers.0"]}, "must have exactly 'targets' and 'feedforward'"),
    ("nnx.ia3", {"targets": ["layers.0"], "feedforward": ["layers.1"]},
     "feedforward must be a list of some of the targets"),
    ("nnx.ia3", {"targets": ["layers.0", "nope"], "feedforward": []}, "select no nn.Linear"),
])
def test_bad_configs_leave_the_net_unchanged(op: str, config: dict[str, object],
                                             match: str) -> None:
    model = tiny_model()
    before = snapshot(model.net)
    with pytest.raises(ValueError, match=match):
        model.apply_transform(TransformRecipe(op, 1, config))
    assert_unchanged(model.net, before)
    assert model.transforms == ()


def test_replay_draws_nothing_and_builds_the_same_topology() -> None:
    for make, materialize in ((dora_model, materialize_dora), (ia3_model, materialize_ia3)):
        model, recipe = make()
        fresh = tiny_model(seed=3).net
        state = torch.get_rng_state()
        materialize(fresh, recipe.config, source=False)
        assert torch.equal(torch.get_rng_state(), state)
        assert [(k, v.shape) for k, v in fresh.state_dict().items()] == [
            (k, v.shape) for k, v in model.net.state_dict().items()]
    assert [m.feedforward for m in fresh.layers] == [False, True]  # type: ignore[union-attr]


@pytest.mark.parametrize("make, kind", [(dora_model, DoRALinear), (ia3_model, IA3Linear)])
def test_a_run_enters_the_run_id_and_rebuilds_from_checkpoint(tmp_path: Path, make,  # type: ignore[no-untyped-def]
                                                             kind) -> None:
    model, recipe = make()
    run = model.train(plan(), verbose=False, root=tmp_path)
    assert run.id == run_id(model=model.params, net=model.net_params, train=plan(),
                            transforms=[recipe.state()])
    rebuilt = NNModel.from_checkpoint(run.checkpoints_dir / "last.pt")
    assert rebuilt.transforms == (recipe,)
    assert all(isinstance(m, kind) for m in rebuilt.net.layers)
    assert torch.equal(rebuilt.predict(X).logits, model.predict(X).logits)
    trained = [k for k in model.net.state_dict() if "magnitude" in k or "scaling" in k]
    assert trained  # DoRA's magnitude / IA3's scaling are restored, not re-initialized
    assert all(torch.equal(rebuilt.net.state_dict()[k], model.net.state_dict()[k])
               for k in trained)


@pytest.mark.parametrize("make", [dora_model, ia3_model])
def test_a_split_run_resumes_bit_for_bit(tmp_path: Path, make) -> None:  # type: ignore[no-untyped-def]
    whole, _ = make()
    whole.train(plan(n_epochs=2), verbose=False, root=tmp_path / "whole")
    first, _ = make()
    head = first.train(plan(n_epochs=1), verbose=False, root=tmp_path / "split")
    resumed, _ = make(seed=5)  # another init: the checkpoint replaces it
    resumed.train(plan(n_epochs=1, resume_from_run_id=head.id, resume_mode="stateful"),
                  verbose=False, root=tmp_path / "split")
    expected, got = whole.net.state_dict(), resumed.net.state_dict()
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[k], got[k]) for k in expected)
