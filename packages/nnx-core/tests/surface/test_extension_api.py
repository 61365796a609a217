"""The public extension API (issue 14): nnx.extend, the Component / Task protocols and
what NNModel wires of them, nnx.testing, install hints from every registry, dir(nnx)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib
import torch
from _nnx_core_tiny import tiny_batches, tiny_loader, tiny_train_params, weights

import nnx
import nnx._foundation.atomic as atomic
import nnx._foundation.config_base as params_base
import nnx._foundation.validation as validation
import nnx.extend as extend
from nnx import Devices, Losses, NNModel, NNModelParams, NNParams, NNRun
from nnx._foundation.plugins import registry
from nnx.components import Component, ComponentSpec, discover_components
from nnx.objectives import supervised_objective
from nnx.objectives.supervised import SupervisedObjective
from nnx.tasks import (
    CategoricalAdapter,
    MultilabelAdapter,
    RegressionAdapter,
    Task,
    TaskAdapter,
    TaskRuntime,
)
from nnx.tasks.adapters import task_adapter

ROOT = Path(__file__).resolve().parents[4]

# -- 1. nnx.extend ------------------------------------------------------------------------


def test_extend_reexports_the_one_validator_and_params_base_unchanged():
    for name in validation.__all__:
        assert getattr(extend, name) is getattr(validation, name), name
    for name in params_base.__all__:
        assert getattr(extend, name) is getattr(params_base, name), name
    assert extend.NetRegistration is nnx.NetRegistration
    assert extend.register_model_factory is nnx.register_model_factory
    assert extend.register_metric is nnx.register_metric
    assert extend.register_transform is nnx.register_transform
    assert extend.register_optimizer_factory is nnx.register_optimizer_factory
    assert extend.MissingDistributionError is nnx.MissingDistributionError
    assert extend.Component is Component and extend.Task is Task
    assert extend.atomic_write_text is atomic.atomic_write_text
    assert extend.atomic_write_bytes is atomic.atomic_write_bytes
    assert sorted(extend.__all__) == sorted(n for n in dir(extend) if not n.startswith("_")
                                            and n != "annotations")


def test_extend_offers_core_rng_snapshot_pair_for_non_destructive_add_ons():
    # nnx-viz's lr_finder restores the caller's global streams with core's own pair
    # (issue 41), not a second snapshot format.
    import random

    import numpy as np
    import torch

    import nnx._foundation.seeding as seeding

    assert extend.capture_rng_state is seeding.capture_rng_state
    assert extend.restore_rng_state is seeding.restore_rng_state
    saved = extend.capture_rng_state()
    drawn = (random.random(), float(np.random.rand()), float(torch.rand(())))
    extend.restore_rng_state(saved)
    assert drawn == (random.random(), float(np.random.rand()), float(torch.rand(())))


def test_every_extend_name_is_documented_in_extending_md():
    page = (ROOT / "docs" / "extending.md").read_text()
    missing = [n for n in extend.__all__ if f"`{n}`" not in page]
    assert missing == []


# -- 2. the Component protocol ------------------------------------------------------------


class RunningMean:
    def __init__(self) -> None:
        self.mean, self.calls = 0.0, 0

    def component_spec(self) -> ComponentSpec:
        return ComponentSpec("test.running_mean")

    def component_state(self) -> dict[str, float]:
        self.calls += 1
        return {"mean": self.mean}

    def load_component_state(self, state: dict[str, float], *, version: int) -> None:
        self.mean = state["mean"]


def test_component_protocol_is_runtime_checkable():
    assert isinstance(RunningMean(), Component)
    assert not isinstance(object(), Component)
    half = RunningMean()
    half.load_component_state = None  # type: ignore[assignment]
    assert not nnx.components.is_component(half)
    assert discover_components([], [RunningMean()]).keys() == {"test.running_mean"}
    with pytest.raises(TypeError, match=r"components\[0\] \(object\) does not implement"):
        discover_components([], [object()])


# -- 2. the Task protocol: the built-ins' answers -----------------------------------------


@pytest.mark.parametrize("loss", [torch.nn.CrossEntropyLoss(), torch.nn.BCEWithLogitsLoss(),
                                  torch.nn.MSELoss()])
def test_builtin_adapters_satisfy_the_task_protocol(loss):
    adapter = task_adapter(None, loss)
    assert isinstance(adapter, Task)
    assert adapter.objective() is None and adapter.eval_step() is None
    assert adapter.metric_specs() == ()
    assert adapter.sample_ids(torch.zeros(2, 4), 2) is None
    assert adapter.refuse_default("train") is None
    for cls in (CategoricalAdapter, MultilabelAdapter, RegressionAdapter):
        assert issubclass(cls, Task)


# -- 2. what NNModel wires ----------------------------------------------------------------


class HookedTask:
    """An add-on-style task: a plain Task protocol object that inherits nothing from core.
    NNModel(task=...) builds the categorical machinery of the model's loss around it."""

    def __init__(self, *, objective=None, eval_step=None, refuse=(), ids=None):
        self._objective, self._eval_step = objective, eval_step
        self.refuse, self.ids, self.asked = set(refuse), ids, []

    def objective(self):
        return self._objective

    def eval_step(self):
        return self._eval_step

    def metric_specs(self):
        return ()

    def refuse_default(self, path):
        self.asked.append(path)
        if path in self.refuse:
            raise ValueError(f"HookedTask batches need their own {path} path")

    def sample_ids(self, data, rows):
        return self.ids


