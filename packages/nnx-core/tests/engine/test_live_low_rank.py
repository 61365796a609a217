"""Core's ``nnx.low_rank`` recognises its own LowRankLinears in a net changed in place
(spec §4.2, §16; issue 40): ``materialize_low_rank(model.net, ...)`` then ``train``
records the recipe ``model.apply_transform`` would have recorded."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model
from torch import nn

from nnx import NNCheckpoint, NNModel, NNTrainParams, TransformCompatibilityError, TransformRecipe
from nnx.transforms import LiveTopologyError, LowRankLinear, materialize_low_rank

X = torch.randn(5, 4, generator=torch.Generator().manual_seed(2))


def plan() -> NNTrainParams:
    return NNTrainParams(n_epochs=2, train_loader=tiny_batches(), optim=sgd(0.5), seed=0)


def low_rank(rank: int, *targets: str) -> TransformRecipe:
    return TransformRecipe("nnx.low_rank", 1, {"targets": list(targets), "rank": rank})


def test_a_cut_made_in_place_records_the_recipe_apply_transform_records(
        tmp_path: Path) -> None:
    recorded = tiny_model()  # 4 -> 8 -> 3
    recorded.apply_transform(low_rank(2, "layers.0"))
    live = tiny_model()
    materialize_low_rank(live.net, {"targets": ["layers.0"], "rank": 2})
    assert live.transforms == ()
    by_recipe = recorded.train(plan(), verbose=False, root=tmp_path / "a")
    by_hand = live.train(plan(), verbose=False, root=tmp_path / "b")
    assert live.transforms == recorded.transforms == (low_rank(2, "layers.0"),)
    assert by_hand.id == by_recipe.id
    assert by_hand.state()["transforms"] == [low_rank(2, "layers.0").state()]
    rebuilt = NNModel.from_checkpoint(by_hand.checkpoints_dir / "last.pt")
    assert rebuilt.transforms == live.transforms
    assert torch.equal(rebuilt.predict(X).logits, live.predict(X).logits)


def test_cuts_of_different_ranks_give_one_recipe_each_after_the_recorded_ones(
        tmp_path: Path) -> None:
    model = tiny_model()
    model.apply_transform(low_rank(1, "layers.0"))
    materialize_low_rank(model.net, {"targets": ["layers.1"], "rank": 3})
    model.train(plan(), verbose=False, root=tmp_path)
    assert model.transforms == (low_rank(1, "layers.0"), low_rank(3, "layers.1"))
    two = tiny_model()
    materialize_low_rank(two.net, {"targets": ["layers.1"], "rank": 3})
    materialize_low_rank(two.net, {"targets": ["layers.0"], "rank": 1})
    two.train(plan(), verbose=False, root=tmp_path / "two")
    assert two.transforms == (low_rank(1, "layers.0"), low_rank(3, "layers.1"))


@pytest.mark.parametrize("how", ["other shape", "no bias", "shared"])
def test_what_a_recipe_cannot_rebuild_is_still_refused(tmp_path: Path, how: str) -> None:
    model = tiny_model()
    if how == "other shape":  # a 4 -> 8 Linear replaced by a 4 -> 5 factorization
        model.net.layers[0] = LowRankLinear(4, 5, 2)
        match = r"module layers\.0: .*Linear -> .*LowRankLinear"
    elif how == "no bias":  # the replay keeps the base's bias
        model.net.layers[0] = LowRankLinear(4, 8, 2, bias=False)
        match = r"layers\.0\.up\.bias"
    else:
        model.net.layers[1] = shared = LowRankLinear(8, 3, 2)
        model.net.add_module("alias", shared)
        match = r"nnx\.low_rank@v1: the LowRankLinear at 'layers\.1' is shared"
    with pytest.raises(LiveTopologyError, match=match):
        model.train(plan(), verbose=False, root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists() and model.transforms == ()


def test_an_old_checkpoint_without_the_recipe_names_it(tmp_path: Path) -> None:
    model = tiny_model()
    materialize_low_rank(model.net, {"targets": ["layers.0"], "rank": 2})
    run = model.train(plan(), verbose=False, root=tmp_path)
    saved = NNCheckpoint.from_file(run.checkpoints_dir / "last.pt")
    old = dataclasses.replace(saved, transforms=()).save(tmp_path / "old" / "last.pt")
    with pytest.raises(TransformCompatibilityError, match=(
            r"low-rank factors, rebuilt by TransformRecipe\('nnx\.low_rank', 1, "
            r"\{'targets': \['layers\.0'\], 'rank': 2\}\)")):
        NNModel.from_checkpoint(old)


def test_a_plain_linear_swapped_in_is_not_a_cut() -> None:
    """Only a LowRankLinear over a same-shaped Linear is the op's: nothing else is claimed."""
    from nnx.transforms.low_rank import recognize_low_rank

    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    reference = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    assert recognize_low_rank(net, reference) == []
    net[1] = LowRankLinear(4, 8, 2)  # where the reference holds a ReLU
    assert recognize_low_rank(net, reference) == []
