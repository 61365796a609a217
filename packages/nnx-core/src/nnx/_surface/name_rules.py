"""One list per name: a distribution's entry points checked against its ``__all__`` and
nnx's registries (the entry-point half of ``check_distribution``, docs/extending.md).

A distribution's pyproject entry points are the only list of its names, so both
directions are checked:

* every ``nnx.*`` entry point is in a group nnx-core reads, loads, and is (or equals)
  what that group resolves its name to: ``nnx.<name>`` for ``nnx.exports``, ``Nets.<name>``'s
  registration for ``nnx.nets``, the registry's ``(id, version)`` for the ``id@vN``
  groups (a register call in this process, or another distribution's entry point of
  the same name, would win over it);
* an add-on's ``nnx.exports`` name is also ``nnx.<sub>.<name>`` and listed in
  ``nnx.<sub>.__all__``; any other add-on entry point names an object a public
  ``__all__`` lists (its own module's, or a public package's above it);
* the reverse: a name a public module's ``__all__`` lists that is a registered kind (a
  ``NetRegistration``, a ``MetricRegistration``, an object a ``register_*`` call put in
  a registry) has an entry point of this distribution naming it, and an add-on object
  that ``from nnx import <name>`` reaches has this distribution's ``nnx.exports`` entry
  ``<name>``.

nnx-core registers its own built-ins (its metrics, ``nnx.low_rank``) through the same
groups, but their targets are private (``nnx.metrics.builtin:ACCURACY_V1``) and its
top-level names are its own face's, not entry points: for core the first rule and the
registered kinds apply.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from nnx._foundation.catalog import GROUP_KINDS
from nnx._foundation.plugins import VersionedRegistry, registry, versioned_registry
from nnx.enums.nets import NetRegistration, Nets
from nnx.metrics.registry import MetricRegistration

__all__ = ["CORE", "entry_point_rules", "private_name"]

CORE = "nnx-core"
#: The groups whose entries are named by plain names; the others are ``id@vN``.
PLAIN_GROUPS = ("nnx.exports", "nnx.nets")
#: The registered kinds a type tells, and the group that must announce each.
KIND_GROUPS: tuple[tuple[type, str], ...] = ((NetRegistration, "nnx.nets"),
                                             (MetricRegistration, "nnx.metrics"))

Loaded = Mapping[str, list[tuple[metadata.EntryPoint, Any]]]


def private_name(dotted: str) -> bool:
    """Whether a dotted name below ``nnx`` has a ``_``-prefixed (non-dunder) part."""
    return any(p.startswith("_") and not p.startswith("__") for p in dotted.split(".")[1:])


def _resolved(ep: metadata.EntryPoint) -> tuple[str, Any]:
    """How the group names ``ep`` and what it resolves that name to in this process."""
    if ep.group == "nnx.exports":
        return f"nnx.{ep.name}", getattr(importlib.import_module("nnx"), ep.name, None)
    if ep.group == "nnx.nets":
        return f"Nets.{ep.name}", Nets[ep.name].registration
    key = VersionedRegistry.split(ep.name)
    if key is None:
        raise ValueError(f"an {ep.group} entry point is named id@vN (acme.op@v1)")
    return f"the {ep.group} registry's {ep.name}", versioned_registry(ep.group).get(*key)


def _resolves(ep: metadata.EntryPoint, obj: Any, label: str) -> list[str]:
    try:
        where, found = _resolved(ep)
    except Exception as exc:  # a bad name, a clash between distributions: said as found
        return [f"{label} does not resolve by its name: {type(exc).__name__}: {exc}"]
    # An equal value is the same registration (register_builtin_metrics puts back equal
    # MetricRegistrations after an unregister_metric): only another one is a problem.
    if found is obj or _equal(found, obj):
        return []
    if ep.group == "nnx.exports":  # the message core's tests and add-ons already know
        return [f"nnx.{ep.name} is not the object entry point {ep.value} names"]
    return [f"{label} is not {where} (a register call in this process, or another "
            "distribution's entry point of the same name, wins over it)"]


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(type(a) is type(b) and a == b)
    except Exception:  # a value whose == is not a truth value (an array) is not equal here
        return False


def _listed(ep: metadata.EntryPoint, obj: Any, label: str) -> list[str]:
    """An add-on's entry point names a public name (module docstring)."""
    parts = ep.module.split(".")
    if ep.group == "nnx.exports":
        sub = parts[1] if len(parts) > 1 else ""
        if not sub or sub.startswith("_"):
            return []
        package = importlib.import_module(f"nnx.{sub}")
        problems = []
        if getattr(package, ep.name, None) is not obj:
            problems.append(f"nnx.{sub}.{ep.name} is not the object entry point "
                            f"{ep.value} names")
        if ep.name not in getattr(package, "__all__", ()):
            problems.append(f"nnx.{sub}.__all__ does not list the export {ep.name}")
        return problems
    candidates = [m for m in (".".join(parts[:i]) for i in range(len(parts), 1, -1))
                  if not private_name(m)]
    for name in candidates:
        module = importlib.import_module(name)  # loaded already: the entry point did
        if any(getattr(module, n, None) is obj for n in getattr(module, "__all__", ())):
            return []
    return [f"{label} names an object no public __all__ lists "
            f"({', '.join(candidates) or 'its module is private'}): list it where users "
            "import it"]