class ComponentTask(HookedTask, RunningMean):
    def __init__(self):
        HookedTask.__init__(self)
        RunningMean.__init__(self)


def task_model(**hooks) -> NNModel:
    """A plain NNModel handed its task object: no NNModel subclass, no adapter base."""
    torch.manual_seed(0)
    task = hooks.pop("cls", HookedTask)(**hooks)
    return NNModel(NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)),
                   NNModelParams(device=Devices.CPU, loss=Losses.CROSS_ENTROPY), task=task)


def test_a_task_is_a_plain_protocol_object_handed_to_a_plain_nnmodel():
    model = task_model()
    assert type(model) is NNModel and HookedTask.__mro__ == (HookedTask, object)
    assert isinstance(model.task, Task) and isinstance(model.task, HookedTask)
    runtime = model.task_runtime  # the object beside core's per-batch machinery
    assert isinstance(runtime, TaskRuntime) and runtime.task is model.task
    assert isinstance(runtime.batch_ops, CategoricalAdapter)  # the loss's own default
    assert not isinstance(runtime, TaskAdapter)  # composed, not a forwarding subclass


def test_train_runs_the_task_objective_when_no_update_owner_is_given(tmp_path):
    calls = []

    class Counting(SupervisedObjective):
        def __call__(self, ctx):
            calls.append(ctx)
            return SupervisedObjective.__call__(self, ctx)

    model = task_model(objective=Counting())
    model.train(tiny_train_params(tiny_batches(3)), root=tmp_path / "runs", verbose=False)
    assert len(calls) == 3
    assert "train" not in model.task.asked  # its own objective: the default step never ran


def test_an_explicit_step_wins_over_the_task_objective(tmp_path):
    calls = []
    model = task_model(objective=lambda ctx: calls.append(ctx))
    model.train(tiny_train_params(), root=tmp_path / "runs", verbose=False,
                objective=supervised_objective())
    assert calls == []


def test_train_validates_with_the_task_eval_step(tmp_path):
    seen = []

    def eval_step(ctx):
        seen.append(ctx.epoch_idx)
        return ctx.model.evaluate(ctx.val_loader)

    model = task_model(eval_step=eval_step)
    model.train(tiny_train_params(val_loader=tiny_loader(), n_epochs=2),
                root=tmp_path / "runs", verbose=False)
    assert len(seen) == 2


