"""Registered optimizer factories: register, resolve, construct, check (spec §3.1).

Factories live in the process-wide ``nnx.optimizer_factories`` versioned
registry, so an add-on can also announce one through an entry point named
``id@vN``. Resolving a spec never imports a module by name or evaluates a
string. :func:`nnx.optimizers.build_optimizer` is the one place that calls a
factory; this module only resolves it and checks what it returned.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from nnx._foundation.plugins import VersionedRegistry, versioned_registry
from nnx.params.optim_factory import NNOptimFactoryParams, OptimizerFactorySpec

__all__ = [
    "MissingOptimizerFactoryError",
    "OptimizerFactory",
    "call_optimizer_factory",
    "optimizer_factory_state",
    "register_optimizer_factory",
    "registered_optimizer_factories",
    "resolve_optimizer_factory",
    "unregister_optimizer_factory",
]

#: ``factory(param_groups, config) -> torch.optim.Optimizer``.
OptimizerFactory = Callable[[list[dict[str, Any]], Mapping[str, Any]], torch.optim.Optimizer]


class MissingOptimizerFactoryError(LookupError):
    """An OptimizerFactorySpec names an (id, version) nothing registered in this process."""


def _registry() -> VersionedRegistry:
    return versioned_registry("nnx.optimizer_factories")


def register_optimizer_factory(id: str, version: int, factory: OptimizerFactory) -> None:
    """Register ``factory`` as optimizer factory ``id`` at ``version`` for this process.

    ``factory(param_groups, config)`` receives the resolved groups (each with
    explicit ``params``, ``lr`` and ``weight_decay``) and the spec's read-only
    config, and returns a ``torch.optim.Optimizer`` holding exactly those
    parameters. A later registration of the same (id, version) replaces it.
    """
    if not callable(factory):
        raise TypeError(f"register_optimizer_factory needs a callable factory; got {factory!r}")
    _registry().register(id, version, factory)


def registered_optimizer_factories() -> list[tuple[str, int]]:
    """Every optimizer factory ``(id, version)`` registered in this process, sorted."""
    return _registry().registered()


def unregister_optimizer_factory(id: str, version: int) -> None:
    """Forget optimizer factory ``(id, version)`` for this process; KeyError naming it
    if unknown. Training a spec that names it then raises MissingOptimizerFactoryError."""
    _registry().unregister(id, version, what="optimizer factory")


def resolve_optimizer_factory(spec: OptimizerFactorySpec) -> OptimizerFactory:
    """The factory ``spec`` names; raises before any factory code runs when it is unknown."""
    if not isinstance(spec, OptimizerFactorySpec):
        raise TypeError(f"resolve_optimizer_factory needs an OptimizerFactorySpec; "
                        f"got {type(spec).__name__}")
    found = _registry().require(
        spec.id, spec.version, what="optimizer factory", error=MissingOptimizerFactoryError,
        register=f"nnx.register_optimizer_factory({spec.id!r}, {spec.version}, factory) before "
                 "training")
    factory: OptimizerFactory = found
    return factory


def call_optimizer_factory(
    spec: OptimizerFactorySpec, factory: OptimizerFactory, groups: list[dict[str, Any]],
    net: nn.Module,
) -> torch.optim.Optimizer:
    """Call ``factory`` once over ``groups`` and check it holds exactly their parameters."""
    expected = [p for group in groups for p in group["params"]]
    optimizer = factory(groups, spec.config)
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"optimizer factory {spec.label} returned {type(optimizer).__name__}, "
                         f"not a torch.optim.Optimizer")
    held_groups = getattr(optimizer, "param_groups", None)
    if not isinstance(held_groups, Sequence):
        raise ValueError(f"optimizer factory {spec.label} returned an optimizer without "
                         f"param_groups (did its __init__ call torch.optim.Optimizer's?)")
    held = [p for group in held_groups for p in group["params"]]
    problems = _ownership_problems(expected, held, net)
    if problems:
        raise ValueError(
            f"optimizer factory {spec.label} must return an optimizer holding exactly the "
            f"{len(expected)} parameter(s) it was given: {'; '.join(problems)}")
    return optimizer


def _ownership_problems(expected: list[Any], held: list[Any], net: nn.Module) -> list[str]:
    names = {id(p): name for name, p in net.named_parameters()}

    def show(p: Any) -> str:
        name = names.get(id(p))
        return name if name is not None else f"<{type(p).__name__} {tuple(p.shape)} not in the net>"

    counts = Counter(id(p) for p in held)
    wanted = {id(p) for p in expected}
    foreign = {id(p): p for p in held if id(p) not in wanted}
    problems = []
    missing = [show(p) for p in expected if id(p) not in counts]
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    duplicated = {id(p): p for p in held if counts[id(p)] > 1}
    if duplicated:
        problems.append(f"duplicated {', '.join(show(p) for p in duplicated.values())}")
    if foreign:
        problems.append(f"foreign {', '.join(show(p) for p in foreign.values())}")
    return problems


def optimizer_factory_state(optim: Any) -> dict[str, Any] | None:
    """The factory identity a checkpoint records: ``{id, version, config}``, or None."""
    return optim.factory.state() if isinstance(optim, NNOptimFactoryParams) else None
