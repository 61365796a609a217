"""Checkpointed component state (spec §14.1).

Anything that carries state across epochs (a callback's patience, a custom
step's running statistics) registers as a component: ``component_spec()``
returning a :class:`ComponentSpec`, and ``component_state()`` /
``load_component_state(state, *, version)``. An optional
``check_component_state(state, *, version)`` returns a list of problems.

Each component's state is written into the same training-state sidecar as its
checkpoint. On a stateful resume every saved component is validated against
the registered ones before anything changes (one :class:`ComponentRestoreError`
lists every problem), then the states load transactionally: if one load
fails, every component already restored, and the one whose load failed, returns
to its previous state.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Component",
    "ComponentRestoreError",
    "ComponentSpec",
    "check_components",
    "collect_states",
    "discover_components",
    "is_component",
    "restore_components",
]


@dataclass(frozen=True, slots=True)
class ComponentSpec:
    """A component's name, schema version, and whether a resume requires it.

    ``numbered=True`` (the built-in callbacks' default names) numbers repeats
    ``name.2``, ``name.3``, … in registration order instead of refusing them.
    """

    name: str
    version: int = 1
    required: bool = True
    numbered: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"ComponentSpec.name must be a non-empty string; got {self.name!r}")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ValueError(f"ComponentSpec.version must be an integer >= 1; got {self.version!r}")


class ComponentRestoreError(RuntimeError):
    """Saved component state cannot be restored; ``problems`` lists every reason."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("cannot restore component state:\n  - " + "\n  - ".join(problems))
        self.problems = problems


@runtime_checkable
class Component(Protocol):
    """What a component provides (spec §14.1); ``isinstance(obj, Component)`` checks it.

    ``check_component_state(state, *, version) -> list[str]`` is optional, so it
    is not a protocol member: :func:`check_components` calls it when defined.
    """

    def component_spec(self) -> ComponentSpec: ...

    def component_state(self) -> Any: ...

    def load_component_state(self, state: Any, *, version: int) -> None: ...


def is_component(obj: Any) -> bool:
    # runtime_checkable isinstance checks that each member exists; the loop also
    # needs them callable (an attribute set to None is not a component).
    return isinstance(obj, Component) and all(callable(getattr(obj, attr)) for attr in (
        "component_spec", "component_state", "load_component_state"))


def discover_components(found: Iterable[Any], explicit: Iterable[Any] = ()
                        ) -> dict[str, tuple[ComponentSpec, Any]]:
    """Name → (spec, component) among ``found`` (callbacks, the step) and ``explicit``.

    An explicit entry that does not implement the protocol raises TypeError;
    one object listed twice registers once; two components claiming one
    un-numbered name raise ValueError.
    """
    explicit = list(explicit)
    for i, obj in enumerate(explicit):
        if not is_component(obj):
            raise TypeError(f"components[{i}] ({type(obj).__name__}) does not implement "
                            "component_spec / component_state / load_component_state")
    out: dict[str, tuple[ComponentSpec, Any]] = {}
    seen: set[int] = set()
    for obj in [*found, *explicit]:
        if not is_component(obj) or id(obj) in seen:
            continue
        seen.add(id(obj))
        spec = obj.component_spec()
        if not isinstance(spec, ComponentSpec):
            raise TypeError(f"{type(obj).__name__}.component_spec() must return a ComponentSpec")
        name = spec.name
        if name in out:
            if not spec.numbered:
                raise ValueError(f"two components are named {name!r}; give one a distinct name")
            n = 2
            while f"{name}.{n}" in out:
                n += 1
            name = f"{name}.{n}"
        out[name] = (spec, obj)
    return out


def collect_states(components: Mapping[str, tuple[ComponentSpec, Any]]) -> dict[str, Any]:
    """What goes into the sidecar: ``{name: {"version", "required", "state"}}``."""
    return {name: {"version": spec.version, "required": spec.required,
                   "state": obj.component_state()}
            for name, (spec, obj) in components.items()}


def check_components(components: Mapping[str, tuple[ComponentSpec, Any]],
                     saved: Mapping[str, Any] | None) -> list[str]:
    """Every problem that would stop a restore, found before anything changes."""
    if saved is None:
        return []
    problems = []
    for name, (spec, obj) in components.items():
        entry = saved.get(name)
        if entry is None:
            if spec.required:
                problems.append(f"required component {name!r} is missing from the checkpoint")
            continue
        if entry["version"] > spec.version:
            problems.append(f"component {name!r} was saved with schema version "
                            f"{entry['version']}, newer than this one's ({spec.version})")
            continue
        check = getattr(obj, "check_component_state", None)
        if callable(check):
            # Each problem names its component once, also when it already says its name.
            problems += [p if p.startswith(f"{name}: ") else f"{name}: {p}"
                         for p in check(entry["state"], version=entry["version"])]
    for name, entry in saved.items():
        if name not in components and entry.get("required", True):
            problems.append(f"the checkpoint holds required component {name!r}, which this run "
                            "does not register")
    return problems


def restore_components(components: Mapping[str, tuple[ComponentSpec, Any]],
                       saved: Mapping[str, Any] | None) -> tuple[list[str], list[str]]:
    """Load the saved states transactionally; returns (restored, started fresh) names."""
    if saved is None:
        if components:
            warnings.warn("the checkpoint carries no component state: "
                          f"{', '.join(components)} start fresh", RuntimeWarning, stacklevel=2)
        return [], list(components)
    problems = check_components(components, saved)
    if problems:
        raise ComponentRestoreError(problems)
    touched: list[tuple[str, Any, Any, int]] = []
    try:
        for name, (spec, obj) in components.items():
            entry = saved.get(name)
            if entry is None:
                continue
            # A deep copy: component_state() may hand out live tensors or containers
            # that the load then overwrites in place, which would corrupt the snapshot.
            before = copy.deepcopy(obj.component_state())
            # Recorded before the load, so a load that assigns part of its state and
            # then raises is rolled back too, not left half-restored.
            touched.append((name, obj, before, spec.version))
            obj.load_component_state(entry["state"], version=entry["version"])
    except BaseException:
        for name, obj, before, version in reversed(touched):
            try:
                obj.load_component_state(before, version=version)
            except Exception as rollback:  # never replace the original error
                warnings.warn(f"rolling back component {name!r} failed: {rollback!r}",
                              RuntimeWarning, stacklevel=2)
        raise
    restored = [name for name, *_ in touched]
    return restored, [name for name in components if name not in restored]
