"""No add-on reads the run document (run.yaml, metadata.yaml) by key string (issue 37).

nnx-core's run-document readers (``nnx.extend.read_run_document`` and
``RunDocument``) are where the keys are spelled; ``RUN_DOCUMENT_KEYS`` lists the ones
whose names are the document's own. An add-on that subscripts, ``get``s, ``pop``s or
tests membership with one of them reads the document around the contract, and breaks
silently the day core renames the key. Add-ons' own documents may still use such a word
as a dict literal's key (writing is not reading the run document).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from nnx.extend import RUN_DOCUMENT_KEYS

ROOT = Path(__file__).resolve().parent.parent
ADD_ON_SRC = sorted([*(p / "src" for p in (ROOT / "packages").iterdir()
                       if (p / "pyproject.toml").is_file() and p.name != "nnx-core"),
                     ROOT / "tests-integration" / "example-plugin" / "src"])
_READERS = frozenset({"get", "pop", "setdefault"})


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def key_reads(source: str) -> list[tuple[int, str]]:
    """(line, key) for each run-document key the source reads by string literal."""
    found = []
    for node in ast.walk(ast.parse(source)):
        keys: list[str | None] = []
        if isinstance(node, ast.Subscript):
            keys = [_literal(node.slice)]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in _READERS and node.args):
            keys = [_literal(node.args[0])]
        elif isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            keys = [_literal(node.left)]
        found += [(node.lineno, k) for k in keys if k in RUN_DOCUMENT_KEYS]
    return sorted(found)


def test_the_scan_sees_every_kind_of_read() -> None:
    planted = ('a = run["salt"]\nb = meta.get("resume")\ndel doc["parent_run_id"]\n'
               'c = loop.pop("parent_checkpoint", None)\nd = "trainer" in cfg\n'
               'own = {"resume": 1}\n')
    assert key_reads(planted) == [(1, "salt"), (2, "resume"), (3, "parent_run_id"),
                                  (4, "parent_checkpoint"), (5, "trainer")]


@pytest.mark.parametrize("src", ADD_ON_SRC, ids=[p.parent.name for p in ADD_ON_SRC])
def test_no_add_on_reads_a_run_document_key_by_string(src: Path) -> None:
    assert src.is_dir()
    found = [f"{path.relative_to(ROOT)}:{line}: {key!r}"
             for path in sorted(src.rglob("*.py"))
             for line, key in key_reads(path.read_text(encoding="utf-8"))]
    assert not found, ("read these through nnx.extend.read_run_document / RunDocument "
                       "instead of by key:\n" + "\n".join(found))
