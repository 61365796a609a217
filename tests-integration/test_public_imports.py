"""The reference plugin imports only public nnx names (issue 14): no ``_``-prefixed module."""

from __future__ import annotations

import ast
from pathlib import Path

PLUGIN_SRC = Path(__file__).resolve().parent / "example-plugin" / "src"


def private_nnx_imports(source: str, filename: str = "<src>") -> list[str]:
    """Every imported nnx module with a ``_``-prefixed part (``nnx._validation``,
    ``nnx.params._base``), and every ``_``-prefixed name imported from an nnx module."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
            names: list[str] = []
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for dotted in [*modules, *names]:
            parts = dotted.split(".")
            if parts[0] == "nnx" and any(p.startswith("_") for p in parts[1:]):
                found.append(dotted)
    return found


def test_the_checker_catches_private_imports() -> None:
    code = ("import nnx._validation\nfrom nnx.params._base import set_field\n"
            "from nnx import _catalog\nfrom nnx.extend import check_real\nimport torch._C\n")
    assert private_nnx_imports(code) == ["nnx._validation", "nnx.params._base",
                                         "nnx.params._base.set_field", "nnx._catalog"]


def test_example_plugin_imports_no_private_nnx_module() -> None:
    files = sorted(PLUGIN_SRC.rglob("*.py"))
    assert files, PLUGIN_SRC
    offending = {str(f.relative_to(PLUGIN_SRC)): bad for f in files
                 if (bad := private_nnx_imports(f.read_text(), str(f)))}
    assert offending == {}
