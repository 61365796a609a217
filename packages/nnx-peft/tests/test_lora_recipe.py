"""The nnx.lora v1 transform recipe (spec §4.2): apply, train, resume, rebuild, run id."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _peft_tiny import assert_unchanged, snapshot
from torch import nn

from nnx import NNCheckpoint, NNModel, NNTrainParams, TransformRecipe, run_id
from nnx.peft import LoRALinear, apply_lora_to, lora_recipe, materialize_lora
from nnx.testing import sgd, tiny_batches, tiny_model
from nnx.transforms import registered_transforms, resolve_transform

X = torch.randn(5, 4, generator=torch.Generator().manual_seed(9))


def plan(**changes: object) -> NNTrainParams:
    base: dict[str, object] = dict(n_epochs=2, train_loader=tiny_batches(),
                                   val_loader=tiny_batches(seed=1), optim=sgd(), seed=0)
    base.update(changes)
    return NNTrainParams(**base)  # type: ignore[arg-type]


def lora_model(seed: int = 0, dropout: float = 0.0) -> tuple[NNModel, TransformRecipe]:
    model = tiny_model(seed)
    recipe = lora_recipe(model.net, "layers.*", r=2, alpha=4.0, dropout=dropout)
    model.apply_transform(recipe)
    return model, recipe


def test_lora_recipe_resolves_globs_to_explicit_targets_and_changes_nothing() -> None:
    model = tiny_model()
    before = snapshot(model.net)
    recipe = lora_recipe(model.net, "layers.*", r=2, alpha=4, dropout=0.1)
    assert recipe == TransformRecipe("nnx.lora", 1, {
        "targets": ["layers.0", "layers.1"], "r": 2, "alpha": 4.0, "dropout": 0.1})
    assert recipe.label == "nnx.lora@v1"
    assert_unchanged(model.net, before)
    with pytest.raises(ValueError, match=r"lora_recipe alpha must be .*> 0"):
        lora_recipe(model.net, "layers.*", r=2, alpha=float("inf"))
    apply_lora_to(model.net, "layers.*", r=2, alpha=4.0)
    with pytest.raises(ValueError, match="select only already-adapted layers"):
        lora_recipe(model.net, "layers.*", r=2, alpha=4.0)


def test_the_op_is_registered_through_the_entry_point() -> None:
    assert ("nnx.lora", 1) in registered_transforms()
    assert resolve_transform(TransformRecipe("nnx.lora", 1)) is materialize_lora


def test_apply_transform_wraps_the_targets_and_records_the_recipe() -> None:
    model, recipe = lora_model()
    assert model.transforms == (recipe,)
    assert all(isinstance(m, LoRALinear) for m in model.net.layers)
    assert model.net.layers[0].scaling == 2.0


def test_replay_builds_the_same_topology_without_touching_the_rng() -> None:
    model, recipe = lora_model()
    fresh = tiny_model(seed=3).net
    state = torch.get_rng_state()
    materialize_lora(fresh, recipe.config, source=False)
    assert torch.equal(torch.get_rng_state(), state)
    assert [(k, v.shape) for k, v in fresh.state_dict().items()] == [
        (k, v.shape) for k, v in model.net.state_dict().items()]
    assert all(torch.count_nonzero(m.lora_A.weight) == 0 for m in fresh.layers)


@pytest.mark.parametrize(("config", "match"), [
    ({"targets": ["layers.0"], "r": 2, "alpha": 1.0}, "must have exactly 'targets', 'r'"),
    ({"targets": [], "r": 2, "alpha": 1.0, "dropout": 0.0}, "non-empty list"),
    ({"targets": "layers.0", "r": 2, "alpha": 1.0, "dropout": 0.0}, "non-empty list"),
    ({"targets": ["layers.0", "layers.0"], "r": 2, "alpha": 1.0, "dropout": 0.0},
     "more than once"),
    ({"targets": ["layers.0", "layers.*"], "r": 2, "alpha": 1.0, "dropout": 0.0},
     r"target\(s\) 'layers\.\*' select no nn\.Linear"),
    ({"targets": ["activations.0"], "r": 2, "alpha": 1.0, "dropout": 0.0}, "select no nn.Linear"),
    ({"targets": ["layers.0"], "r": 0, "alpha": 1.0, "dropout": 0.0}, "r must be an integer"),
    ({"targets": ["layers.0"], "r": 2, "alpha": -1.0, "dropout": 0.0}, r"alpha must be .*> 0"),
])
def test_bad_configs_leave_the_net_unchanged(config: dict[str, object], match: str) -> None:
    model = tiny_model()
    before = snapshot(model.net)
    with pytest.raises(ValueError, match=match):
        model.apply_transform(TransformRecipe("nnx.lora", 1, config))
    assert_unchanged(model.net, before)
    assert model.transforms == ()


def test_the_op_refuses_an_already_adapted_target_and_two_paths_of_one_slot() -> None:
    net = tiny_model().net
    apply_lora_to(net, "layers.0", r=2, alpha=1.0)
    with pytest.raises(ValueError, match="already adapted"):
        materialize_lora(net, {"targets": ["layers.0"], "r": 2, "alpha": 1.0, "dropout": 0.0})

    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = nn.Sequential(nn.Linear(4, 4))
            self.alias = self.block

    twice = Twice()
    before = snapshot(twice)
    with pytest.raises(ValueError, match="name each shared layer once"):
        materialize_lora(twice, {"targets": ["block.0", "alias.0"], "r": 2, "alpha": 1.0,
                                 "dropout": 0.0})
    assert_unchanged(twice, before)


def test_a_lora_run_trains_enters_the_run_id_and_rebuilds_from_checkpoint(
        tmp_path: Path) -> None:
    model, recipe = lora_model()
    base = {k: v.clone() for k, v in model.net.state_dict().items() if ".base." in k}
    run = model.train(plan(), verbose=False, root=tmp_path)
    assert run.id == run_id(model=model.params, net=model.net_params, train=plan(),
                            transforms=[recipe.state()])
    assert run.state()["transforms"] == [recipe.state()]
    plain_id = run_id(model=model.params, net=model.net_params, train=plan())
    assert run.id != plain_id
    for k, v in base.items():
        assert torch.equal(model.net.state_dict()[k], v), k
    for tag in ("first", "last", "best"):
        assert NNCheckpoint.load(run.id, tag, root=tmp_path).transforms == (recipe.state(),)
    rebuilt = NNModel.from_checkpoint(run.checkpoints_dir / "last.pt")
    assert rebuilt.transforms == (recipe,)
    assert all(isinstance(m, LoRALinear) for m in rebuilt.net.layers)
    assert torch.equal(rebuilt.predict(X).logits, model.predict(X).logits)
    assert not rebuilt.net.layers[0].base.weight.requires_grad


def test_a_lora_run_split_at_an_epoch_boundary_resumes_bit_for_bit(tmp_path: Path) -> None:
    whole, _ = lora_model(dropout=0.25)
    whole.train(plan(n_epochs=2), verbose=False, root=tmp_path / "whole")

    first, _ = lora_model(dropout=0.25)
    head = first.train(plan(n_epochs=1), verbose=False, root=tmp_path / "split")
    resumed, _ = lora_model(seed=5, dropout=0.25)  # other init: the checkpoint replaces it
    tail = resumed.train(plan(n_epochs=1, resume_from_run_id=head.id, resume_mode="stateful"),
                         verbose=False, root=tmp_path / "split")
    assert tail.resume_status.mode == "stateful"
    expected, got = whole.net.state_dict(), resumed.net.state_dict()
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[k], got[k]) for k in expected)
    changed = [k for k in expected if "lora_B" in k]
    assert changed and all(torch.count_nonzero(expected[k]) > 0 for k in changed)
