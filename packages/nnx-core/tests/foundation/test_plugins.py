"""Registries filled lazily from entry points, and install hints for missing add-ons."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

import nnx
from nnx._foundation import catalog
from nnx._foundation.plugins import (
    EntryPointRegistry,
    MissingDistributionAttributeError,
    MissingDistributionError,
    MissingSubpackageError,
    VersionedRegistry,
    registry,
    require_distribution,
    versioned_registry,
)
from nnx.cli import main as cli_main


def test_entry_points_load_lazily_and_are_cached():
    reg = EntryPointRegistry("console_scripts")
    assert "nnx" in reg.names()
    assert reg._loaded == {}  # listing loads nothing
    assert reg.get("nnx") is cli_main
    assert reg._loaded == {"nnx": cli_main}
    assert reg.get("no-such-script") is None


def test_explicit_registration_wins_over_entry_points():
    reg = EntryPointRegistry("console_scripts")
    reg.register("nnx", len)
    assert reg.get("nnx") is len
    with pytest.raises(ValueError, match="non-empty string"):
        reg.register("", len)


def test_versioned_registry_keys_and_versions():
    reg = VersionedRegistry("nnx.test_only_group")
    reg.register("acme.lion", 1, "v1")
    reg.register("acme.lion", 3, "v3")
    assert reg.get("acme.lion", 1) == "v1" and reg.get("acme.lion", 2) is None
    assert reg.versions("acme.lion") == [1, 3] and reg.versions("other") == []
    assert VersionedRegistry.key("acme.lion", 2) == "acme.lion@v2"
    for bad_id in ("", "a@b", " a"):
        with pytest.raises(ValueError, match="registered id"):
            reg.register(bad_id, 1, None)
    for bad_version in (0, True, 1.0, "1"):
        with pytest.raises(ValueError, match="registered version"):
            reg.register("x", bad_version, None)  # type: ignore[arg-type]


def test_require_names_the_missing_versions_and_refuses_a_wrong_entry():
    """One refusal for every versioned registry (optimizer / model factories, metrics,
    transforms): an unknown version, and an entry point naming the wrong object."""
    reg = VersionedRegistry("nnx.test_only_group")
    reg.register("acme.lion", 1, len)
    reg.register("acme.lion", 2, "not a factory")
    kwargs = {"what": "optimizer factory", "register": "register(...)", "error": LookupError}
    assert reg.require("acme.lion", 1, **kwargs) is len
    with pytest.raises(LookupError, match=r"acme\.lion@v3 is not registered.*v1, v2"):
        reg.require("acme.lion", 3, **kwargs)
    with pytest.raises(LookupError, match=r"resolved to str, not a callable; an "
                                          r"nnx\.test_only_group entry point must name"):
        reg.require("acme.lion", 2, **kwargs)
    assert reg.require("acme.lion", 2, accepts=lambda x: isinstance(x, str),
                       expected="a string", **kwargs) == "not a factory"


def test_process_registries_are_shared_per_group():
    assert registry("nnx.exports") is registry("nnx.exports")
    assert versioned_registry("nnx.metrics") is versioned_registry("nnx.metrics")
    for group in ("nnx.model_factories", "nnx.optimizer_factories", "nnx.metrics",
                  "nnx.transforms"):
        assert versioned_registry(group).get("absent.id", 1) is None


@pytest.fixture
def future_add_on(monkeypatch):
    """A catalogued distribution that is not installed: ``nnx-future``, exporting
    ``FutureThing`` and shipping ``nnx.future``. Every distribution the design names is
    built and the workspace installs them all (issue 41), so the install hint for a
    missing one is checked on a catalog entry added here, as gen_catalog would write it."""
    monkeypatch.setitem(catalog._INDEX, ("export", "FutureThing"), "nnx-future")
    monkeypatch.setitem(catalog.SUBPACKAGES, "nnx.future", "nnx-future")
    yield
    assert "FutureThing" not in vars(nnx)  # a miss is never cached


def test_add_on_names_without_their_distribution_raise_one_clear_error(future_add_on):
    with pytest.raises(MissingDistributionError,
                       match=r"nnx\.FutureThing .* pip install nnx-future"):
        from nnx import FutureThing  # noqa: F401
    with pytest.raises(MissingDistributionAttributeError, match="pip install nnx-future"):
        _ = nnx.FutureThing
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchThing'"):
        _ = nnx.NoSuchThing


HINT = ("nnx.FutureThing is provided by the nnx-future distribution, which is not "
        "installed; install it with: pip install nnx-future")


def test_an_absent_add_on_name_is_no_attribute_but_its_import_names_the_distribution(
        future_add_on):
    assert not hasattr(nnx, "FutureThing")
    assert getattr(nnx, "FutureThing", None) is None
    with pytest.raises(MissingDistributionAttributeError) as attr:
        _ = nnx.FutureThing
    assert str(attr.value) == HINT and attr.value.distribution == "nnx-future"
    assert isinstance(attr.value, AttributeError) and not isinstance(attr.value, ImportError)
    with pytest.raises(MissingDistributionError) as imported:
        from nnx import FutureThing  # noqa: F401
    assert str(imported.value) == HINT and imported.value.distribution == "nnx-future"
    assert not isinstance(imported.value, AttributeError)
    # In a function body and through exec: the statement, not the caller, decides.
    with pytest.raises(MissingDistributionError, match="pip install nnx-future"):
        exec("from nnx import FutureThing", {})


# nnx-graph provides the only catalogued add-on nets; the workspace installs it, so these
# run where it is absent (the nnx-core-alone à-la-carte check).
@pytest.mark.skipif(importlib.util.find_spec("nnx.graph") is not None,
                    reason="nnx-graph is installed: Nets.GRAPH_SAGE resolves (its own tests)")
def test_an_absent_net_member_is_no_attribute_but_item_access_names_the_distribution():
    from nnx import Nets

    assert not hasattr(Nets, "GRAPH_SAGE")
    assert getattr(Nets, "GRAPH_SAGE", None) is None
    with pytest.raises(MissingDistributionAttributeError,
                       match=r"^Nets\.GRAPH_SAGE is provided by the nnx-graph .* "
                             r"pip install nnx-graph$"):
        _ = Nets.GRAPH_SAGE
    with pytest.raises(MissingDistributionError, match=r"^Nets\.GRAPH_SAGE .* nnx-graph$"):
        _ = Nets["GRAPH_SAGE"]
    with pytest.raises(MissingDistributionError, match="pip install nnx-graph"):
        nnx.NNModelParams(net="graph_sage")  # a name in a configuration: the import form


def test_an_absent_catalogued_subpackage_import_names_the_distribution(future_add_on):
    for statement in ("import nnx.future", "from nnx.future import FutureThing",
                      "import importlib; importlib.import_module('nnx.future')"):
        with pytest.raises(ModuleNotFoundError) as raised:
            exec(statement, {})
        err = raised.value
        assert isinstance(err, MissingSubpackageError) and isinstance(err, MissingDistributionError)
        assert err.name == "nnx.future"
        assert str(err) == (f"{err.name} is provided by the {err.distribution} distribution, "
                            f"which is not installed; install it with: pip install "
                            f"{err.distribution}")
    assert "nnx.future" not in sys.modules
    # A name nnx does not know stays the plain miss.
    with pytest.raises(ModuleNotFoundError, match=r"^No module named 'nnx\.no_such_sub'$") as plain:
        import nnx.no_such_sub  # noqa: F401
    assert not isinstance(plain.value, MissingDistributionError)
    # A probe is no import: find_spec keeps answering None for the missing subpackage.
    assert importlib.util.find_spec("nnx.future") is None
    # The one way an add-on reaches another keeps its own message.
    with pytest.raises(MissingDistributionError, match=r"nnx\.future \(needed by x\)"):
        require_distribution("nnx-future", "nnx.future", needed_by="x")


def test_explicitly_registered_export_resolves():
    registry("nnx.exports").register("TestOnlyExport", 42)
    assert nnx.TestOnlyExport == 42


def test_import_nnx_loads_no_submodule():
    code = (
        "import sys, nnx; "
        "print(sorted(m for m in sys.modules if m.startswith('nnx') or m in "
        "('torch', 'tensorboard', 'wandb', 'pandas', 'onnx', 'onnxruntime', 'huggingface_hub')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['nnx']"


def test_core_exports_resolve_and_are_listed():
    for name in nnx.__all__:
        assert getattr(nnx, name) is not None, name
    assert "NNOptimParams" in dir(nnx)


def test_names_the_table_moved_to_their_defining_module_resolve_to_the_faces_objects():
    # Issue 37: these were listed under the public face; the table now names the module
    # that defines them, and ``nnx.X`` stays the very object the face re-exports.
    import importlib

    faces = {"nnx.components": ("ComponentRestoreError", "ComponentSpec"),
             "nnx.monitors": ("MonitorRecord", "MonitorUnavailableError"),
             "nnx.trainer": ("Trainer", "TrainerStepContext"),
             "nnx.optimizers": ("build_optimizer", "build_param_groups"),
             "nnx.finetune": ("freeze", "frozen", "load_pretrained", "unfreeze")}
    for face, names in faces.items():
        for name in names:
            obj = getattr(nnx, name)
            assert obj is getattr(importlib.import_module(face), name), name
            assert nnx._CORE_EXPORTS[name] == obj.__module__, name


def test_unregister_forgets_explicit_and_entry_point_names_until_registered_again():
    reg = EntryPointRegistry("console_scripts")
    reg.register("acme-tool", len)
    reg.unregister("acme-tool")
    assert reg.get("acme-tool") is None and "acme-tool" not in reg.names()
    reg.unregister("nnx")  # an entry point: hidden for this process
    assert reg.get("nnx") is None and "nnx" not in reg.names()
    with pytest.raises(KeyError, match="console_scripts: 'nnx' is not registered"):
        reg.unregister("nnx")
    reg.register("nnx", len)  # registering again wins, as ever
    assert reg.get("nnx") is len

    versioned = VersionedRegistry("nnx.test_only_group")
    versioned.register("acme.lion", 1, "v1")
    versioned.register("acme.lion", 3, "v3")
    versioned.register("acme.adam", 2, "a2")
    assert versioned.registered() == [("acme.adam", 2), ("acme.lion", 1), ("acme.lion", 3)]
    versioned.unregister("acme.lion", 1, what="optimizer factory")
    assert versioned.registered() == [("acme.adam", 2), ("acme.lion", 3)]
    with pytest.raises(KeyError, match=r"optimizer factory acme\.lion@v1 is not registered in "
                                       r"this process \(registered versions of 'acme\.lion': "
                                       r"v3\)"):
        versioned.unregister("acme.lion", 1, what="optimizer factory")
    with pytest.raises(ValueError, match="registered id"):
        versioned.unregister("a@b", 1, what="metric")


def _lion(groups, config):  # never called: only registered and forgotten
    raise AssertionError


@pytest.mark.parametrize("kind", ["metric", "model factory", "optimizer factory", "transform"])
def test_each_process_registry_lists_and_unregisters_what_register_added(kind):
    from nnx.metrics import MetricRegistration, MetricSpec, MissingMetricError, resolve_metric
    from nnx.models import ModelSpec, resolve_model_factory
    from nnx.optimizers import MissingOptimizerFactoryError, resolve_optimizer_factory
    from nnx.params.optim_factory import OptimizerFactorySpec
    from nnx.transforms import TransformRecipe, resolve_transform

    pairs = {  # register, registered_*, unregister_*, resolve, its refusal
        "metric": (lambda: nnx.register_metric("test.unreg", 2, dict, input="labels",
                                               mode="max"),
                   nnx.registered_metrics, nnx.unregister_metric,
                   lambda: resolve_metric(MetricSpec("test.unreg", 2)), MissingMetricError),
        "model factory": (lambda: nnx.register_model_factory("test.unreg", 2, dict),
                          nnx.registered_model_factories, nnx.unregister_model_factory,
                          lambda: resolve_model_factory(ModelSpec("test.unreg", 2)),
                          nnx.MissingModelFactoryError),
        "optimizer factory": (lambda: nnx.register_optimizer_factory("test.unreg", 2, _lion),
                              nnx.registered_optimizer_factories,
                              nnx.unregister_optimizer_factory,
                              lambda: resolve_optimizer_factory(
                                  OptimizerFactorySpec(id="test.unreg", version=2)),
                              MissingOptimizerFactoryError),
        "transform": (lambda: nnx.register_transform("test.unreg", 2, _lion),
                      nnx.registered_transforms, nnx.unregister_transform,
                      lambda: resolve_transform(TransformRecipe("test.unreg", 2, {})),
                      nnx.TransformCompatibilityError),
    }
    register, registered, unregister, resolve, refusal = pairs[kind]
    assert ("test.unreg", 2) not in registered()
    register()
    assert ("test.unreg", 2) in registered()
    assert registered() == sorted(registered())
    found = resolve()
    assert isinstance(found, MetricRegistration) if kind == "metric" else callable(found)
    unregister("test.unreg", 2)
    assert ("test.unreg", 2) not in registered()
    with pytest.raises(refusal, match=r"test\.unreg@v2 is not registered"):
        resolve()
    with pytest.raises(KeyError, match=rf"{kind} test\.unreg@v2 is not registered"):
        unregister("test.unreg", 2)


def test_builtins_are_listed_and_a_removed_builtin_metric_comes_back():
    from nnx.metrics import register_builtin_metrics

    assert {("accuracy", 1), ("f1", 1), ("nll", 1), ("brier", 1), ("mae", 1),
            ("mse", 1)} <= set(nnx.registered_metrics())
    assert ("nnx.low_rank", 1) in nnx.registered_transforms()
    try:
        nnx.unregister_metric("brier", 1)
        assert ("brier", 1) not in nnx.registered_metrics()
    finally:
        register_builtin_metrics()
    assert ("brier", 1) in nnx.registered_metrics()
