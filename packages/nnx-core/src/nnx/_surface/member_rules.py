"""The member half of ``check_distribution``: what an add-on reaches of core's objects.

The import rules (:mod:`nnx._surface.conformance`) see which modules an add-on imports;
an add-on can still reach core's internals through the objects core hands it (the
model, a step context). So, in an add-on's source:

* ``Name._x``, where ``Name`` was imported from ``nnx`` / ``nnx.extend``, is a private
  member of core (``NNParams._validate``);
* any ``obj._x`` (or ``getattr(obj, "_x")`` / ``hasattr`` / ``setattr`` / ``delattr``
  with a literal name), however ``obj`` was reached, whose name is a ``_``-prefixed
  member nnx-core's source defines (a method, a class attribute, a ``__slots__`` entry,
  an attribute it assigns) and the add-on does not define itself (``model._task``);
* any other ``obj._x`` the add-on does not define (``ctx._slots``): someone else's
  private. Allowed only where a comment on its line or the two above says whose it is
  (torch's hook dictionaries), as for an import inside a function;
* ``model.task_adapter`` / ``model.task_runtime``, core's view of a model's task: an
  add-on reaches the per-batch machinery through ``nnx.extend.task_batch_ops``.

"Defines" is read from the source (AST), never by importing it. Dunders (``__x__``)
and name-mangled ``__x`` are not ``_``-prefixed members here, nor are the
underscore names Python documents as public API: a named tuple's ``_replace`` /
``_asdict`` / ``_fields`` / ``_field_defaults`` / ``_make`` and enum's ``_sunder_``
names (``_value_``, ``_missing_``).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from pathlib import Path

__all__ = ["defined_members", "explained", "member_rules"]

#: Core members an add-on must not read, with what to use instead.
CORE_ONLY = {"task_adapter": "nnx.extend.task_batch_ops(model)",
             "task_runtime": "nnx.extend.task_batch_ops(model)"}
_BY_NAME = ("getattr", "hasattr", "setattr", "delattr")
#: collections.namedtuple's documented methods and attributes.
_NAMED_TUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_field_defaults", "_make"})


def _private(name: str) -> bool:
    sunder = len(name) > 2 and name.endswith("_") and not name.endswith("__")
    return (name.startswith("_") and not name.startswith("__") and not sunder
            and name not in _NAMED_TUPLE_API)


def _by_name(node: ast.Call) -> tuple[str, str] | None:
    """(function, attribute name) of ``getattr(obj, "name", ...)`` and its kin, when the
    name is a literal."""
    if (isinstance(node.func, ast.Name) and node.func.id in _BY_NAME and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
        return node.func.id, node.args[1].value
    return None


def _own(receiver: ast.expr, any_receiver: bool) -> bool:
    # An add-on defines what it assigns on its own instances and classes only:
    # ``model._task = ...`` is a write into core's object, not a definition.
    return any_receiver or (isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"))


def _members_of(tree: ast.AST, any_receiver: bool) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found.add(item.name)
                if not isinstance(item, (ast.Assign, ast.AnnAssign)):
                    continue
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        found.add(target.id)
                        if target.id == "__slots__" and item.value is not None:
                            found |= {c.value for c in ast.walk(item.value)
                                      if isinstance(c, ast.Constant) and isinstance(c.value, str)}
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if _own(node.value, any_receiver):
                found.add(node.attr)
        elif (isinstance(node, ast.Call) and (call := _by_name(node)) and call[0] == "setattr"
              and _own(node.args[0], any_receiver)):
            found.add(call[1])
    return {name for name in found if _private(name)}


def defined_members(paths: Iterable[Path], *, any_receiver: bool = False) -> frozenset[str]:
    """The ``_``-prefixed member names the files at ``paths`` define (module docstring);
    ``any_receiver`` counts an assignment to any object's attribute, not only self's."""
    return _defined(tuple(sorted(paths)), any_receiver)


@functools.lru_cache(maxsize=4)
def _defined(paths: tuple[Path, ...], any_receiver: bool) -> frozenset[str]:
    found: set[str] = set()
    for path in paths:
        found |= _members_of(ast.parse(path.read_text(encoding="utf-8"), str(path)),
                             any_receiver)
    return frozenset(found)


def explained(lines: list[str], line: int) -> bool:
    """Whether a comment sits on 1-based ``line`` of ``lines`` or on the two above it."""
    return any("#" in text for text in lines[max(0, line - 3):line])




def member_rules(module: str, path: Path, core_names: set[str], core_members: frozenset[str],
                 own_members: frozenset[str], distribution: str) -> list[str]:
    """Every member rule of the module docstring that ``module`` (at ``path``) breaks.

    ``core_names``: the names it imported from ``nnx`` / ``nnx.extend``;
    ``core_members`` / ``own_members``: :func:`defined_members` of core and of the add-on.
    """
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    problems = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Attribute):
            name = node.attr
            if isinstance(node.value, ast.Name) and node.value.id in core_names and _private(
                    name):
                problems.append(f"{module}:{node.lineno} reads {node.value.id}.{name}, "
                                "a private member of core")
                continue
            spelled = f"{ast.unparse(node.value)}.{name}"
        elif isinstance(node, ast.Call) and (call := _by_name(node)) is not None:
            name = call[1]
            spelled = f'{call[0]}({ast.unparse(node.args[0])}, "{name}")'
        else:
            continue
        where = f"{module}:{node.lineno} reaches {spelled}"
        if name in CORE_ONLY:
            problems.append(f"{where}, core's view of the task: use {CORE_ONLY[name]}")
        elif not _private(name) or name in own_members:
            continue
        elif name in core_members:
            problems.append(f"{where}, a private member only nnx-core defines")
        elif not explained(lines, node.lineno):
            problems.append(f"{where}, a private member {distribution} does not define: "
                            "say whose it is in a comment (on its line or the two above)")
    return problems
