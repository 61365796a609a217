"""Registries filled lazily from entry points, and install hints for missing add-ons."""

from __future__ import annotations

import subprocess
import sys

import pytest

import nnx
from nnx.cli import main as cli_main
from nnx.plugins import (
    EntryPointRegistry,
    MissingDistributionError,
    VersionedRegistry,
    registry,
    versioned_registry,
)


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


def test_add_on_names_without_their_distribution_raise_one_clear_error():
    with pytest.raises(MissingDistributionError, match=r"nnx\.LogitsChain .* pip install nnx-lm"):
        from nnx import LogitsChain  # noqa: F401
    with pytest.raises(MissingDistributionError, match="pip install nnx-peft"):
        _ = nnx.apply_lora_to
    with pytest.raises(ImportError, match="pip install nnx-diffusion"):
        from nnx import DiffusionMLP  # noqa: F401
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchThing'"):
        _ = nnx.NoSuchThing


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
