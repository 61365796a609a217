"""check_distribution: what every nnx distribution's tests assert of it (docs/extending.md).

One call, ``nnx.testing.check_distribution("nnx-paradigms")``, reads the installed
distribution's own source files (an editable install's source directory, or the files a
wheel installed) and raises one AssertionError listing every problem:

* an add-on imports nnx-core only through ``nnx`` and ``nnx.extend``: no other core
  module, no ``_``-prefixed core module or member (``NNParams._validate`` included);
* an add-on reaches no ``_``-prefixed member it does not define, however reached
  (``model._task``, ``getattr(ctx, "_slots")``), and not ``model.task_adapter``
  (:mod:`nnx._surface.member_rules`);
* an add-on reaches another add-on only if it requires it (an optional one through
  ``nnx.extend.require_distribution``), and never through ``importlib`` / ``__import__``;
* no import circle among the distribution's own modules (type-only imports count);
* every import left inside a function says why in a comment (on its line or the two
  above), so a lazy import is a decision, never a way around a circle;
* one list per name (:mod:`nnx._surface.name_rules`): every ``nnx.*`` entry point loads
  and is what its group resolves the name to (an ``nnx.exports`` name is ``nnx.<name>``
  and ``nnx.<sub>.<name>``, listed in ``nnx.<sub>.__all__``), and, the reverse, every
  registered kind a public ``__all__`` lists has an entry point;
* an add-on ships no ``nnx/__init__.py`` (it would replace nnx-core's on install);
* a package that declares an add-on skeleton (``__nnx_skeleton__``,
  :mod:`nnx._surface.skeletons`) has its modules: a tool's errors, document, inputs, verb
  and report.

nnx-core is checked too, for the rules that are not about reaching core (circles,
function-local imports, entry points). The import-graph helpers here are the ones
nnx-core's own layers test reads.
"""

from __future__ import annotations

import ast
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from nnx._surface.member_rules import defined_members, explained, member_rules
from nnx._surface.name_rules import CORE, entry_point_rules, private_name
from nnx._surface.skeletons import skeleton_rules

__all__ = ["CORE", "EXTENSION_API", "Import", "check_distribution", "import_cycles",
           "module_imports", "source_modules"]

#: The only core modules an add-on's source imports.
EXTENSION_API = frozenset({"nnx", "nnx.extend"})


@dataclass(frozen=True)
class Import:
    """One import statement's target, as the module graph sees it."""

    source: str
    target: str
    line: int
    in_function: bool
    members: tuple[str, ...] = ()  # the names a ``from target import ...`` takes


# -- where a distribution's source is -----------------------------------------------------

def _roots(dist: metadata.Distribution) -> list[Path]:
    """The directories an editable install puts on ``sys.path`` (its ``.pth`` lines), or
    the project's ``src`` named by ``direct_url.json``."""
    roots = []
    for file in dist.files or ():
        if file.suffix == ".pth":
            for line in Path(str(dist.locate_file(file))).read_text().splitlines():
                if line and not line.startswith(("#", "import ")) and Path(line).is_dir():
                    roots.append(Path(line))
    if not roots and (direct := dist.read_text("direct_url.json")):
        url = urlparse(json.loads(direct).get("url", ""))
        if url.scheme == "file":
            project = Path(unquote(url.path))
            roots.append(project / "src" if (project / "src").is_dir() else project)
    return roots


def source_modules(distribution: str) -> dict[str, Path]:
    """Module name → source file of every ``nnx`` module ``distribution`` provides."""
    dist = metadata.distribution(distribution)
    installed = [Path(str(dist.locate_file(f))) for f in dist.files or ()
                 if f.suffix == ".py" and f.parts[0] == "nnx"]
    if not installed:  # an editable install: its files are the source tree's
        installed = [p for root in _roots(dist) for p in sorted((root / "nnx").rglob("*.py"))]
    out = {}
    for path in installed:
        parts = list(path.with_suffix("").parts)
        parts = parts[len(parts) - 1 - parts[::-1].index("nnx"):]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


# -- the import graph ---------------------------------------------------------------------

def _resolve(name: str, known: Mapping[str, Any]) -> str:
    """The longest prefix of ``name`` that is a module in ``known`` (else ``name``)."""
    probe = name
    while probe and probe not in known:
        probe = probe.rpartition(".")[0]
    return probe or name


