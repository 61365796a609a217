"""Registered model factories: register, resolve, build seeded (spec §3.2).

Factories live in the process-wide ``nnx.model_factories`` versioned registry,
so an add-on can also announce one through an entry point named ``id@vN``.
Resolving a spec never imports a module by name or evaluates a string;
:func:`build_from_spec` is the one place that calls a factory.
:func:`overriding_model_factories` lets a caller's factories stand in for the
registry's in the current context only (reconstruct_bundle's ``factories=``):
the registry itself is never edited, so other threads never see them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
import torch
from torch import nn

from nnx._foundation.plugins import VersionedRegistry, versioned_registry
from nnx._foundation.seeding import capture_rng_state, restore_rng_state
from nnx.params.descriptors import ModelSpec

__all__ = [
    "MissingModelFactoryError",
    "ModelFactory",
    "build_from_spec",
    "register_model_factory",
    "registered_model_factories",
    "resolve_model_factory",
    "unregister_model_factory",
]

#: ``factory(config) -> torch.nn.Module``; ``config`` is the spec's read-only config.
ModelFactory = Callable[[Mapping[str, Any]], nn.Module]


class MissingModelFactoryError(LookupError):
    """No factory can build the model: an unregistered (id, version), or a runtime module."""


#: ``(id, version)`` → factory standing in for the registry's in this context.
_OVERRIDES: ContextVar[Mapping[tuple[str, int], ModelFactory] | None] = ContextVar(
    "nnx_model_factory_overrides", default=None)


def _registry() -> VersionedRegistry:
    return versioned_registry("nnx.model_factories")


@contextmanager
def overriding_model_factories(factories: Mapping[tuple[str, int], ModelFactory]
                               ) -> Iterator[None]:
    """Within the block, :func:`resolve_model_factory` finds ``factories``
    (``{(id, version): factory}``) before the process registry, in this context only
    (this thread or task; a thread started inside does not inherit it)."""
    checked: dict[tuple[str, int], ModelFactory] = {}
    for key, factory in factories.items():
        if not isinstance(key, tuple) or len(key) != 2:
            raise ValueError(f"model factories are keyed by (id, version); got {key!r}")
        VersionedRegistry.key(*key)  # the registry's own rules for an id and a version
        if not callable(factory):
            raise TypeError(f"model factory {key} must be callable; got {factory!r}")
        checked[key] = factory
    token = _OVERRIDES.set({**(_OVERRIDES.get() or {}), **checked})
    try:
        yield
    finally:
        _OVERRIDES.reset(token)


def register_model_factory(id: str, version: int, factory: ModelFactory) -> None:
    """Register ``factory`` as model factory ``id`` at ``version`` for this process.

    ``factory(config)`` receives the spec's read-only JSON-like config and
    returns a fresh ``torch.nn.Module``. A later registration of the same
    (id, version) replaces it.
    """
    if not callable(factory):
        raise TypeError(f"register_model_factory needs a callable factory; got {factory!r}")
    _registry().register(id, version, factory)


def registered_model_factories() -> list[tuple[str, int]]:
    """Every model factory ``(id, version)`` registered in this process, sorted."""
    return _registry().registered()


def unregister_model_factory(id: str, version: int) -> None:
    """Forget model factory ``(id, version)`` for this process; KeyError naming it if
    unknown. A ModelSpec naming it then raises MissingModelFactoryError."""
    _registry().unregister(id, version, what="model factory")


def resolve_model_factory(spec: ModelSpec) -> ModelFactory:
    """The factory ``spec`` names; raises before any factory code runs when it is unknown."""
    if not isinstance(spec, ModelSpec):
        raise TypeError(f"resolve_model_factory needs a ModelSpec; got {type(spec).__name__}")
    override = (_OVERRIDES.get() or {}).get((spec.id, spec.version))
    if override is not None:
        return override
    found = _registry().require(
        spec.id, spec.version, what="model factory", error=MissingModelFactoryError,
        register=f"nnx.register_model_factory({spec.id!r}, {spec.version}, factory) before "
                 "building the model")
    factory: ModelFactory = found
    return factory


def build_from_spec(spec: ModelSpec) -> nn.Module:
    """Resolve ``spec``'s factory, then call it with every RNG stream seeded from ``spec.seed``.

    Python's ``random``, NumPy's global stream and torch (CPU and CUDA) are
    seeded for the call and put back afterwards, so the same spec always
    initializes the same weights and the caller's streams never shift.
    """
    factory = resolve_model_factory(spec)
    saved = capture_rng_state()
    try:
        random.seed(spec.seed)
        np.random.seed(spec.seed)
        torch.manual_seed(spec.seed)  # CUDA streams too
        module = factory(spec.config)
    finally:
        restore_rng_state(saved)
    if not isinstance(module, nn.Module):
        raise ValueError(f"model factory {spec.label} returned {type(module).__name__}, not a "
                         f"torch.nn.Module")
    return module
