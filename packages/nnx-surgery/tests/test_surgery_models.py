"""The "load checkpoint → surgery → refine" loop (spec §16): a FeedFwdNN after surgery
trains, checkpoints and reloads through NNModel.from_checkpoint as an ordinary model,
because the surgery kept its params aligned with its layers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import torch
from _surgery_nets import same, snapshot
from torch import nn

from nnx import (
    Devices,
    MissingModelFactoryError,
    ModelSpec,
    NNModel,
    NNModelParams,
    NNTrainParams,
    TransformRecipe,
    register_model_factory,
    unregister_model_factory,
)
from nnx.surgery import (
    SurgeryShapeError,
    SurgeryTargetError,
    deepen,
    drop_layer,
    expand_embedding,
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
    first = tiny_model(hidden=8).train(plan(), verbose=False, root=tmp_path / "pre")
    pretrained = NNModel.from_checkpoint(first.checkpoints_dir / "last.pt")
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
    first = tiny_model(hidden=8).train(plan(), verbose=False, root=tmp_path / "pre")
    pretrained = NNModel.from_checkpoint(first.checkpoints_dir / "last.pt")
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


def test_a_cut_net_assigned_to_the_old_model_is_refused_before_a_run_exists(
        tmp_path: Path) -> None:
    """The old model's params describe the old net; train refuses the mismatch rather
    than record a run id for a net it did not train (build a model over the new net)."""
    model = tiny_model(hidden=8)
    model.net = widen(model.net, layer_name="layers.0", new_width=12)
    with pytest.raises(LiveTopologyError, match="not the net its params build"):
        model.train(plan(), verbose=False, root=tmp_path)
    assert not any(tmp_path.iterdir())


def test_a_low_rank_cut_assigned_to_the_model_is_recorded_as_the_recipe(
        tmp_path: Path) -> None:
    """model.net = low_rank_factorize(model.net, ...) is core's nnx.low_rank recipe made
    in place: train records it (the run id is the one low_rank_factorize(model, ...)
    gives for the same cut) and from_checkpoint rebuilds the trained net."""
    first = tiny_model(hidden=8).train(plan(), verbose=False, root=tmp_path / "pre")
    by_hand = NNModel.from_checkpoint(first.checkpoints_dir / "last.pt")
    by_model = low_rank_factorize(by_hand, layer_name="layers.0", rank=2)
    by_hand.net = low_rank_factorize(by_hand.net, layer_name="layers.0", rank=2)
    assert same(snapshot(by_hand.net), snapshot(by_model.net)) and by_hand.transforms == ()
    run = by_hand.train(plan(1), verbose=False, root=tmp_path / "hand")
    reference = by_model.train(plan(1), verbose=False, root=tmp_path / "model")
    assert by_hand.transforms == by_model.transforms == (low_rank("layers.0", 2),)
    assert run.id == reference.id
    assert torch.equal(by_hand.predict(X).logits, by_model.predict(X).logits)
    rebuilt = NNModel.from_checkpoint(run.checkpoints_dir / "last.pt")
    assert rebuilt.transforms == by_hand.transforms
    assert torch.equal(rebuilt.predict(X).logits, by_hand.predict(X).logits)


@pytest.mark.parametrize("how", ["widen", "low_rank"])
def test_frozen_content_stays_frozen_through_surgery_and_refining(tmp_path: Path,
                                                                   how: str) -> None:
    """Replacements keep requires_grad, so a frozen layer stays frozen through the refine
    run too, when the model holds the cut net itself: a model built from the new params
    accepts it (the params build exactly its tree), and a low-rank model copy keeps it."""
    pretrained = tiny_model(hidden=8)
    pretrained.net.layers[0].requires_grad_(False)
    if how == "widen":
        cut = widen(pretrained.net, layer_name="layers.0", new_width=12)
        model = NNModel(net_params=cut.params, params=pretrained.params)  # type: ignore[arg-type]
        model.net = cut
    else:
        model = low_rank_factorize(pretrained, layer_name="layers.0", rank=2)
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    model.train(plan(1), verbose=False, root=tmp_path)
    after = model.net.state_dict()
    assert all(torch.equal(v, after[k]) for k, v in before.items() if k.startswith("layers.0"))
    assert not torch.equal(before["layers.1.weight"], after["layers.1.weight"])  # the rest trains


def tagger(config: Mapping[str, Any]) -> nn.Module:
    return nn.Sequential(nn.Embedding(config["vocab"], 4), nn.Linear(4, 3))


def test_an_expanded_embedding_trains_and_reloads_through_its_model_factory(
        tmp_path: Path) -> None:
    """expand_embedding composes with train the way the FeedFwdNN cuts do: a model built
    from the spec with the new vocabulary holds the grown net, old tokens predict as
    before, new ones train, and from_checkpoint rebuilds it."""
    register_model_factory("surgery_tests.tagger", 1, tagger)
    try:
        def spec(vocab: int) -> NNModelParams:
            return NNModelParams(net=ModelSpec("surgery_tests.tagger", 1, {"vocab": vocab},
                                               seed=0), device=Devices.CPU)

        ids = torch.randint(0, 5, (8,), generator=torch.Generator().manual_seed(1))
        labels = torch.randint(0, 3, (8,), generator=torch.Generator().manual_seed(2))
        first = NNModel(params=spec(5)).train(NNTrainParams(
            n_epochs=2, train_loader=[(ids, labels)], optim=sgd(0.2), seed=0),
            verbose=False, root=tmp_path / "pre")
        trained = NNModel.from_checkpoint(first.checkpoints_dir / "last.pt")
        model = NNModel(params=spec(8))
        model.net = expand_embedding(trained.net, layer_name="0", new_num_embeddings=8)
        assert torch.equal(model.predict(ids).logits, trained.predict(ids).logits)
        new_ids = torch.tensor([5, 6, 7, 0])
        run = model.train(NNTrainParams(n_epochs=2, train_loader=[(new_ids, labels[:4])],
                                        optim=sgd(0.2), seed=1),
                          verbose=False, root=tmp_path / "refine")
        rebuilt = NNModel.from_checkpoint(run.checkpoints_dir / "last.pt")
        assert torch.equal(rebuilt.predict(new_ids).logits, model.predict(new_ids).logits)
    finally:
        unregister_model_factory("surgery_tests.tagger", 1)

