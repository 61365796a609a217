"""nnx-peft's public surface: top-level names through nnx-core's entry points, public imports."""

from __future__ import annotations

import ast
from pathlib import Path

import tomllib

import nnx
import nnx.peft

ROOT = Path(__file__).resolve().parents[1]
LORA = ["LoRALinear", "apply_lora_to", "save_lora_weights", "load_lora_weights", "merge_lora",
        "unmerge_lora", "lora_recipe", "dora_recipe", "ia3_recipe"]


def test_from_nnx_import_apply_lora_to() -> None:
    from nnx import apply_lora_to

    assert apply_lora_to is nnx.peft.apply_lora_to


def test_every_lora_name_is_announced_exported_and_resolves() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    exports = project["entry-points"]["nnx.exports"]
    assert project["entry-points"]["nnx.transforms"] == {
        "nnx.lora@v1": "nnx.peft.recipe:materialize_lora",
        "nnx.dora@v1": "nnx.peft.recipe:materialize_dora",
        "nnx.ia3@v1": "nnx.peft.recipe:materialize_ia3"}
    for name in LORA:
        assert exports[name].partition(":")[2] == name and name in nnx.peft.__all__
        assert getattr(nnx, name) is getattr(nnx.peft, name)


def _private(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            dotted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            dotted = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        for d in dotted:
            top, *rest = d.split(".")
            if top in ("peft", "transformers") or (
                    top == "nnx" and any(p.startswith("_") for p in rest)):
                found.append(d)
    return found


def test_nnx_peft_imports_no_private_nnx_module_and_never_hf_peft() -> None:
    files = sorted((ROOT / "src").rglob("*.py"))
    assert files
    assert {str(f.relative_to(ROOT)): bad for f in files if (bad := _private(f))} == {}
