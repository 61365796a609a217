"""A callback that declares ``checkpoint_transforms`` may convert the net at train end; the
final LAST records the recipe it appended (spec §16, §22, §28)."""

from __future__ import annotations

import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model

from nnx import (
    Callback,
    NNCheckpoint,
    NNModel,
    NNTrainParams,
    TransformCompatibilityError,
    TransformRecipe,
)

RECIPE = TransformRecipe("nnx.low_rank", 1, {"targets": ["layers.0"], "rank": 2})


def plan() -> NNTrainParams:
    return NNTrainParams(n_epochs=2, train_loader=tiny_batches(),
                         val_loader=tiny_batches(seed=1), optim=sgd(), seed=0)


class ConvertAtEnd(Callback):
    checkpoint_transforms = ("nnx.low_rank",)

    def on_train_end(self, ctx):
        if ctx.error is None:
            ctx.model.apply_transform(RECIPE)


class Undeclared(ConvertAtEnd):
    checkpoint_transforms = None


def test_the_final_last_records_a_declared_train_end_recipe(tmp_path):
    plain = tiny_model().train(plan(), verbose=False, root=tmp_path / "a")
    model = tiny_model()
    run = model.train(plan(), callbacks=[ConvertAtEnd()], verbose=False, root=tmp_path / "b")
    assert run.id == plain.id  # the conversion happens after the run's identity is fixed
    last = NNCheckpoint.load(run.id, "last", root=tmp_path / "b")
    assert [dict(t) for t in last.transforms] == [RECIPE.state()]
    restored = NNModel.from_checkpoint(run.checkpoints_dir / "last.pt")
    assert restored.transforms == (RECIPE,)
    x = torch.randn(5, 4)
    assert torch.equal(restored.predict(x).logits, model.predict(x).logits)


def test_an_undeclared_train_end_recipe_is_refused(tmp_path):
    model = tiny_model()
    with pytest.raises(TransformCompatibilityError, match="checkpoint_transforms"):
        model.train(plan(), callbacks=[Undeclared()], verbose=False, root=tmp_path)
    run_dir = next((tmp_path).rglob("last.pt")).parent
    assert NNCheckpoint.from_file(run_dir / "last.pt").transforms == ()


def _noop(net, config, *, source=True):
    """An op that changes no tensor: only the recorded recipe tells the final LAST apart."""


class RecordsOnly(Callback):
    checkpoint_transforms = ("test.record_only",)

    def on_train_end(self, ctx):
        if ctx.error is None:
            ctx.model.apply_transform(TransformRecipe("test.record_only", 1, {}))


def test_a_recipe_that_changes_no_tensor_still_rewrites_the_final_last(tmp_path):
    from nnx import register_transform, unregister_transform

    register_transform("test.record_only", 1, _noop)
    try:
        run = tiny_model().train(plan(), callbacks=[RecordsOnly()], verbose=False,
                                 root=tmp_path)
        last = NNCheckpoint.load(run.id, "last", root=tmp_path)
        assert [t["op"] for t in last.transforms] == ["test.record_only"]
    finally:
        unregister_transform("test.record_only", 1)
