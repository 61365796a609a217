"""inspect_bundle, inspect_bundle_result and validate_bundle read the manifest and the
JSON records only (spec §22, §27): with every plugin-registry lookup, entry-point load
and Nets name resolution made to raise, they still answer, even for a bundle whose
model names an add-on's net (``TRANSFORMER`` would import nnx-lm). BundleInfo's
model_params / net_params resolve on access, outside inspection."""

from __future__ import annotations

from importlib import metadata

import pytest
from _support.bundles import rewrite_state, state, train

from nnx._foundation import plugins
from nnx.bundles import export_bundle, inspect_bundle, inspect_bundle_result, validate_bundle
from nnx.enums import nets
from nnx.result import Ok


class RegistryTouched(AssertionError):
    pass


def _refuse(*args, **kwargs):
    raise RegistryTouched("a bundle inspection consulted a registry")


def _no_registries(monkeypatch):
    for name in ("get", "names", "_entry_points"):
        monkeypatch.setattr(plugins.EntryPointRegistry, name, _refuse)
    for name in ("get", "require", "registered"):
        monkeypatch.setattr(plugins.VersionedRegistry, name, _refuse)
    monkeypatch.setattr(metadata, "entry_points", _refuse)
    monkeypatch.setattr(metadata.EntryPoint, "load", _refuse)
    monkeypatch.setattr(nets._NetsMeta, "_resolve", _refuse)


@pytest.mark.parametrize("net", ["FEED_FWD", "TRANSFORMER"])
def test_inspection_and_validation_consult_no_registry(tmp_path, monkeypatch, net):
    root = tmp_path / "runs"
    run = train(root)
    bundle = tmp_path / "bundle"
    export_bundle(run.id, bundle, root=root)
    recorded = state(bundle)
    recorded["model"]["net"] = net
    rewrite_state(bundle, recorded)
    _no_registries(monkeypatch)
    with pytest.raises(RegistryTouched):  # the patch is live
        plugins.registry("nnx.nets").get("TRANSFORMER")
    info = inspect_bundle(bundle)
    assert (info.source_run, info.model["net"]) == (run.id, net)
    result = inspect_bundle_result(bundle)
    assert isinstance(result, Ok) and result.value == info
    assert validate_bundle(bundle).generation == info.generation
    monkeypatch.undo()
    if net == "FEED_FWD":  # resolved on access, as documented
        assert info.model_params.net.name == "FEED_FWD"
        assert info.net_params.hidden_dims == (8,)
