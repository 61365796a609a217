"""IA3 / DoRA / AdapterLayer names: announced as entry points, resolved from ``nnx``,
exported by ``nnx.peft``; their modules import only public nnx names and never HF."""

from __future__ import annotations

import ast
import importlib.metadata
from pathlib import Path

import pytest

import nnx
import nnx.peft

NAMES = ("IA3Linear", "apply_ia3_to", "save_ia3_weights", "load_ia3_weights", "DoRALinear",
         "apply_dora_to", "AdapterLayer")
MODULES = ("ia3.py", "dora.py", "adapter.py")
SRC = Path(__file__).resolve().parents[1] / "src" / "nnx" / "peft"


@pytest.mark.parametrize("name", NAMES)
def test_each_name_is_an_entry_point_resolved_from_nnx(name: str) -> None:
    points = {ep.name: ep for ep in importlib.metadata.entry_points(group="nnx.exports")
              if ep.dist is not None and ep.dist.name == "nnx-peft"}
    assert name in points
    assert points[name].load() is getattr(nnx.peft, name) is getattr(nnx, name)
    assert name in nnx.peft.__all__


@pytest.mark.parametrize("filename", MODULES)
def test_the_module_imports_no_private_nnx_module_and_no_hf_library(filename: str) -> None:
    tree = ast.parse((SRC / filename).read_text(encoding="utf-8"))
    imported: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.append(node.module)
    assert not [m for m in imported if m.split(".")[0] == "nnx"
                and any(part.startswith("_") for part in m.split(".")[1:])]
    assert not [m for m in imported if m.split(".")[0] in ("peft", "transformers")]