def module_imports(name: str, path: Path, known: Mapping[str, Any]) -> list[Import]:
    """Every ``nnx`` import of module ``name`` (module-level, type-only and inside
    functions), each resolved to a module of ``known`` where one matches."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(Import(name, alias.name, child.lineno, inside))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[:len(package.split(".")) - child.level + 1]
                    base = ".".join(anchor + ([child.module] if child.module else []))
                for alias in child.names:
                    # ``from pkg import sub`` imports the submodule when one exists
                    sub = f"{base}.{alias.name}"
                    found.append(Import(name, sub, child.lineno, inside) if sub in known
                                 else Import(name, base, child.lineno, inside, (alias.name,)))
            visit(child, inside)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)
    return [Import(i.source, _resolve(i.target, known) if i.target.split(".")[0] == "nnx"
                   else i.target, i.line, i.in_function, i.members) for i in found]


def import_cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), sorted."""
    graph = {v: sorted(set(ws)) for v, ws in edges.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(result)


def silent_local_imports(imports: Iterable[Import], modules: Mapping[str, Path]) -> list[str]:
    """``module:line -> target`` for each ``nnx`` import inside a function with no comment
    on its line or the two above it (a lazy third-party import needs no reason)."""
    silent: list[str] = []
    for imp in imports:
        if imp.in_function and imp.target.split(".")[0] == "nnx":
            lines = modules[imp.source].read_text(encoding="utf-8").splitlines()
            if not explained(lines, imp.line):
                silent.append(f"{imp.source}:{imp.line} -> {imp.target}")
    return silent


# -- the rules ----------------------------------------------------------------------------

def _required(distribution: str) -> set[str]:
    """The distributions ``distribution`` always installs with (extras left out)."""
    out = set()
    for line in metadata.requires(distribution) or ():
        if "extra ==" not in line.partition(";")[2].replace("extra==", "extra =="):
            match = re.match(r"[A-Za-z0-9._-]+", line)
            if match:
                out.add(match.group().lower().replace("_", "-"))
    return out


def _owner(module: str, owners: Mapping[str, str]) -> str | None:
    return owners.get(_resolve(module, owners))


def _dynamic_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            spelled = (fn.id if isinstance(fn, ast.Name) else
                       fn.attr if isinstance(fn, ast.Attribute) else "")
            if spelled in ("import_module", "__import__"):
                found.append((node.lineno, spelled))
    return found


def _reach_rules(distribution: str, modules: Mapping[str, Path],
                 imports: list[Import], forbid: Iterable[str]) -> list[str]:
    """An add-on's ways into core and into other add-ons."""
    problems = []
    owners: dict[str, str] = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith("nnx-") and name != distribution:
            owners.update(dict.fromkeys(source_modules(name), name))
    required = _required(distribution)
    forbidden = set(forbid)
    for imp in imports:
        where = f"{imp.source}:{imp.line}"
        top = imp.target.split(".")[0]
        if top in forbidden:
            problems.append(f"{where} imports {imp.target}, which this distribution must not use")
        if top != "nnx" or (imp.target in modules and imp.target != "nnx"):
            continue
        resolved = _resolve(imp.target, owners)
        # A module only the top package ``nnx`` resolves for belongs to no installed
        # distribution (an add-on that is not installed here): not core's.
        owner = (owners.get(resolved) if resolved is not None and (
            resolved != "nnx" or imp.target == "nnx") else None)
        private = [f"{imp.target}.{m}" for m in imp.members if private_name(f"x.{m}")]
        if private_name(imp.target) or private:
            problems.append(f"{where} imports private {', '.join(private) or imp.target} "
                            f"of {owner or 'another distribution'}")
        elif owner == CORE and imp.target not in EXTENSION_API:
            problems.append(f"{where} imports {imp.target}: an add-on imports core only "
                            "through nnx and nnx.extend")
        elif owner != CORE and owner not in required:
            of = f" of {owner}" if owner else " (of a distribution not installed here)"
            problems.append(f"{where} imports {imp.target}{of}, which {distribution} "
                            "does not require: reach it with nnx.extend.require_distribution")
    core_members = defined_members(source_modules(CORE).values(), any_receiver=True)
    own_members = defined_members(modules.values())
    for module, path in sorted(modules.items()):
        mine = [i for i in imports if i.source == module and i.target in EXTENSION_API]
        core_names = {m for i in mine for m in i.members} | {
            "nnx" for i in mine if i.target == "nnx" and not i.members}
        problems += member_rules(module, path, core_names, core_members, own_members,
                                 distribution)
        problems += [f"{module}:{line} calls {call}: reach another distribution with "
                     "nnx.extend.require_distribution" for line, call in _dynamic_imports(path)]
    if "nnx" in modules:
        problems.append(f"{distribution} ships nnx/__init__.py, which belongs to nnx-core")
    return problems


def check_distribution(distribution: str, *, forbid: Iterable[str] = ()) -> None:
    """Assert the add-on rules for the installed ``distribution`` (module docstring).

    ``forbid`` names top-level modules its source must never import (a peer library its
    tests compare against, say). Raises AssertionError listing every problem found.
    """
    modules = source_modules(distribution)
    if not modules:
        raise AssertionError(f"{distribution}: no nnx source files found for it")
    # An add-on's own ``nnx/__init__.py`` (a problem of its own) must not swallow core names.
    known = modules if distribution == CORE else {m: p for m, p in modules.items() if m != "nnx"}
    imports = [imp for name, path in modules.items()
               for imp in module_imports(name, path, known)]
    edges: dict[str, set[str]] = defaultdict(set)
    for imp in imports:
        if imp.target in modules and imp.target != imp.source:
            edges[imp.source].add(imp.target)
    problems = [f"import circle: {' <-> '.join(c)}" for c in import_cycles(edges)]
    problems += [f"{s}: an import inside a function needs a comment saying why"
                 for s in silent_local_imports(imports, modules)]
    if distribution != CORE:
        problems += _reach_rules(distribution, modules, imports, forbid)
    problems += entry_point_rules(distribution, modules)
    problems += skeleton_rules(modules)
    problems = list(dict.fromkeys(problems))  # one line per problem, not per imported name
    if problems:
        raise AssertionError(f"{distribution} breaks {len(problems)} add-on rule(s) "
                             "(docs/extending.md):\n  " + "\n  ".join(problems))
