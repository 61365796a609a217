"""nnx-lm imports only public nnx names, as add-ons must: no ``_``-prefixed nnx module."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _private(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            dotted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            dotted = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        found += [d for d in dotted if d.split(".")[0] == "nnx"
                  and any(p.startswith("_") for p in d.split(".")[1:])]
    return found


def test_nnx_lm_imports_no_private_nnx_module() -> None:
    files = sorted(SRC.rglob("*.py"))
    assert files
    assert {str(f.relative_to(SRC)): bad for f in files if (bad := _private(f))} == {}


def test_transformers_is_never_imported_by_the_package() -> None:
    # transformers is a dev-only dependency: the interop reads safetensors directly.
    for f in SRC.rglob("*.py"):
        assert "import transformers" not in f.read_text(encoding="utf-8"), f