@pytest.mark.parametrize("path", ["train", "evaluate"])
def test_a_task_refusing_a_default_training_path_stops_train_before_anything(tmp_path, path):
    model = task_model(refuse=[path])
    before = weights(model)
    with pytest.raises(ValueError, match=f"need their own {path} path"):
        model.train(tiny_train_params(val_loader=tiny_loader()), root=tmp_path / "runs",
                    verbose=False)
    assert not (tmp_path / "runs").exists()
    assert all(torch.equal(before[k], v) for k, v in weights(model).items())


def test_a_task_refusing_evaluate_and_predict_stops_them_before_a_forward():
    model = task_model(refuse=["evaluate", "predict"])
    calls = []
    model.net.register_forward_hook(lambda *a: calls.append(1))
    with pytest.raises(ValueError, match="own evaluate path"):
        model.evaluate(tiny_loader())
    with pytest.raises(ValueError, match="own predict path"):
        model.predict(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="own predict path"):
        model.predict_proba(torch.zeros(2, 4), nnx.ProbabilitySpec(kind="categorical"))
    assert calls == []


def test_predict_proba_takes_sample_ids_from_the_task():
    model = task_model(ids=np.array([7, 3]))
    result = model.predict_proba(torch.zeros(2, 4), nnx.ProbabilitySpec(kind="categorical"))
    assert result.sample_ids.tolist() == [7, 3]
    plain = task_model().predict_proba(torch.zeros(2, 4), nnx.ProbabilitySpec(kind="categorical"))
    assert plain.sample_ids.tolist() == [0, 1]


def test_a_task_that_is_a_component_is_checkpointed_with_the_run(tmp_path):
    model = task_model(cls=ComponentTask)
    assert isinstance(model.task, Component)
    model.train(tiny_train_params(), root=tmp_path / "runs", verbose=False)
    assert model.task.calls > 0  # its state went into the training-state sidecar


class ConfiguredTask(HookedTask):
    """A task whose configuration changes what trains: it names it through identity()."""

    def __init__(self, *, smoothing=0.0):
        super().__init__()
        self.smoothing = smoothing

    def identity(self):
        return {"kind": "test.configured", "smoothing": self.smoothing}


def test_a_task_s_identity_enters_the_run_id_and_run_yaml(tmp_path):
    root = tmp_path / "runs"
    plain = task_model().train(tiny_train_params(), root=root, verbose=False)
    plain_ids = task_model(cls=HookedTask).train(tiny_train_params(), root=tmp_path / "b",
                                                 verbose=False)
    assert plain.id == plain_ids.id
    torch.manual_seed(0)
    bare = NNModel(NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)),
                   NNModelParams(device=Devices.CPU, loss=Losses.CROSS_ENTROPY))
    bare_run = bare.train(tiny_train_params(), root=tmp_path / "c", verbose=False)
    assert plain.id == bare_run.id  # no identity() hook: the id is the bare model's
    assert "task" not in plain.state()
    runs = [task_model(cls=ConfiguredTask, smoothing=s).train(tiny_train_params(), root=root,
                                                               verbose=False)
            for s in (0.0, 0.1)]
    assert len({plain.id, runs[0].id, runs[1].id}) == 3  # each configuration its own run
    assert runs[1].state()["task"] == {"kind": "test.configured", "smoothing": 0.1}
    loaded = NNRun.load(runs[1].id, root=root)  # run.yaml keeps the block; it still hashes
    assert loaded.id == runs[1].id and loaded.task == runs[1].state()["task"]


