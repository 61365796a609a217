"""A topology-transform recipe: the ``example.scaled@v1`` op (the ``nnx.transforms``
entry point), in nnx-peft's LoRA pattern.

``model.apply_transform(scaled_recipe("linear", init=2.0))`` wraps each target
module as ``Sequential(target, ExampleScaler(init))``. The recipe is data: it enters
the run id and every checkpoint, and ``NNModel.from_checkpoint`` replays it through
the entry point (without this module imported first) before loading the weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from nnx.example_plugin.net import ExampleScaler
from nnx.extend import TransformRecipe, check_real, config_targets

__all__ = ["SCALED_OP", "SCALED_VERSION", "materialize_scaled", "scaled_recipe"]

SCALED_OP, SCALED_VERSION = "example.scaled", 1
_KEYS = ("targets", "init")


def scaled_recipe(*targets: str, init: float = 1.0) -> TransformRecipe:
    """The ``example.scaled`` v1 recipe for the dotted module paths ``targets``."""
    return TransformRecipe(SCALED_OP, SCALED_VERSION, {"targets": list(targets),
                                                      "init": init})


def materialize_scaled(net: nn.Module, config: Mapping[str, Any], *,
                       source: bool = True) -> None:
    """Wrap every target of ``net`` as ``Sequential(target, ExampleScaler(init))``.

    Everything is checked before the first change, so a refusal (ValueError) leaves
    the net as it was. Replay (``source=False``) builds the same layers: the scaler
    starts at ``init`` and draws from no RNG stream, and the checkpoint's weights are
    loaded afterwards.
    """
    label = f"{SCALED_OP}@v{SCALED_VERSION}"
    targets = config_targets(label, config, _KEYS)
    init = check_real(f"{label} init", config["init"])
    nested = [t for t in targets if any(t.startswith(f"{o}.") for o in targets)]
    if nested:
        raise ValueError(f"{label}: {nested} lie inside another target")
    modules = {}
    for target in targets:
        try:
            modules[target] = net.get_submodule(target)
        except AttributeError:
            raise ValueError(f"{label}: {target!r} names no submodule of the net") from None
    for target, module in modules.items():
        parent, _, name = target.rpartition(".")
        setattr(net.get_submodule(parent) if parent else net, name,
                nn.Sequential(module, ExampleScaler(init)))
