"""The ``nnx.lora`` v1 topology-transform op (spec §4.2) and :func:`lora_recipe`.

Config: ``{"targets": [explicit dotted Linear paths], "r": int, "alpha": float,
"dropout": float}``. ``NNModel.apply_transform(recipe)`` wraps each target in
a :class:`LoRALinear` and records the recipe, so the run id and every
checkpoint carry it and ``NNModel.from_checkpoint`` rebuilds the adapters
before loading the weights. Replay (``source=False``) builds the same
wrappers with A and B zeroed, drawing nothing from any RNG stream: the
checkpoint's tensors overwrite them right afterwards.

Announced to nnx-core through the ``nnx.transforms`` entry point
``nnx.lora@v1`` (pyproject), so a checkpoint replays without importing
nnx.peft first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from torch import nn

from nnx.peft.lora import LoRALinear, check_lora_args
from nnx.peft.targeting import replace_slots, select_linear_slots
from nnx.transforms import TransformRecipe

__all__ = ["LORA_OP", "LORA_VERSION", "lora_recipe", "materialize_lora"]

LORA_OP, LORA_VERSION = "nnx.lora", 1
_LABEL = f"{LORA_OP}@v{LORA_VERSION}"
_KEYS = {"targets", "r", "alpha", "dropout"}


def _parse(config: Mapping[str, Any]) -> tuple[tuple[str, ...], int, float, float]:
    if not isinstance(config, Mapping) or set(config) != _KEYS:
        keys = sorted(config) if isinstance(config, Mapping) else type(config).__name__
        raise ValueError(f"{_LABEL} config must have exactly 'targets', 'r', 'alpha' and "
                         f"'dropout'; got {keys}")
    targets = config["targets"]
    if (isinstance(targets, (str, bytes)) or not isinstance(targets, Sequence) or not targets
            or not all(isinstance(t, str) and t for t in targets)):
        raise ValueError(f"{_LABEL} targets must be a non-empty list of dotted module names; "
                         f"got {targets!r}")
    repeated = sorted(t for t, n in Counter(targets).items() if n > 1)
    if repeated:
        raise ValueError(f"{_LABEL} names a target more than once: {repeated}")
    r, alpha, dropout = check_lora_args(_LABEL, config["r"], config["alpha"], config["dropout"])
    return tuple(targets), r, alpha, dropout


def materialize_lora(net: nn.Module, config: Mapping[str, Any], *, source: bool = True) -> None:
    """Wrap every target Linear of ``net`` in a LoRALinear (the registered op).

    Every target must name an unwrapped ``nn.Linear`` by one of its paths;
    the §11.1 refusals apply, and everything is checked before the first
    wrapper is built.
    """
    targets, r, alpha, dropout = _parse(config)
    slots = select_linear_slots(net, targets, what=_LABEL, exact=True)
    if len(slots) != len(targets):  # two targets were paths of one shared slot
        raise ValueError(f"{_LABEL}: targets {list(targets)} name {len(slots)} layers; name "
                         f"each shared layer once")
    replace_slots(slots, lambda linear: LoRALinear(linear, r, alpha, dropout,
                                                   init_weights=source))


def lora_recipe(net: nn.Module, *patterns: str, r: int, alpha: float,
                dropout: float = 0.0) -> TransformRecipe:
    """The ``nnx.lora`` v1 recipe for the Linears ``patterns`` select in ``net`` (the
    globs of :func:`~nnx.peft.apply_lora_to`), resolved to explicit canonical paths.

    Nothing changes here; ``model.apply_transform(recipe)`` wraps them.
    ValueError for the same refusals as ``apply_lora_to``, and when the
    patterns select no unwrapped Linear.
    """
    rank, scale, drop = check_lora_args("lora_recipe", r, alpha, dropout)
    slots = select_linear_slots(net, patterns, what="lora_recipe")
    if not slots:
        raise ValueError(f"lora_recipe: {list(patterns)} select only already-adapted layers; "
                         f"a recipe needs plain nn.Linear targets")
    return TransformRecipe(LORA_OP, LORA_VERSION, {
        "targets": [s.path for s in slots], "r": rank, "alpha": scale, "dropout": drop})
