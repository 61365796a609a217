"""A net changed in place after its params built it (spec §11.1, §4.2; issue 26 item 2).

``train`` compares ``model.net`` with the net its params build (recorded recipes
replayed). A change that a registered :class:`RecognizingTransform` reproduces is
recorded as the run's recipe; any other change is refused before a run directory
exists, unless ``salt=`` names the variant. Core alone: the op here is the test's own.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model
from torch import nn

from nnx import (
    NNCheckpoint,
    NNModel,
    NNTrainerParams,
    NNTrainParams,
    Trainer,
    TransformCompatibilityError,
    TransformRecipe,
    register_transform,
    supervised_objective,
)
from nnx._foundation.plugins import versioned_registry
from nnx.extend import RecognizingTransform
from nnx.transforms import LiveTopologyError

X = torch.randn(5, 4, generator=torch.Generator().manual_seed(2))


@pytest.fixture(autouse=True)
def registries(monkeypatch):
    """The test's op never leaks into another test."""
    names = versioned_registry("nnx.transforms")._names
    monkeypatch.setattr(names, "_explicit", dict(names._explicit))
    monkeypatch.setattr(names, "_loaded", dict(names._loaded))


class Gain(nn.Module):
    """A Linear times a learned per-output gain: the test's adapter."""

    def __init__(self, base: nn.Linear) -> None:
        super().__init__()
        self.base = base
        self.gain = nn.Parameter(torch.ones(base.out_features, device=base.weight.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.base(x) * self.gain
        return out


def _materialize(net: nn.Module, config: Mapping[str, Any], *, source: bool = True) -> None:
    for target in config["targets"]:
        parent, _, name = target.rpartition(".")
        setattr(net.get_submodule(parent), name, Gain(net.get_submodule(target)))


def _recognize(net: nn.Module, reference: nn.Module) -> list[dict[str, Any]]:
    found = [p for p, m in net.named_modules() if isinstance(m, Gain)
             and not isinstance(reference.get_submodule(p), Gain)]
    return [{"targets": found}] if found else []


def _explain(missing: Sequence[str], unexpected: Mapping[str, tuple[int, ...]]) -> str | None:
    paths = [k[:-len(".gain")] for k in unexpected if k.endswith(".gain")]
    return f"gains at {paths}, rebuilt by TransformRecipe('test.gain', 1, ...)" if paths else None


GAIN = RecognizingTransform(_materialize, recognize=_recognize, explain_weights=_explain,
                            recipe_api="test.gain_recipe")


def plan() -> NNTrainParams:
    return NNTrainParams(n_epochs=2, train_loader=tiny_batches(), optim=sgd(0.5), seed=0)


def gained(*targets: str) -> NNModel:
    model = tiny_model()
    _materialize(model.net, {"targets": list(targets)})
    return model


def test_an_unchanged_net_records_nothing(tmp_path: Path) -> None:
    model = tiny_model()
    run = model.train(plan(), verbose=False, root=tmp_path)
    assert model.transforms == () and "transforms" not in run.state()


def test_an_unknown_change_is_refused_before_any_run_directory(tmp_path: Path) -> None:
    """No op recognises Gain here: refused, naming the change, the recipe API and salt=."""
    model = gained("layers.0")
    net, before = model.net, {k: v.clone() for k, v in model.net.state_dict().items()}
    root = tmp_path / "runs"
    with pytest.raises(LiveTopologyError) as err:
        model.train(plan(), verbose=False, root=root)
    message = str(err.value)
    assert "module layers.0: torch.nn.modules.linear.Linear -> " in message
    assert "module layers.0.base added" in message
    assert "model.apply_transform(recipe)" in message and "nnx.register_transform" in message
    assert "salt='...'" in message and "Nothing was reserved" in message
    assert not root.exists()
    assert model.net is net and model.transforms == ()
    assert all(torch.equal(v, before[k]) for k, v in model.net.state_dict().items())


def test_a_change_with_the_same_tensor_names_is_still_refused(tmp_path: Path) -> None:
    """The module tree, not only the state-dict names, must match (an activation swap)."""
    model = tiny_model()
    model.net.activations[0] = nn.Tanh()  # type: ignore[index]
    with pytest.raises(LiveTopologyError, match=r"module activations\.0: .*ReLU -> .*Tanh"):
        model.train(plan(), verbose=False, root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_a_net_swapped_in_with_the_same_topology_trains_as_the_one_it_replaces(
        tmp_path: Path) -> None:
    """Issue 36 item 14: a hand-swapped net the params would build (same modules, shapes
    and settings) is harmless to run identity, so train() accepts it: same id and
    records as the unswapped model, nothing recorded as a transform."""
    from nnx import Nets

    reference = tiny_model().train(plan(), verbose=False, root=tmp_path / "a")
    swapped = tiny_model()
    swapped.net = Nets.FEED_FWD(params=swapped.net_params)
    swapped.net.load_state_dict(tiny_model().net.state_dict())  # the same start
    run = swapped.train(plan(), verbose=False, root=tmp_path / "b")
    assert run.id == reference.id and swapped.transforms == ()
    assert [r.train_edp.loss for r in run.epoch_records()] == [
        r.train_edp.loss for r in reference.epoch_records()]


def test_a_swapped_net_with_other_settings_is_refused_saying_it_protects_run_identity(
        tmp_path: Path) -> None:
    """Issue 36 item 14: a dropout rate no tensor shape shows used to pass, training under
    the run id of the rate the params record. The refusal says why and names the
    supported ways to train a different net."""
    from nnx import Nets

    model = tiny_model()
    model.net = swapped = Nets.FEED_FWD(params=dataclasses.replace(model.net_params,
                                                                   dropout_prob=0.5))
    with pytest.raises(LiveTopologyError) as err:
        model.train(plan(), verbose=False, root=tmp_path / "runs")
    message = str(err.value)
    assert re.search(r"setting dropouts?\.0: p=0\.0.* -> p=0\.5", message), message
    assert "protects run identity" in message
    for way in ("NNModel(module=net, params=...)", "nnx.register_model_factory",
                "model.apply_transform(recipe)", "salt='...'"):
        assert way in message, way
    assert not (tmp_path / "runs").exists() and model.transforms == ()
    assert model.net is swapped  # the refusal changes nothing of the model


def test_salt_trains_the_unrecorded_variant_with_a_warning(tmp_path: Path) -> None:
    model = gained("layers.0")
    with pytest.warns(RuntimeWarning, match=r"salt='gain-variant' records nothing"):
        run = model.train(plan(), verbose=False, root=tmp_path, salt="gain-variant")
    assert "transforms" not in run.state() and model.transforms == ()


def test_a_recognizing_op_records_the_change_and_the_run_reloads(tmp_path: Path) -> None:
    register_transform("test.gain", 1, GAIN)
    model = gained("layers.0", "layers.1")
    run = model.train(plan(), verbose=False, root=tmp_path)
    recipe = TransformRecipe("test.gain", 1, {"targets": ["layers.0", "layers.1"]})
    assert model.transforms == (recipe,) and run.state()["transforms"] == [recipe.state()]
    rebuilt = NNModel.from_checkpoint(run.checkpoints_dir / "last.pt")
    assert rebuilt.transforms == (recipe,)
    assert torch.equal(rebuilt.predict(X).logits, model.predict(X).logits)


def test_a_recipe_that_does_not_rebuild_the_tree_is_refused(tmp_path: Path) -> None:
    """Only what replays to exactly the live tree is recorded."""
    def first_only(net: nn.Module, reference: nn.Module) -> list[dict[str, Any]]:
        return [{"targets": _recognize(net, reference)[0]["targets"][:1]}]

    register_transform("test.gain", 1, dataclasses.replace(GAIN, recognize=first_only))
    model = gained("layers.0", "layers.1")
    with pytest.raises(LiveTopologyError, match=r"module layers\.1: .*Linear -> .*Gain"):
        model.train(plan(), verbose=False, root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists() and model.transforms == ()


def test_a_recognizer_refusal_says_why(tmp_path: Path) -> None:
    def refuse(net: nn.Module, reference: nn.Module) -> list[dict[str, Any]]:
        raise ValueError("the gains are tied; untie them first")

    register_transform("test.gain", 1, dataclasses.replace(GAIN, recognize=refuse))
    with pytest.raises(LiveTopologyError, match=r"test\.gain@v1: the gains are tied"):
        gained("layers.0").train(plan(), verbose=False, root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_an_old_checkpoint_without_the_recipe_is_explained(tmp_path: Path) -> None:
    register_transform("test.gain", 1, GAIN)
    run = gained("layers.0").train(plan(), verbose=False, root=tmp_path)
    saved = NNCheckpoint.from_file(run.checkpoints_dir / "last.pt")
    old = dataclasses.replace(saved, transforms=()).save(tmp_path / "old" / "last.pt")
    with pytest.raises(TransformCompatibilityError,
                       match=r"records no transform recipe for: gains at \['layers\.0'\]"):
        NNModel.from_checkpoint(old)
    # No op explains the keys: the names-and-shapes refusal, as before.
    register_transform("test.gain", 1, dataclasses.replace(GAIN, explain_weights=None))
    with pytest.raises(ValueError, match="the saved weights do not fit the module"):
        NNModel.from_checkpoint(old)


def test_training_that_fails_puts_the_recorded_recipes_back(tmp_path: Path) -> None:
    register_transform("test.gain", 1, GAIN)
    model = gained("layers.0")
    model.train(plan(), verbose=False, root=tmp_path)
    again = tiny_model()
    _materialize(again.net, {"targets": ["layers.0"]})
    with pytest.raises(Exception, match="already exists"):
        again.train(plan(), verbose=False, root=tmp_path)
    assert again.transforms == ()


def test_the_extending_md_block_runs() -> None:
    """docs/extending.md, "Changes made in place": the example op records and reloads."""
    doc = Path(__file__).resolve().parents[4] / "docs" / "extending.md"
    if not doc.exists():  # an installed sdist ships no docs/
        pytest.skip("docs/ is not part of this checkout")
    section = doc.read_text(encoding="utf-8").split(
        "### Changes made in place: `RecognizingTransform`", 1)[1]
    (code,) = re.findall(r"^```python\n(.*?)^```$", section.split("\n## ", 1)[0],
                         re.M | re.S)
    exec(compile(code, "docs/extending.md, Changes made in place", "exec"),
         {"__name__": "__extending_doc__"})


def test_a_trainer_records_and_refuses_alike(tmp_path: Path) -> None:
    params = NNTrainerParams(n_epochs=1, train_loader=tiny_batches(), optims={"all": sgd()})
    with pytest.raises(LiveTopologyError, match=r"Trainer\.train: model\.net is not the net"):
        Trainer(gained("layers.0")).train(params, objective=supervised_objective(),
                                          verbose=False, root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()
    register_transform("test.gain", 1, GAIN)
    model = gained("layers.0")
    run = Trainer(model).train(params, objective=supervised_objective(), verbose=False,
                               root=tmp_path / "runs")
    assert run.state()["transforms"] == [
        {"op": "test.gain", "version": 1, "config": {"targets": ["layers.0"]}}]


class Counted(nn.Module):
    """A Linear whose module keeps non-tensor extra state (get_extra_state)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)  # type: ignore[no-any-return]

    def get_extra_state(self) -> dict[str, int]:
        return {"calls": self.calls}

    def set_extra_state(self, state: dict[str, int]) -> None:
        self.calls = state["calls"]


def test_non_tensor_extra_state_is_topology_that_matches_itself(tmp_path: Path) -> None:
    """The live-topology check reads every state entry; an extra-state dict has no shape
    (it used to crash with "'dict' object has no attribute 'shape'")."""
    from nnx import NNModelParams
    from nnx.transforms.live import module_tree

    assert module_tree(Counted())[1]["_extra_state"] == "<dict>"
    torch.manual_seed(0)
    model = NNModel(module=Counted(), params=NNModelParams())
    run = model.train(plan(), verbose=False, root=tmp_path)
    assert run.idps[-1].epoch == 1 and model.transforms == ()
