"""The one optimizer build hook (spec §3.1, §7, §8.1).

``NNModel.train`` and ``Trainer.train`` both construct their optimizers
through :func:`build_optimizer`: non-strict for a single model (unmatched
trainable parameters join a default group), strict for the Trainer (each
optimizer owns only what its specs match). A registered factory
(:class:`NNOptimFactoryParams`) is resolved first, then receives exactly the
groups a built-in optimizer would.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

import torch
from torch import nn

from nnx._engine.optimizer_factories import (
    MissingOptimizerFactoryError,
    call_optimizer_factory,
    register_optimizer_factory,
    registered_optimizer_factories,
    resolve_optimizer_factory,
    unregister_optimizer_factory,
)
from nnx._foundation.validation import NON_NEGATIVE, check_real
from nnx.params.optim import NNOptimParams
from nnx.params.optim_factory import NNOptimFactoryParams, OptimConfig

__all__ = [
    "DEFAULT_GROUP",
    "MissingOptimizerFactoryError",
    "build_optimizer",
    "build_param_groups",
    "register_optimizer_factory",
    "registered_optimizer_factories",
    "resolve_optimizer_factory",
    "unregister_optimizer_factory",
]

#: The name of the group that collects unmatched parameters in non-strict mode.
DEFAULT_GROUP = "default"


def build_param_groups(
    net: nn.Module, optim_params: OptimConfig, *, strict: bool = False
) -> list[dict[str, Any]]:
    """Resolve ``optim_params.param_groups`` over ``net``'s trainable parameters.

    Returns torch param-group dicts with explicit ``params``, ``lr``,
    ``weight_decay`` and ``name`` (the matching pattern, or ``"default"``).
    Without specs, every parameter forms one group in either mode, frozen ones
    included (§3.1): a frozen parameter gets no gradient, so the optimizer skips
    it (weight decay too), and unfreezing it later trains it (gradual
    unfreezing, §6.5). At least one parameter must be trainable at build time.

    With specs, parameters frozen at build time are dropped. Each parameter goes
    to the first spec whose glob matches its dotted name; specs never merge.
    Non-strict: unmatched parameters form a default group at the optimizer's
    own rate and decay, and a spec matching nothing is silently empty. Strict:
    unmatched parameters are dropped, and a spec set matching nothing fails.
    """
    trainable = [(name, p) for name, p in net.named_parameters() if p.requires_grad]
    base_lr, base_wd = optim_params.max_lr, optim_params.weight_decay
    specs = optim_params.param_groups
    if specs is None:
        if not trainable:
            raise ValueError("build_optimizer: the network has no trainable parameters")
        return [_group(DEFAULT_GROUP, list(net.parameters()), base_lr, base_wd)]

    buckets: list[list[nn.Parameter]] = [[] for _ in specs]
    unmatched: list[nn.Parameter] = []
    for name, param in trainable:
        for i, spec in enumerate(specs):
            if fnmatchcase(name, spec.name_pattern):
                buckets[i].append(param)
                break
        else:
            unmatched.append(param)

    groups = []
    for spec, params in zip(specs, buckets, strict=True):
        if not params:
            continue
        lr = check_real(
            f"param group {spec.name_pattern!r} resolved lr", spec.resolve_lr(base_lr), NON_NEGATIVE
        )
        wd = base_wd if spec.weight_decay is None else spec.weight_decay
        groups.append(_group(spec.name_pattern, params, lr, wd))
    if strict:
        if not groups:
            patterns = ", ".join(repr(s.name_pattern) for s in specs)
            raise ValueError(
                f"build_optimizer (strict): param_groups {patterns} match no trainable "
                f"parameter; check the names against net.named_parameters()"
            )
        return groups
    if unmatched:
        groups.append(_group(DEFAULT_GROUP, unmatched, base_lr, base_wd))
    if not groups:
        raise ValueError("build_optimizer: the network has no trainable parameters")
    return groups


def _group(name: str, params: list[Any], lr: float, weight_decay: float) -> dict[str, Any]:
    return {"params": params, "lr": lr, "weight_decay": weight_decay, "name": name}


def build_optimizer(
    net: nn.Module, optim_params: OptimConfig, *, strict_param_groups: bool = False
) -> torch.optim.Optimizer:
    """Construct the optimizer ``optim_params`` describes over ``net``.

    A registered factory is resolved before anything else (an unknown one raises
    :class:`MissingOptimizerFactoryError`), called once with the resolved groups
    and its read-only config, and must return a ``torch.optim.Optimizer``
    holding exactly those parameters (``ValueError`` otherwise).
    """
    if isinstance(optim_params, NNOptimFactoryParams):
        factory = resolve_optimizer_factory(optim_params.factory)
        groups = build_param_groups(net, optim_params, strict=strict_param_groups)
        return call_optimizer_factory(optim_params.factory, factory, groups, net)
    if not isinstance(optim_params, NNOptimParams):
        raise TypeError(
            f"build_optimizer needs an NNOptimParams or NNOptimFactoryParams; "
            f"got {type(optim_params).__name__}"
        )
    groups = build_param_groups(net, optim_params, strict=strict_param_groups)
    return optim_params.name.build(
        groups,
        lr=optim_params.max_lr,
        momentum=optim_params.momentum,
        weight_decay=optim_params.weight_decay,
        eps=optim_params.eps,
    )
