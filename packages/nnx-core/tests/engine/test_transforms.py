"""Topology-transform recipes (spec §3.2, §4, §4.2): nnx.transforms and nnx.low_rank v1."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from importlib import metadata

import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model
from torch import nn

import nnx
from nnx import (
    Devices,
    MissingModelFactoryError,
    ModelCheckpoint,
    ModelSpec,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNRun,
    NNTrainParams,
    TransformCompatibilityError,
    TransformRecipe,
    register_model_factory,
    register_transform,
    run_id,
)
from nnx._foundation.plugins import versioned_registry
from nnx.transforms import LowRankLinear, materialize_low_rank

RECIPE = TransformRecipe("nnx.low_rank", 1, {"targets": ["layers.0"], "rank": 2})


@pytest.fixture(autouse=True)
def registries(monkeypatch):
    """Nothing a test registers (ops, factories, entry points) leaks into another test."""
    for group in ("nnx.transforms", "nnx.model_factories"):
        names = versioned_registry(group)._names
        monkeypatch.setattr(names, "_explicit", dict(names._explicit))
        monkeypatch.setattr(names, "_loaded", dict(names._loaded))
        monkeypatch.setattr(names, "_points", names._points)


def plan(**changes) -> NNTrainParams:
    base = dict(n_epochs=2, train_loader=tiny_batches(), val_loader=tiny_batches(seed=1),
                optim=sgd(), seed=0)
    base.update(changes)
    return NNTrainParams(**base)


def low_rank_model(seed: int = 0, *recipes: TransformRecipe) -> NNModel:
    model = tiny_model(seed)
    for recipe in recipes or (RECIPE,):
        model.apply_transform(recipe)
    return model


def snapshot(net: nn.Module) -> tuple[str, dict[str, torch.Tensor], dict[str, bool]]:
    return (repr(net), {k: v.clone() for k, v in net.state_dict().items()},
            {k: p.requires_grad for k, p in net.named_parameters()})


def assert_unchanged(net: nn.Module, before) -> None:
    now = snapshot(net)
    assert now[0] == before[0] and now[2] == before[2]
    assert now[1].keys() == before[1].keys()
    assert all(torch.equal(now[1][k], before[1][k]) for k in now[1])


def noop(net, config, *, source=True) -> None:
    """A registered op that changes no topology: only its recipe tells two nets apart."""


X = torch.randn(5, 4, generator=torch.Generator().manual_seed(9))


# -- the recipe -------------------------------------------------------------------------------
def test_recipe_is_validated_frozen_and_round_trips_as_plain_data():
    recipe = TransformRecipe("nnx.low_rank", 1, {"targets": ["layers.0"], "rank": 2})
    assert recipe.label == "nnx.low_rank@v1"
    assert recipe.config["targets"] == ("layers.0",)  # read-only: lists become tuples
    with pytest.raises(TypeError):
        recipe.config["rank"] = 3  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.op = "other"  # type: ignore[misc]
    state = recipe.state()
    assert state == {"op": "nnx.low_rank", "version": 1,
                     "config": {"targets": ["layers.0"], "rank": 2}}
    assert type(state["config"]) is dict and type(state["config"]["targets"]) is list
    assert TransformRecipe.from_state(state) == recipe
    assert hash(TransformRecipe.from_state(state)) == hash(recipe)
    assert pickle.loads(pickle.dumps(recipe)) == recipe
    assert TransformRecipe.from_state({"op": "acme.x", "version": 2}).config == {}


@pytest.mark.parametrize(("args", "match"), [
    (("", 1, {}), "TransformRecipe.op must be a non-empty string"),
    (("a@b", 1, {}), "TransformRecipe.op"),
    ((" nnx.low_rank", 1, {}), "TransformRecipe.op"),
    ((materialize_low_rank, 1, {}), "register_transform"),
    (("nnx.low_rank", 0, {}), r"TransformRecipe\.version must be an integer >= 1"),
    (("nnx.low_rank", True, {}), r"TransformRecipe\.version"),
    (("nnx.low_rank", 1.0, {}), r"TransformRecipe\.version"),
    (("nnx.low_rank", 1, ["targets"]), r"TransformRecipe\.config must be a mapping"),
    (("nnx.low_rank", 1, {"fn": len}), "never holds code"),
    (("nnx.low_rank", 1, {"rank": float("nan")}), "non-finite"),
])
def test_recipe_refusals(args, match):
    with pytest.raises(ValueError, match=match):
        TransformRecipe(*args)


@pytest.mark.parametrize("state", [
    {"op": "nnx.low_rank"}, {"version": 1}, {"op": "nnx.low_rank", "version": 1, "extra": 0},
    ["nnx.low_rank", 1],
])
def test_recipe_state_refusals(state):
    with pytest.raises(ValueError, match="transform recipe state"):
        TransformRecipe.from_state(state)


def test_top_level_exports():
    from nnx import transforms

    assert nnx.TransformRecipe is transforms.TransformRecipe
    assert nnx.register_transform is transforms.register_transform
    assert issubclass(nnx.TransformCompatibilityError, ValueError)


# -- the registry -----------------------------------------------------------------------------
def test_registered_ops_resolve_and_unknown_ones_are_refused():
    model = tiny_model()
    before = snapshot(model.net)
    with pytest.raises(TransformCompatibilityError, match=r"acme\.noop@v1 is not registered"):
        model.apply_transform(TransformRecipe("acme.noop", 1))
    with pytest.raises(TypeError, match="callable"):
        register_transform("acme.noop", 1, "not code")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="TransformRecipe"):
        model.apply_transform(RECIPE.state())  # type: ignore[arg-type]
    assert_unchanged(model.net, before)
    assert model.transforms == ()
    calls = []
    register_transform("acme.noop", 1,
                       lambda net, config, *, source=True: calls.append((net, config, source)))
    model.apply_transform(TransformRecipe("acme.noop", 1, {"k": 1}))
    assert calls == [(model.net, {"k": 1}, True)]
    with pytest.raises(TransformCompatibilityError,
                       match=r"registered versions of 'acme\.noop': v1"):
        model.apply_transform(TransformRecipe("acme.noop", 2))


def test_an_entry_point_fills_the_registry():
    names = versioned_registry("nnx.transforms")._names
    point = metadata.EntryPoint(name="acme.svd@v1", group="nnx.transforms",
                                value="nnx.transforms.low_rank:materialize_low_rank")
    names._points = {"acme.svd@v1": [point]}
    model = tiny_model()
    model.apply_transform(TransformRecipe("acme.svd", 1, {"targets": ["layers.1"], "rank": 3}))
    assert isinstance(model.net.layers[1], LowRankLinear)


# -- nnx.low_rank v1 --------------------------------------------------------------------------
def test_full_rank_is_exact():
    model = tiny_model()  # 4 -> 8 -> 3
    weights = [model.net.layers[i].weight.detach().clone() for i in (0, 1)]
    before = model.predict(X).logits
    model.apply_transform(TransformRecipe("nnx.low_rank", 1, {"targets": ["layers.0"],
                                                              "rank": 4}))
    model.apply_transform(TransformRecipe("nnx.low_rank", 1, {"targets": ["layers.1"],
                                                              "rank": 3}))
    for i, weight in enumerate(weights):
        layer = model.net.layers[i]
        assert isinstance(layer, LowRankLinear) and layer.rank == min(weight.shape)
        torch.testing.assert_close(layer.up.weight @ layer.down.weight, weight,
                                   rtol=0, atol=1e-6)
    torch.testing.assert_close(model.predict(X).logits, before, rtol=0, atol=1e-5)


def test_a_lower_rank_is_the_truncated_svd():
    linear = nn.Linear(6, 5)
    net = nn.Sequential(linear)
    weight, bias = linear.weight.detach().clone(), linear.bias.detach().clone()
    materialize_low_rank(net, {"targets": ["0"], "rank": 2})
    u, s, vh = torch.linalg.svd(weight.double(), full_matrices=False)
    expected = (u[:, :2] * s[:2]) @ vh[:2]
    layer = net[0]
    assert (layer.in_features, layer.out_features, layer.rank) == (6, 5, 2)
    assert layer.down.bias is None and torch.equal(layer.up.bias, bias)
    torch.testing.assert_close(layer.up.weight.double() @ layer.down.weight.double(), expected,
                               rtol=0, atol=1e-6)
    x = torch.randn(3, 6)
    torch.testing.assert_close(net(x).double(), x.double() @ expected.T + bias.double(),
                               rtol=0, atol=1e-5)


def test_requires_grad_mode_dtype_and_rng_are_kept():
    net = nn.Sequential(nn.Linear(4, 6), nn.Linear(6, 3, bias=False)).double()
    net[0].weight.requires_grad_(False)  # bias stays trainable
    net.eval()
    rng = torch.get_rng_state()
    materialize_low_rank(net, {"targets": ["0", "1"], "rank": 3})
    assert torch.equal(torch.get_rng_state(), rng)  # no initialization ran
    first, second = net[0], net[1]
    assert [p.requires_grad for p in (first.down.weight, first.up.weight, first.up.bias)] == [
        False, False, True]
    assert second.up.bias is None and second.up.weight.requires_grad
    assert all(p.dtype is torch.float64 for p in net.parameters())
    assert not any(m.training for m in net.modules())
    train_net = nn.Sequential(nn.Linear(4, 6))
    materialize_low_rank(train_net, {"targets": ["0"], "rank": 1})
    assert all(m.training for m in train_net.modules())


def test_replay_builds_the_same_topology_without_an_svd(monkeypatch):
    source = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    replayed = copy.deepcopy(source)
    config = {"targets": ["0", "2"], "rank": 2}
    materialize_low_rank(source, config)

    def no_svd(*args, **kwargs):
        raise AssertionError("replay must not run an SVD")

    monkeypatch.setattr(torch.linalg, "svd", no_svd)
    rng = torch.get_rng_state()
    replayed[0].weight.requires_grad_(False)
    materialize_low_rank(replayed, config, source=False)
    assert torch.equal(torch.get_rng_state(), rng)
    assert {k: v.shape for k, v in replayed.state_dict().items()} == {
        k: v.shape for k, v in source.state_dict().items()}
    assert repr(replayed) == repr(source)
    assert not replayed[0].down.weight.requires_grad and replayed[2].up.weight.requires_grad
    replayed.load_state_dict(source.state_dict())
    x = torch.randn(2, 4)
    assert torch.equal(replayed(x), source(x))


@pytest.mark.parametrize(("config", "match"), [
    ({"targets": ["layers.9"], "rank": 2}, "no module 'layers.9'"),
    ({"targets": ["layers.0", "nope"], "rank": 2}, "no module 'nope'"),  # the first one fits
    ({"targets": ["activations.0"], "rank": 1}, "is a ReLU, not an nn.Linear"),
    ({"targets": ["layers"], "rank": 1}, "is a ModuleList"),
    ({"targets": ["layers.0"], "rank": 5}, r"rank 5 is out of range .* \[1, 4\]"),
    ({"targets": ["layers.0", "layers.1"], "rank": 4}, r"rank 4 .*'layers\.1'"),
    ({"targets": ["layers.0"], "rank": 0}, "rank must be an integer >= 1"),
    ({"targets": ["layers.0"], "rank": 1.5}, "rank must be an integer"),
    ({"targets": ["layers.0"]}, "exactly 'targets' and 'rank'"),
    ({"targets": ["layers.0"], "rank": 1, "alpha": 2}, "exactly 'targets' and 'rank'"),
    ({"targets": [], "rank": 1}, "non-empty list"),
    ({"targets": "layers.0", "rank": 1}, "non-empty list"),
    ({"targets": [""], "rank": 1}, "non-empty list"),
    ({"targets": ["layers.0", "layers.0"], "rank": 1}, "more than once"),
])
def test_refusals_leave_the_net_unchanged(config, match):
    model = tiny_model()
    before = snapshot(model.net)
    with pytest.raises(ValueError, match=match):
        model.apply_transform(TransformRecipe("nnx.low_rank", 1, config))
    assert_unchanged(model.net, before)
    assert model.transforms == ()


def test_shared_and_subclassed_linears_are_refused():
    shared = nn.Linear(3, 3)
    net = nn.Sequential(shared, nn.ReLU(), shared)
    before = snapshot(net)
    with pytest.raises(ValueError, match="shared under several names"):
        materialize_low_rank(net, {"targets": ["0"], "rank": 2})
    assert_unchanged(net, before)
    attention = nn.MultiheadAttention(4, 2)
    with pytest.raises(ValueError, match=r"NonDynamicallyQuantizableLinear, not an nn\.Linear"):
        materialize_low_rank(attention, {"targets": ["out_proj"], "rank": 2})


def test_a_runtime_module_refuses_recipes_before_anything_changes():
    module = nn.Sequential(nn.Linear(4, 3))
    model = NNModel(module=module, params=NNModelParams(device=Devices.CPU))
    before = snapshot(module)
    with pytest.raises(MissingModelFactoryError, match=r"runtime module .*reconstructible=False"):
        model.apply_transform(TransformRecipe("nnx.low_rank", 1, {"targets": ["0"], "rank": 1}))
    assert_unchanged(module, before)
    assert model.transforms == () and type(module[0]) is nn.Linear
    # A (hand-made) runtime checkpoint carrying a recipe is refused the same way.
    checkpoint = NNCheckpoint(tag="x", epoch=0, run_id="r", state_dict=module.state_dict(),
                              model=model.params.state(), train={},
                              transforms=(RECIPE.state(),))
    with pytest.raises(MissingModelFactoryError, match="from_checkpoint"):
        NNModel.from_checkpoint(checkpoint, module=nn.Sequential(nn.Linear(4, 3)))


def test_a_registered_model_replays_its_recipe_before_the_weight_check():
    register_model_factory("test.mlp", 1, lambda config: nn.Sequential(
        nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
    params = NNModelParams(net=ModelSpec("test.mlp", 1, seed=3), device=Devices.CPU)
    model = NNModel(params=params)
    recipe = TransformRecipe("nnx.low_rank", 1, {"targets": ["0"], "rank": 2})
    model.apply_transform(recipe)
    checkpoint = NNCheckpoint(tag="x", epoch=0, run_id="r", state_dict=model.net.state_dict(),
                              model=model.params.state(), train={},
                              transforms=(recipe.state(),))
    rebuilt = NNModel.from_checkpoint(checkpoint)
    assert rebuilt.transforms == (recipe,) and isinstance(rebuilt.net[0], LowRankLinear)
    assert torch.equal(rebuilt.predict(X).logits, model.predict(X).logits)


# -- training, checkpoints and reloading -------------------------------------------------------
def test_a_recipe_trains_enters_the_run_id_and_every_checkpoint(tmp_path):
    plain = tiny_model()
    plain_run = plain.train(plan(), verbose=False, root=tmp_path)
    # Without a recipe the id is the one it always was: no transforms key is hashed.
    assert plain_run.id == run_id(model=plain.params, net=plain.net_params, train=plan())
    assert "transforms" not in plain_run.state()

    model = low_rank_model()
    assert model.transforms == (RECIPE,)
    run = model.train(plan(), verbose=False, root=tmp_path,
                      callbacks=[ModelCheckpoint(prefix="snap")])
    assert run.id != plain_run.id
    assert run.id == run_id(model=model.params, net=model.net_params, train=plan(),
                            transforms=[RECIPE.state()])
    assert run.state()["transforms"] == [RECIPE.state()]
    assert list(NNRun.load(run.id, root=tmp_path).transforms) == [RECIPE.state()]
    assert [r.epoch for r in run.epoch_records()] == [0, 1]

    for tag in ("first", "last", "best", "snap_e1"):
        checkpoint = NNCheckpoint.load(run.id, tag, root=tmp_path)
        assert checkpoint.transforms == (RECIPE.state(),), tag
    for tag in ("first", "last", "best"):
        assert NNCheckpoint.load(plain_run.id, tag, root=tmp_path).transforms == ()

    last = NNModel.from_checkpoint(run.checkpoints_dir / "last.pt")
    assert last.transforms == (RECIPE,) and isinstance(last.net.layers[0], LowRankLinear)
    assert torch.equal(last.predict(X).logits, model.predict(X).logits)
    best = NNCheckpoint.load(run.id, "best", root=tmp_path)
    rebuilt = NNModel.from_checkpoint(best)
    twin = copy.deepcopy(model)
    twin.net.load_state_dict(best.state_dict)
    assert rebuilt.transforms == (RECIPE,)
    assert torch.equal(rebuilt.predict(X).logits, twin.predict(X).logits)


def test_an_unknown_or_unfitting_recipe_fails_before_anything_loads(tmp_path, monkeypatch):
    run = low_rank_model().train(plan(n_epochs=1), verbose=False, root=tmp_path)
    best = NNCheckpoint.load(run.id, "best", root=tmp_path)

    def no_build(*args, **kwargs):
        raise AssertionError("nothing may be built before the recipes resolve")

    with monkeypatch.context() as patched:
        patched.setattr("nnx._surface.model.build_net", no_build)
        unknown = dataclasses.replace(best, transforms=(
            *best.transforms, {"op": "acme.missing", "version": 1, "config": {}}))
        with pytest.raises(TransformCompatibilityError,
                           match=r"transforms\[1\] \(acme\.missing@v1\) cannot be replayed"):
            NNModel.from_checkpoint(unknown)
        malformed = dataclasses.replace(best, transforms=({"op": "nnx.low_rank",
                                                           "version": 0},))
        with pytest.raises(TransformCompatibilityError,
                           match=r"transforms\[0\] is not a transform recipe"):
            NNModel.from_checkpoint(malformed)
    unfitting = dataclasses.replace(best, transforms=(
        {"op": "nnx.low_rank", "version": 1, "config": {"targets": ["layers.7"], "rank": 2}},))
    with pytest.raises(TransformCompatibilityError,
                       match=r"transforms\[0\] \(nnx\.low_rank@v1\) does not fit"):
        NNModel.from_checkpoint(unfitting)


def test_safetensors_snapshots_preserve_the_recipes(tmp_path):
    recipes = (RECIPE, TransformRecipe("nnx.low_rank", 1, {"targets": ["layers.1"], "rank": 1}))
    model = low_rank_model(0, *recipes)
    run = model.train(plan(), verbose=False, root=tmp_path,
                      callbacks=[ModelCheckpoint(prefix="snap", format="safetensors")])
    path = run.checkpoints_dir / "snap_e1.safetensors"
    checkpoint = NNCheckpoint.from_file(path)
    assert checkpoint.transforms == tuple(r.state() for r in recipes)
    rebuilt = NNModel.from_checkpoint(path)
    assert rebuilt.transforms == recipes
    assert torch.equal(rebuilt.predict(X).logits, model.predict(X).logits)


def test_a_stateful_resume_needs_the_same_recipes(tmp_path):
    first = low_rank_model().train(plan(), verbose=False, root=tmp_path)
    with pytest.raises(ValueError, match="do not fit this net"):  # another topology
        tiny_model().train(plan(resume_from_run_id=first.id, resume_mode="stateful"),
                           verbose=False, root=tmp_path)
    register_transform("test.noop", 1, noop)
    marked = low_rank_model(0, RECIPE, TransformRecipe("test.noop", 1))
    tagged = marked.train(plan(), verbose=False, root=tmp_path)
    # Same weights layout, other recipes: the recipe check itself refuses it.
    with pytest.raises(ValueError, match="materialize the same recipes before resuming"):
        low_rank_model().train(plan(resume_from_run_id=tagged.id, resume_mode="stateful"),
                               verbose=False, root=tmp_path)

    resumed_model = low_rank_model(seed=5)  # SVD of other weights: the checkpoint's replace them
    resumed = resumed_model.train(plan(resume_from_run_id=first.id, resume_mode="stateful"),
                                  verbose=False, root=tmp_path)
    assert resumed.resume_status.mode == "stateful"
    assert [r.epoch for r in resumed.epoch_records()] == [2, 3]
    assert NNCheckpoint.load(resumed.id, "last", root=tmp_path).transforms == (RECIPE.state(),)
