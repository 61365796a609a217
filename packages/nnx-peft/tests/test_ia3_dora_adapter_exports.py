"""IA3 / DoRA / AdapterLayer names: announced as entry points, resolved from ``nnx``,
exported by ``nnx.peft`` (their modules' imports: test_peft_public's conformance call)."""

from __future__ import annotations

import importlib.metadata

import pytest

import nnx
import nnx.peft

NAMES = ("IA3Linear", "apply_ia3_to", "save_ia3_weights", "load_ia3_weights", "DoRALinear",
         "apply_dora_to", "AdapterLayer")


@pytest.mark.parametrize("name", NAMES)
def test_each_name_is_an_entry_point_resolved_from_nnx(name: str) -> None:
    points = {ep.name: ep for ep in importlib.metadata.entry_points(group="nnx.exports")
              if ep.dist is not None and ep.dist.name == "nnx-peft"}
    assert name in points
    assert points[name].load() is getattr(nnx.peft, name) is getattr(nnx, name)
    assert name in nnx.peft.__all__