def test_a_task_identity_that_is_not_a_mapping_is_refused_before_anything(tmp_path):
    class Broken(HookedTask):
        def identity(self):
            return ["not", "a", "mapping"]

    model = task_model(cls=Broken)
    with pytest.raises(TypeError, match=r"Broken.identity\(\) must return a mapping or None"):
        model.train(tiny_train_params(), root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists()


# -- 5. install hints from every registry -------------------------------------------------


def _declared_entry_points() -> dict[str, dict[str, list[str]]]:
    """Distribution → entry-point group → names, from every pyproject an nnx dist has."""
    out: dict[str, dict[str, list[str]]] = {}
    for path in [*ROOT.glob("packages/*/pyproject.toml"),
                 ROOT / "tests-integration" / "example-plugin" / "pyproject.toml"]:
        project = tomllib.loads(path.read_text())["project"]
        groups = project.get("entry-points", {})
        out[project["name"]] = {g: list(v) for g, v in groups.items() if g.startswith("nnx.")}
    return out


def test_the_catalog_agrees_with_every_declared_entry_point():
    from nnx._foundation.catalog import GROUP_KINDS, catalog

    table = catalog()
    declared = _declared_entry_points()
    assert "nnx-example-plugin" in declared and "nnx-core" in declared
    for dist, groups in declared.items():
        if dist == "nnx-core":  # core is always installed: nothing to hint
            continue
        for group, names in groups.items():
            assert group in GROUP_KINDS, f"{dist} declares unknown group {group}"
            listed = table[GROUP_KINDS[group]].get(dist, ())
            assert sorted(set(names) - set(listed)) == [], (dist, group)
    for kind, dists in table.items():
        for dist, names in dists.items():
            assert re.fullmatch(r"nnx-[a-z-]+", dist)
            if kind not in ("export", "net"):
                assert all(re.fullmatch(r"[^@\s]+@v[1-9][0-9]*", n) for n in names), names


def test_a_missing_add_on_optimizer_factory_names_its_distribution():
    from nnx._engine.optimizer_factories import (
        MissingOptimizerFactoryError,
        resolve_optimizer_factory,
    )
    from nnx.params.optim_factory import OptimizerFactorySpec

    with pytest.raises(MissingOptimizerFactoryError,
                       match=r"example\.sgd@v1 is provided by the nnx-example-plugin "
                             r"distribution.*pip install nnx-example-plugin"):
        resolve_optimizer_factory(OptimizerFactorySpec("example.sgd", 1))
    with pytest.raises(MissingOptimizerFactoryError, match="is not registered") as info:
        resolve_optimizer_factory(OptimizerFactorySpec("example.sgd", 2))
    assert "pip install" not in str(info.value)


@pytest.mark.parametrize("kind", ["model_factory", "metric", "transform"])
def test_every_versioned_registry_miss_gives_the_install_hint(monkeypatch, kind):
    import nnx._foundation.catalog as catalog
    from nnx.metrics import MetricSpec
    from nnx.metrics.registry import MissingMetricError, resolve_metric
    from nnx.models import MissingModelFactoryError, ModelSpec, resolve_model_factory
    from nnx.transforms import TransformCompatibilityError, TransformRecipe, resolve_transform

    # A planned add-on row (data in the table; the miss path under test is the real one).
    monkeypatch.setitem(catalog._INDEX, (kind, "acme.thing@v1"), "nnx-acme")
    call, error = {
        "model_factory": (lambda: resolve_model_factory(ModelSpec("acme.thing", 1, {}, seed=0)),
                          MissingModelFactoryError),
        "metric": (lambda: resolve_metric(MetricSpec("acme.thing", 1)), MissingMetricError),
        "transform": (lambda: resolve_transform(TransformRecipe("acme.thing", 1, {})),
                      TransformCompatibilityError),
    }[kind]
    with pytest.raises(error, match="pip install nnx-acme"):
        call()


# -- 6. dir(nnx) lists installed add-on names ---------------------------------------------


def test_dir_nnx_lists_installed_add_on_exports_without_importing_them(tmp_path, monkeypatch):
    info = tmp_path / "nnx_fake_addon-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nnx-fake-addon\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[nnx.exports]\nFakeAddonThing = nnx_fake_addon_module:FakeAddonThing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    exports = registry("nnx.exports")
    exports.refresh()
    try:
        assert "FakeAddonThing" in dir(nnx)
        assert "nnx_fake_addon_module" not in sys.modules  # listed, never imported
        assert "NNModel" in dir(nnx)
    finally:
        monkeypatch.undo()
        exports.refresh()
    assert "FakeAddonThing" not in dir(nnx)