def _explicit() -> list[tuple[str, str, Any]]:
    """(group, name, object) of everything a register call (no entry point) holds."""
    found = [(g, n, o) for g in PLAIN_GROUPS for n, o in registry(g).explicit().items()]
    return found + [(g, n, o) for g in GROUP_KINDS if g not in PLAIN_GROUPS
                    for n, o in versioned_registry(g).explicit().items()]


def _unannounced(distribution: str, modules: Iterable[str], loaded: Loaded) -> list[str]:
    """Names a public ``__all__`` lists that are registered kinds with no entry point."""
    def announced(group: str, obj: Any) -> bool:
        return any(o is obj for _, o in loaded.get(group, ()))

    mine = set(modules)
    exports = {ep.name for ep, _ in loaded.get("nnx.exports", ())}
    problems: list[str] = []
    public: list[Any] = []
    broken: list[str] = []  # packages that did not import: their modules cannot either
    for name in sorted(mine):
        if private_name(name) or (name == "nnx" and distribution != CORE):
            continue  # an add-on's own nnx/__init__.py is a problem of its own
        if any(name.startswith(f"{b}.") for b in broken):
            continue
        try:
            public.append(importlib.import_module(name))
        except Exception as exc:
            broken.append(name)
            problems.append(f"{name} does not import ({type(exc).__name__}: {exc}), so its "
                            "__all__ cannot be checked against the entry points")
    explicit = _explicit()  # after the imports: a register call at import counts
    nnx = importlib.import_module("nnx")
    for module in public:
        for listed in getattr(module, "__all__", ()):
            obj = getattr(module, listed, None)
            where = f"{module.__name__}.__all__ lists {listed}"
            for kind, group in KIND_GROUPS:
                if isinstance(obj, kind) and not announced(group, obj):
                    problems.append(f"{where}, a {kind.__name__}, but no {group} entry point "
                                    f"of {distribution} names it")
            for group, key, value in explicit:
                if value is obj and not announced(group, obj):
                    problems.append(f"{where}, which a register call put in {group} as "
                                    f"{key}, but no {group} entry point of {distribution} "
                                    "names it: announce it in pyproject.toml")
            if (distribution != CORE and getattr(obj, "__module__", None) in mine
                    and listed not in exports and _reaches(nnx, listed, obj)):
                problems.append(f"{where}, which `from nnx import {listed}` reaches, but "
                                f"{distribution} has no nnx.exports entry point {listed}")
    return problems


def _reaches(nnx: Any, name: str, obj: Any) -> bool:
    try:
        return getattr(nnx, name) is obj
    except (AttributeError, ImportError):  # not a top-level name (or another's, absent)
        return False


def entry_point_rules(distribution: str, modules: Mapping[str, Path]) -> list[str]:
    """Every broken rule of the module docstring for the installed ``distribution``
    (``modules``: its source modules, as ``conformance.source_modules`` finds them)."""
    problems = []
    loaded: dict[str, list[tuple[metadata.EntryPoint, Any]]] = defaultdict(list)
    points = [ep for ep in metadata.distribution(distribution).entry_points
              if ep.group.startswith("nnx.")]
    for ep in sorted(points, key=lambda e: (e.group, e.name)):
        label = f"entry point {ep.group}:{ep.name} = {ep.value}"
        if ep.group not in GROUP_KINDS:
            problems.append(f"{label} is in a group nnx-core does not read "
                            f"({', '.join(GROUP_KINDS)})")
            continue
        try:
            obj = ep.load()
        except Exception as exc:
            problems.append(f"{label} does not load: {type(exc).__name__}: {exc}")
            continue
        loaded[ep.group].append((ep, obj))
        problems += _resolves(ep, obj, label)
        if distribution != CORE:
            problems += _listed(ep, obj, label)
    return problems + _unannounced(distribution, modules, loaded)
