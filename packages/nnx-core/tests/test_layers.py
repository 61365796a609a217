"""The layers contract of nnx-core (issue 14, docs/architecture.md), checked over the import graph.

Every ``import`` of an nnx module inside nnx-core counts: module-level,
under ``TYPE_CHECKING`` and inside functions. The contract:

* no cycle between modules;
* a layer imports only itself and the layers below it;
* no two folders of ``nnx/`` import each other both ways;
* code inside a layer never imports a public face (the thin top-level
  modules that re-export) or ``nnx`` itself, so the faces can be read as
  the list of what users import;
* ``nnx/`` holds only the layer packages and the faces: a new loose module
  must be placed in a layer;
* an import left inside a function says why in a comment.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import nnx
from nnx._surface.conformance import import_cycles

SRC = Path(nnx.__file__).parent

#: Lowest first. A module belongs to the first layer one of whose prefixes it has.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("nnx._foundation",)),
    ("configuration", ("nnx.params", "nnx.enums", "nnx.models", "nnx.datasets", "nnx.nets",
                       "nnx.preprocessing")),
    ("persistence", ("nnx._journal", "nnx._persistence", "nnx.history", "nnx.provenance",
                     "nnx.data_splits")),
    ("engine", ("nnx._contracts", "nnx._engine", "nnx.callbacks", "nnx.tasks", "nnx.metrics",
                "nnx.objectives", "nnx.transforms")),
    ("surface", ("nnx._surface",)),
)

#: The public faces at the top of ``nnx/``: each only re-exports from the layers.
FACES = frozenset({
    "nnx", "nnx._step_helpers", "nnx.benchmarking", "nnx.bundles", "nnx.cli",
    "nnx.compilation", "nnx.components", "nnx.distributed", "nnx.extend", "nnx.finetune",
    "nnx.monitors", "nnx.optimizers", "nnx.plans", "nnx.result", "nnx.streaming", "nnx.testing",
    "nnx.trainer",
})


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    in_function: bool


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in SRC.rglob("*.py")}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[:len(package.split(".")) - child.level + 1]
                    base = ".".join(anchor + ([child.module] if child.module else []))
                # ``from pkg import sub`` imports the submodule when one exists
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in child.names]
            for target in targets:
                resolved = _resolve(target, modules) if target.split(".")[0] == "nnx" else None
                if resolved is not None and resolved != name:
                    found.append(Import(name, resolved, child.lineno, inside))
            visit(child, inside)

    visit(ast.parse(path.read_text()), False)
    return found


def _imports(modules: dict[str, Path]) -> list[Import]:
    return [imp for name, path in modules.items() for imp in _imports_of(name, path, modules)]


def _layer(module: str) -> int | None:
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return None


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module: the conformance kit's one
    implementation (nnx.testing.check_distribution uses it for every distribution)."""
    return import_cycles(edges)


MODULES = _modules()
IMPORTS = _imports(MODULES)


def test_every_module_is_in_a_layer_or_is_a_public_face():
    loose = sorted(m for m in MODULES if _layer(m) is None and m not in FACES)
    assert loose == [], f"place these modules in a layer (docs/architecture.md): {loose}"
    assert sorted(f for f in FACES if f not in MODULES) == []


def test_the_import_graph_has_no_cycle_type_only_imports_included():
    edges: dict[str, set[str]] = defaultdict(set)
    for module in MODULES:
        edges[module]
    for imp in IMPORTS:
        edges[imp.source].add(imp.target)
    assert _cycles(edges) == []


def test_no_layer_imports_a_layer_above_it():
    upward = sorted(
        f"{i.source} ({LAYERS[_layer(i.source)][0]}) -> {i.target} ({LAYERS[_layer(i.target)][0]})"
        for i in IMPORTS
        if _layer(i.source) is not None and _layer(i.target) is not None
        and _layer(i.target) > _layer(i.source))  # type: ignore[operator]
    assert upward == []


def _folder(module: str) -> str | None:
    """The top-level folder of ``nnx`` a module lives in (None for a loose module)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (SRC / parts[1]).is_dir() else None


def _both_way_folders(imports: list[Import]) -> list[str]:
    edges = {(_folder(i.source), _folder(i.target)) for i in imports}
    return sorted(f"{a} <-> {b}" for a, b in edges
                  if a and b and a < b and (b, a) in edges)


def test_no_two_folders_import_each_other_both_ways():
    """Inside a layer too, folders are in order (issue 25): a contract two folders share
    lives in a lower one (``_contracts``, ``_journal``), type-only imports included."""
    assert _both_way_folders(IMPORTS) == []


def test_the_folder_check_sees_a_both_way_pair():
    planted = [Import("nnx._engine.a", "nnx.callbacks.b", 1, False),
               Import("nnx.callbacks.c", "nnx._engine.d", 1, True),
               Import("nnx.history.e", "nnx._journal.f", 1, False)]
    assert _both_way_folders(planted) == ["_engine <-> callbacks"]


def test_code_inside_the_layers_never_imports_a_face():
    through_faces = sorted(f"{i.source} -> {i.target}" for i in IMPORTS
                           if _layer(i.source) is not None and i.target in FACES)
    assert through_faces == []


def test_the_faces_only_re_export_from_the_layers():
    faces_on_faces = sorted(f"{i.source} -> {i.target}" for i in IMPORTS
                            if i.source in FACES and i.source != "nnx" and i.target in FACES)
    assert faces_on_faces == []


def test_every_import_left_inside_a_function_says_why():
    silent = []
    for imp in IMPORTS:
        if not imp.in_function:
            continue
        lines = MODULES[imp.source].read_text().splitlines()
        nearby = lines[max(0, imp.line - 3):imp.line]
        if not any("#" in line for line in nearby):
            silent.append(f"{imp.source}:{imp.line} -> {imp.target}")
    assert silent == []


def test_importing_a_layer_loads_nothing_above_it():
    """At run time too: importing every module of the layers up to N, lowest first,
    loads no module of a layer above N (one fresh interpreter)."""
    code = (
        "import importlib, json, sys\n"
        f"layers = {[sorted(m for m in MODULES if _layer(m) == i) for i in range(len(LAYERS))]}\n"
        "loaded = []\n"
        "for modules in layers:\n"
        "    for m in modules: importlib.import_module(m)\n"
        "    loaded.append(sorted(m for m in sys.modules if m.startswith('nnx.')))\n"
        "print(json.dumps(loaded))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    for index, loaded in enumerate(json.loads(out.stdout)):
        above = sorted(m for m in loaded if m in MODULES
                       and (_layer(m) is None or _layer(m) > index))  # type: ignore[operator]
        assert above == [], f"importing the {LAYERS[index][0]} layer loaded {above}"


def test_the_contract_catches_what_it_forbids():
    """The checks above can fail: a planted cycle and an upward import are seen."""
    edges = {"a": {"b"}, "b": {"a"}, "c": set()}
    assert _cycles(edges) == [["a", "b"]]
    assert _layer("nnx._foundation.atomic") == 0
    assert _layer("nnx._surface.model") == 4
    assert _layer("nnx.monitors") is None and "nnx.monitors" in FACES
