"""The optional crossing to nnx-peft (the ``peft`` extra), through
``nnx.extend.require_distribution``: with nnx-peft, and without it (the one install hint)."""

from __future__ import annotations

import sys
from importlib import metadata

import pytest

pytest.importorskip("nnx.example_plugin", reason="nnx-example-plugin is not installed")

from nnx import Nets, NNModel
from nnx.example_plugin import ExampleMLPParams, example_lora_recipe
from nnx.extend import MissingDistributionError
from nnx.testing import tiny_model


def _peft_installed() -> bool:
    try:
        metadata.distribution("nnx-peft")
    except metadata.PackageNotFoundError:
        return False
    return True


def _model() -> NNModel:
    return tiny_model(net=Nets.EXAMPLE_MLP, net_params=ExampleMLPParams(input_dim=4, output_dim=3))


@pytest.mark.skipif(not _peft_installed(), reason="the peft extra is not installed "
                    "(check_alacarte.py --extras peft installs it)")
def test_with_nnx_peft_the_crossing_gives_its_lora_recipe() -> None:
    model = _model()
    recipe = example_lora_recipe(model.net, r=2, alpha=4.0)
    assert (recipe.op, recipe.version) == ("nnx.lora", 1)
    assert list(recipe.config["targets"]) == ["linear"]
    model.apply_transform(recipe)
    assert type(model.net.linear).__name__ == "LoRALinear"


def test_without_nnx_peft_the_crossing_raises_the_one_install_hint(
        monkeypatch: pytest.MonkeyPatch) -> None:
    if _peft_installed():  # hide it: the import then fails as an absent module's does
        monkeypatch.setitem(sys.modules, "nnx.peft", None)
    with pytest.raises(MissingDistributionError, match=r"nnx\.peft \(needed by "
                       r"example_lora_recipe\) is provided by the nnx-peft distribution.*"
                       r"pip install nnx-peft") as info:
        example_lora_recipe(_model().net)
    assert info.value.distribution == "nnx-peft"
