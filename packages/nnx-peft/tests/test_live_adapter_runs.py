"""The spec §11.1 flow, ``apply_lora_to(model.net, ...)`` then ``model.train``: the run
records the adapters as its recipe (issue 26 item 2), so r=4 and r=8 get their own run
ids and every such run reloads through ``NNModel.from_checkpoint``."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest
import torch
from torch import nn

from nnx import NNCheckpoint, NNModel, NNTrainParams, TransformCompatibilityError
from nnx.peft import (
    apply_dora_to,
    apply_ia3_to,
    apply_lora_to,
    ia3_recipe,
    lora_recipe,
    merge_lora,
)
from nnx.testing import sgd, tiny_batches, tiny_model
from nnx.transforms import LiveTopologyError

_PRETRAINED = itertools.count()
X = torch.randn(6, 4, generator=torch.Generator().manual_seed(3))


def plan() -> NNTrainParams:
    return NNTrainParams(n_epochs=2, train_loader=tiny_batches(), optim=sgd(0.5), seed=0)


def pretrained(root: Path) -> NNModel:
    """A trained base: the §11.1 flow's first step (each in a root of its own: the
    pretraining runs share their configuration)."""
    model = tiny_model()
    model.train(plan(), verbose=False, root=root / f"pretrain{next(_PRETRAINED)}")
    return model


def reloads(run, model: NNModel) -> NNModel:
    rebuilt = NNModel.from_checkpoint(run.checkpoints_dir / "last.pt")
    assert torch.equal(rebuilt.predict(X).logits, model.predict(X).logits)
    return rebuilt


def test_live_lora_runs_with_r4_and_r8_get_their_own_ids_and_both_reload(tmp_path: Path) -> None:
    runs, models = {}, {}
    for r in (4, 8):
        model = pretrained(tmp_path)
        assert apply_lora_to(model.net, "layers.*", r=r, alpha=8.0, dropout=0.1) == 2
        runs[r] = model.train(plan(), verbose=False, root=tmp_path)
        models[r] = model
    assert runs[4].id != runs[8].id
    for r in (4, 8):
        recorded = runs[r].state()["transforms"]
        assert recorded == [{"op": "nnx.lora", "version": 1, "config": {
            "targets": ["layers.0", "layers.1"], "r": r, "alpha": 8.0, "dropout": 0.1}}]
        rebuilt = reloads(runs[r], models[r])
        assert [t.state() for t in rebuilt.transforms] == recorded
        assert rebuilt.net.layers[0].lora_dropout.p == 0.1  # type: ignore[index,union-attr]


def test_the_recorded_recipe_is_the_explicit_recipes_own(tmp_path: Path) -> None:
    """A live application and lora_recipe + apply_transform are the same run."""
    live = pretrained(tmp_path)
    apply_lora_to(live.net, "layers.*", r=2, alpha=4.0)
    first = live.train(plan(), verbose=False, root=tmp_path / "live")
    explicit = pretrained(tmp_path)
    explicit.apply_transform(lora_recipe(explicit.net, "layers.*", r=2, alpha=4.0))
    second = explicit.train(plan(), verbose=False, root=tmp_path / "explicit")
    assert live.transforms == explicit.transforms and first.id == second.id


def test_live_dora_and_ia3_runs_reload(tmp_path: Path) -> None:
    dora = pretrained(tmp_path)
    apply_dora_to(dora.net, "layers.0", r=2, alpha=4.0, dropout=0.25)
    dora_run = dora.train(plan(), verbose=False, root=tmp_path)
    assert dora_run.state()["transforms"][0]["op"] == "nnx.dora"
    reloads(dora_run, dora)

    ia3 = pretrained(tmp_path)
    apply_ia3_to(ia3.net, "layers.*", feedforward="layers.1")
    ia3_run = ia3.train(plan(), verbose=False, root=tmp_path)
    assert ia3_run.state()["transforms"] == [ia3_recipe(
        tiny_model().net, "layers.*", feedforward="layers.1").state()]
    reloads(ia3_run, ia3)


def test_layers_with_other_settings_and_a_recorded_recipe_reload_together(
        tmp_path: Path) -> None:
    model = pretrained(tmp_path)
    model.apply_transform(lora_recipe(model.net, "layers.0", r=2, alpha=4.0))  # recorded
    apply_ia3_to(model.net, "layers.1")                                        # live
    run = model.train(plan(), verbose=False, root=tmp_path)
    assert [t["op"] for t in run.state()["transforms"]] == ["nnx.lora", "nnx.ia3"]
    reloads(run, model)

    mixed = pretrained(tmp_path)
    apply_lora_to(mixed.net, "layers.0", r=2, alpha=4.0)
    apply_lora_to(mixed.net, "layers.1", r=3, alpha=4.0)
    run = mixed.train(plan(), verbose=False, root=tmp_path)
    assert [(t["config"]["targets"], t["config"]["r"]) for t in run.state()["transforms"]] == [
        (["layers.0"], 2), (["layers.1"], 3)]
    reloads(run, mixed)
    again = mixed.train(plan(), verbose=False, root=tmp_path, salt="again")
    assert len(mixed.transforms) == 2  # already recorded: nothing new the second time
    reloads(again, mixed)


def test_an_unknown_change_is_refused_before_any_run_directory(tmp_path: Path) -> None:
    class Doubled(nn.Module):
        def __init__(self, linear: nn.Linear) -> None:
            super().__init__()
            self.weight, self.bias = linear.weight, linear.bias  # the same state-dict keys

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return 2 * nn.functional.linear(x, self.weight, self.bias)

    model = tiny_model()
    apply_lora_to(model.net, "layers.1", r=2, alpha=4.0)  # recognised, but not enough
    model.net.layers[0] = Doubled(model.net.layers[0])  # type: ignore[index]
    root = tmp_path / "runs"
    with pytest.raises(LiveTopologyError) as err:
        model.train(plan(), verbose=False, root=root)
    message = str(err.value)
    assert "module layers.0: torch.nn.modules.linear.Linear -> " in message
    assert "model.apply_transform(recipe)" in message and "nnx.register_transform" in message
    assert "nnx.lora_recipe" in message and "salt=" in message
    assert not root.exists() and model.transforms == ()


def test_a_merged_adapter_is_refused_with_the_fix(tmp_path: Path) -> None:
    model = tiny_model()
    apply_lora_to(model.net, "layers.*", r=2, alpha=4.0)
    merge_lora(model.net)
    with pytest.raises(LiveTopologyError, match=r"merged into its base .*unmerge_lora"):
        model.train(plan(), verbose=False, root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def _old_style(run, tmp_path: Path) -> Path:
    """The run's LAST as a checkpoint written before live adapters were recorded: the
    real writer, the same weights, no recipe."""
    saved = NNCheckpoint.from_file(run.checkpoints_dir / "last.pt")
    return dataclasses.replace(saved, transforms=()).save(tmp_path / "old" / "last.pt")


def test_an_old_live_adapter_checkpoint_names_the_recipe_fix(tmp_path: Path) -> None:
    model = pretrained(tmp_path)
    apply_lora_to(model.net, "layers.*", r=4, alpha=8.0)
    path = _old_style(model.train(plan(), verbose=False, root=tmp_path), tmp_path)
    with pytest.raises(TransformCompatibilityError) as err:
        NNModel.from_checkpoint(path)
    message = str(err.value)
    assert "nnx.lora_recipe(model.net, 'layers.0', 'layers.1', r=4," in message
    assert "model.apply_transform(recipe)" in message and "load_state_dict" in message
    assert "Missing key" not in message

    # The fix it names loads the checkpoint.
    fresh = tiny_model()
    fresh.apply_transform(lora_recipe(fresh.net, "layers.0", "layers.1", r=4, alpha=8.0))
    fresh.net.load_state_dict(NNCheckpoint.from_file(path).state_dict)
    assert torch.equal(fresh.predict(X).logits, model.predict(X).logits)


def test_old_dora_and_ia3_checkpoints_name_their_recipes(tmp_path: Path) -> None:
    model = tiny_model()
    apply_dora_to(model.net, "layers.0", r=2, alpha=4.0)
    apply_ia3_to(model.net, "layers.1", feedforward="layers.1")
    path = _old_style(model.train(plan(), verbose=False, root=tmp_path), tmp_path)
    with pytest.raises(TransformCompatibilityError) as err:
        NNModel.from_checkpoint(path)
    message = str(err.value)
    assert "DoRA adapters, rebuilt by nnx.dora_recipe(model.net, 'layers.0', r=2," in message
    assert "nnx.ia3_recipe(model.net, 'layers.1', feedforward=['layers.1'])" in message
    assert "nnx.lora_recipe" not in message  # a DoRA layer is not a LoRA one


def test_a_live_lora_run_split_at_an_epoch_boundary_resumes_bit_for_bit(
        tmp_path: Path) -> None:
    def live(seed: int = 0) -> NNModel:
        model = tiny_model(seed)
        apply_lora_to(model.net, "layers.*", r=2, alpha=4.0, dropout=0.25)
        return model

    def params(**changes: object) -> NNTrainParams:
        return dataclasses.replace(plan(), **changes)  # type: ignore[arg-type]

    whole = live()
    whole.train(params(n_epochs=2), verbose=False, root=tmp_path / "whole")
    head = live().train(params(n_epochs=1), verbose=False, root=tmp_path / "split")
    resumed = live(seed=5)  # other init: the checkpoint replaces it
    tail = resumed.train(params(n_epochs=1, resume_from_run_id=head.id,
                                resume_mode="stateful"), verbose=False, root=tmp_path / "split")
    assert tail.resume_status.mode == "stateful"
    expected, got = whole.net.state_dict(), resumed.net.state_dict()
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[k], got[k]) for k in expected)
