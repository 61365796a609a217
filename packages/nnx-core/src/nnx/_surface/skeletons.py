"""The add-on skeletons the conformance kit checks (docs/extending.md, "Add-on skeletons").

A package of an add-on declares its kind in its ``__init__.py`` with one literal
assignment, read from the source (nothing is imported), so the declaration travels with
the code into a wheel as well as an editable install:

* ``__nnx_skeleton__ = {"kind": "tool", "verb": "<module>"}``: a tool over runs and
  predictions. It has ``errors.py`` (its named errors), ``document.py`` (what it reads
  and writes on disk), ``inputs.py`` (checking what users pass), the verb module named by
  ``verb`` (the action) and ``report.py`` (the result type and its rendering);
* ``__nnx_skeleton__ = {"kind": "training"}``: a training extension (a ``Params`` config,
  the module, one entry point); its shape is free enough that only the kind is checked.

A package without the assignment declares nothing and is not checked (the eight
distributions that predate the skeletons keep their layouts where a rename alone could
not give them the shape).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["DECLARATION", "KINDS", "TOOL_MODULES", "skeleton_rules"]

DECLARATION = "__nnx_skeleton__"
KINDS = ("tool", "training")
#: The modules every tool package has beside its verb module.
TOOL_MODULES = ("errors", "document", "inputs", "report")


def _declared(path: Path) -> tuple[int, Any] | None:
    """(line, value) of the package's ``__nnx_skeleton__`` assignment; None without one.
    A value that is not a literal is returned as the assignment's source text."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == DECLARATION):
            try:
                return node.lineno, ast.literal_eval(node.value)
            except ValueError:
                return node.lineno, ast.unparse(node.value)
    return None


def _problems(package: str, line: int, value: Any, modules: Mapping[str, Path]) -> list[str]:
    where = f"{package}:{line} {DECLARATION}"
    if not isinstance(value, dict) or value.get("kind") not in KINDS:
        return [f"{where} must be a literal dict whose kind is one of {', '.join(KINDS)}; "
                f"got {value!r}"]
    if value["kind"] != "tool":
        return []
    verb = value.get("verb")
    if not isinstance(verb, str) or not verb.isidentifier() or verb in TOOL_MODULES:
        return [f"{where} names no verb module (\"verb\": the module of the tool's action, "
                f"other than {', '.join(TOOL_MODULES)}); got {verb!r}"]
    missing = [f"{name}.py" for name in (*TOOL_MODULES[:3], verb, TOOL_MODULES[3])
               if f"{package}.{name}" not in modules]
    if missing:
        return [f"{package} is declared a tool but lacks {', '.join(missing)} (a tool has "
                f"errors.py, document.py, inputs.py, its verb module and report.py)"]
    return []


def skeleton_rules(modules: Mapping[str, Path]) -> list[str]:
    """Every package of ``modules`` (module name → source file) that declares a skeleton
    and does not have its shape, one line each."""
    problems = []
    for name, path in sorted(modules.items()):
        if path.name != "__init__.py" or name == "nnx":
            continue
        found = _declared(path)
        if found is not None:
            problems += _problems(name, *found, modules)
    return problems
