"""The ``example.scaled@v1`` transform recipe, registered through the plugin's
``nnx.transforms`` entry point (its pyproject, the one list)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("nnx.example_plugin", reason="nnx-example-plugin is not installed")

import torch
from torch import nn

from nnx import Nets, NNModel
from nnx.example_plugin import ExampleMLPParams, ExampleScaler, materialize_scaled, scaled_recipe
from nnx.extend import TransformRecipe, registered_transforms
from nnx.testing import tiny_batches, tiny_model, tiny_train_params, weights


def _model() -> NNModel:
    params = ExampleMLPParams(input_dim=4, output_dim=3)
    return tiny_model(seed=0, net=Nets.EXAMPLE_MLP, net_params=params)


def test_the_op_is_registered_through_the_entry_point() -> None:
    assert ("example.scaled", 1) in registered_transforms()
    assert scaled_recipe("linear", init=2.0) == TransformRecipe(
        "example.scaled", 1, {"targets": ["linear"], "init": 2.0})


def test_applying_the_recipe_wraps_the_target_and_scales_its_output() -> None:
    model = _model()
    x = tiny_batches(1)[0][0]
    before = model.net(x).detach()
    model.apply_transform(scaled_recipe("linear", init=2.0))
    wrapped = model.net.linear
    assert isinstance(wrapped, nn.Sequential) and isinstance(wrapped[1], ExampleScaler)
    assert torch.allclose(model.net(x), 2.0 * before)
    assert model.transforms == (scaled_recipe("linear", init=2.0),)


def test_the_recipe_enters_the_run_id_and_replays_from_a_checkpoint(tmp_path: Path) -> None:
    plain = _model().train(tiny_train_params(), root=tmp_path / "a", verbose=False)
    model = _model()
    model.apply_transform(scaled_recipe("linear", init=2.0))
    run = model.train(tiny_train_params(), root=tmp_path / "b", verbose=False)
    assert run.id != plain.id
    restored = NNModel.from_checkpoint(run.checkpoints_dir / "best.pt")
    assert isinstance(restored.net.linear[1], ExampleScaler)
    assert restored.transforms == model.transforms
    saved = weights(restored)
    assert saved.keys() == weights(model).keys()
    assert "linear.1.scale" in saved


@pytest.mark.parametrize(("config", "message"), [
    ({"targets": ["nope"], "init": 1.0}, "'nope' names no submodule"),
    ({"targets": ["linear", "linear.weight"], "init": 1.0}, "inside another target"),
    ({"targets": ["linear"]}, "config must have exactly"),
    ({"targets": ["linear"], "init": float("nan")}, "init"),
])
def test_a_refused_recipe_leaves_the_net_as_it_was(config: dict[str, object],
                                                   message: str) -> None:
    model = _model()
    shape, before = str(model.net), weights(model)
    with pytest.raises(ValueError, match=message):
        materialize_scaled(model.net, config)
    assert str(model.net) == shape
    assert all(torch.equal(before[k], v) for k, v in weights(model).items())
