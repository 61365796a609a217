"""The "load checkpoint → surgery → refine" loop (spec §16): a FeedFwdNN after surgery
trains, checkpoints and reloads through NNModel.from_checkpoint as an ordinary model,
because the surgery kept its params aligned with its layers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from _surgery_nets import same, snapshot
from torch import nn

from nnx import MissingModelFactoryError, NNModel, NNTrainParams, TransformRecipe
from nnx.surgery import (
    SurgeryShapeError,
    SurgeryTargetError,
    deepen,
    drop_layer,
    low_rank_factorize,
    widen,
)
from nnx.testing import sgd, tiny_batches, tiny_model
from nnx.transforms import LiveTopologyError

X = torch.randn(6, 4, generator=torch.Generator().manual_seed(3))


def plan(seed: int = 0) -> NNTrainParams:
    return NNTrainParams(n_epochs=2, train_loader=tiny_batches(), optim=sgd(0.2), seed=seed)


def over(model: NNModel, net: nn.Module) -> NNModel:
    """An ordinary model over a surgically changed FeedFwdNN: built from its params,
    holding its weights (strict load: the params build exactly its tensors)."""
    new = NNModel(net_params=net.params, params=model.params)  # type: ignore[arg-type]
    new.net.load_state_dict(net.state_dict())
    return new


@pytest.mark.parametrize("cut", [
    lambda net: widen(net, layer_name="layers.0", new_width=12),
    lambda net: deepen(net, after_layer_name="layers.0"),
    lambda net: drop_layer(deepen(deepen(net, after_layer_name="layers.0"),
                                  after_layer_name="layers.1"), layer_name="layers.2"),
], ids=["widen", "deepen", "deepen-then-drop"])
def test_a_cut_feedfwd_trains_and_reloads_from_its_checkpoint(
        tmp_path: Path, cut: Callable[[nn.Module], nn.Module]) -> None:
    pretrained = tiny_model(hidden=8)
    pretrained.train(plan(), verbose=False, root=tmp_path / "pre")
    cut_net = cut(pretrained.net)
    model = over(pretrained, cut_net)
    run = model.train(plan(1), verbose=False, root=tmp_path / "refine")
    rebuilt = NNModel.from_checkpoint(run.checkpoints_dir / "last.pt")
    assert rebuilt.net_params == model.net_params == cut_net.params
    assert torch.equal(rebuilt.predict(X).logits, model.predict(X).logits)


def test_widen_and_deepen_hand_over_the_trained_function(tmp_path: Path) -> None:
    pretrained = tiny_model(hidden=8)
    pretrained.train(plan(), verbose=False, root=tmp_path)
    for net in (widen(pretrained.net, layer_name="layers.0", new_width=20),
                deepen(pretrained.net, after_layer_name="layers.0")):
        model = over(pretrained, net)
        assert torch.allclose(model.predict(X).logits, pretrained.predict(X).logits,
                              atol=1e-5, rtol=0)


def test_a_low_rank_cut_reloads_as_a_recorded_recipe(tmp_path: Path) -> None:
    """low_rank_factorize leaves the params alone (the widths are the same); on a model,
    the same factors are core's nnx.low_rank recipe, which checkpoints record and
    from_checkpoint replays."""
    pretrained = tiny_model(hidden=8)
    pretrained.train(plan(), verbose=False, root=tmp_path / "pre")
    cut = low_rank_factorize(pretrained.net, layer_name="layers.0", rank=2)
    model = over(pretrained, pretrained.net)
    model.apply_transform(TransformRecipe("nnx.low_rank", 1,
                                          {"targets": ["layers.0"], "rank": 2}))
    assert all(torch.equal(v, cut.state_dict()[k]) for k, v in model.net.state_dict().items())
    run = model.train(plan(1), verbose=False, root=tmp_path / "refine")
    rebuilt = NNModel.from_checkpoint(run.checkpoints_dir / "last.pt")
    assert torch.equal(rebuilt.predict(X).logits, model.predict(X).logits)


def low_rank(layer: str, rank: int) -> TransformRecipe:
    return TransformRecipe("nnx.low_rank", 1, {"targets": [layer], "rank": rank})


def test_low_rank_factorize_on_a_model_trains_checkpoints_and_reloads(tmp_path: Path) -> None:
    """Given a trained model, low_rank_factorize returns a copy holding the factorized
    net with core's nnx.low_rank recipe recorded, so the copy trains (the recipe in its
    run) and NNModel.from_checkpoint rebuilds it with equal predictions; the input model
    is untouched."""
    pretrained = tiny_model(hidden=8)
    pretrained.train(plan(), verbose=False, root=tmp_path / "pre")
    before = snapshot(pretrained.net)
    once = low_rank_factorize(pretrained, layer_name="layers.0", rank=2)
    cut = low_rank_factorize(once, layer_name="layers.1", rank=2)
    assert type(cut) is type(pretrained) and cut is not once is not pretrained
    assert same(snapshot(pretrained.net), before) and pretrained.transforms == ()
    assert once.transforms == (low_rank("layers.0", 2),)
    assert cut.transforms == (low_rank("layers.0", 2), low_rank("layers.1", 2))
    net_cut = low_rank_factorize(low_rank_factorize(pretrained.net, layer_name="layers.0",
                                                    rank=2), layer_name="layers.1", rank=2)
    assert same(snapshot(cut.net), snapshot(net_cut))  # the same op, the same factors
    assert not any(p is q for p in cut.net.parameters() for q in once.net.parameters())
    run = cut.train(plan(1), verbose=False, root=tmp_path / "refine")
    assert [r["config"] for r in run.state()["transforms"]] == [
        {"targets": ["layers.0"], "rank": 2}, {"targets": ["layers.1"], "rank": 2}]
    rebuilt = NNModel.from_checkpoint(run.checkpoints_dir / "last.pt")
    assert rebuilt.transforms == cut.transforms
    assert torch.equal(rebuilt.predict(X).logits, cut.predict(X).logits)


def test_low_rank_factorize_on_a_model_at_max_rank_keeps_the_trained_function(
        tmp_path: Path) -> None:
    pretrained = tiny_model(hidden=8)
    pretrained.train(plan(), verbose=False, root=tmp_path)
    cut = low_rank_factorize(pretrained, layer_name="layers.0", rank=4)
    assert torch.allclose(cut.predict(X).logits, pretrained.predict(X).logits,
                          atol=1e-5, rtol=0)


def test_low_rank_factorize_refuses_a_model_before_copying_it() -> None:
    """The surgery's own refusals read the model's net; a model wrapping a runtime
    module is refused too (no factory could replay the recipe), and nothing changes."""
    model = tiny_model(hidden=8)
    wrapped = NNModel(module=nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)),
                      params=model.params)
    for target, call, error in [
        (model, dict(layer_name="layers.9", rank=2), SurgeryTargetError),
        (model, dict(layer_name="activations.0", rank=2), SurgeryTargetError),
        (model, dict(layer_name="layers.0", rank=5), SurgeryShapeError),
        (wrapped, dict(layer_name="0", rank=2), MissingModelFactoryError),
    ]:
        before = snapshot(target.net)
        with pytest.raises(error, match="low_rank_factorize"):
            low_rank_factorize(target, **call)  # type: ignore[arg-type]
        assert same(snapshot(target.net), before) and target.transforms == ()


@pytest.mark.parametrize("cut", [
    lambda net: widen(net, layer_name="layers.0", new_width=12),
    lambda net: low_rank_factorize(net, layer_name="layers.0", rank=2),
], ids=["widen", "low_rank"])
def test_a_cut_net_assigned_to_the_old_model_is_refused_before_a_run_exists(
        tmp_path: Path, cut: Callable[[nn.Module], nn.Module]) -> None:
    """The old model's params describe the old net; train refuses the mismatch rather
    than record a run id for a net it did not train (build a model over the new net)."""
    model = tiny_model(hidden=8)
    model.net = cut(model.net)
    with pytest.raises(LiveTopologyError, match="not the net its params build"):
        model.train(plan(), verbose=False, root=tmp_path)
    assert not any(tmp_path.iterdir())
