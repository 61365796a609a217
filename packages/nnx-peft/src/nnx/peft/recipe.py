"""The nnx-peft topology-transform ops (spec §4.2): ``nnx.lora``, ``nnx.dora``, ``nnx.ia3``.

``NNModel.apply_transform(recipe)`` wraps each explicit target Linear and records the
recipe, so the run id and every checkpoint carry it and ``NNModel.from_checkpoint``
rebuilds the adapters before loading the weights. Replay (``source=False``) builds
the same wrappers drawing nothing from any RNG stream (LoRA's and DoRA's A and B
zeroed, DoRA's magnitude from the fresh base): the checkpoint's tensors overwrite
them right afterwards.

Configs (v1):

* ``nnx.lora`` / ``nnx.dora``: ``{"targets": [dotted Linear paths], "r": int,
  "alpha": float, "dropout": float}``;
* ``nnx.ia3``: ``{"targets": [...], "feedforward": [the targets whose input is
  scaled]}``.

Announced to nnx-core through ``nnx.transforms`` entry points (``nnx.lora@v1``,
``nnx.dora@v1``, ``nnx.ia3@v1`` in the pyproject), so a checkpoint replays without
importing nnx.peft first. :func:`lora_recipe` / :func:`dora_recipe` /
:func:`ia3_recipe` resolve ``apply_*_to``'s globs to the explicit targets.

Each op is a :class:`~nnx.extend.RecognizingTransform`: ``train`` on a net whose
adapters were applied in place (``apply_lora_to(model.net, ...)``) asks it for the
recipe that rebuilds them (:mod:`nnx.peft.live`) and records that as the run's recipe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from torch import nn

from nnx.extend import RecognizingTransform, TransformRecipe, config_targets
from nnx.peft.dora import DoRALinear
from nnx.peft.ia3 import IA3Linear, feedforward_patterns
from nnx.peft.live import (
    explain_ia3_weights,
    low_rank_explainer,
    low_rank_recognizer,
    recognize_ia3,
)
from nnx.peft.lora import LoRALinear, check_lora_args
from nnx.peft.targeting import Slot, replace_slots, select_linear_slots

__all__ = ["DORA_OP", "IA3_OP", "LORA_OP", "LORA_VERSION", "dora_recipe", "ia3_recipe",
           "lora_recipe", "materialize_dora", "materialize_ia3", "materialize_lora"]

LORA_OP, LORA_VERSION = "nnx.lora", 1
DORA_OP, IA3_OP = "nnx.dora", "nnx.ia3"
_LOW_RANK_KEYS = ("targets", "r", "alpha", "dropout")
_IA3_KEYS = ("targets", "feedforward")


def _target_slots(net: nn.Module, label: str, targets: tuple[str, ...]) -> list[Slot]:
    """Every target must name an unwrapped ``nn.Linear`` by one of its paths; the §11.1
    refusals apply, checked before the first wrapper is built."""
    slots = select_linear_slots(net, targets, what=label, exact=True)
    if len(slots) != len(targets):  # two targets were paths of one shared slot
        raise ValueError(f"{label}: targets {list(targets)} name {len(slots)} layers; name "
                         f"each shared layer once")
    return slots


def _low_rank_op(op: str, wrapper: type[LoRALinear]) -> Callable[..., None]:
    label = f"{op}@v1"

    def materialize(net: nn.Module, config: Mapping[str, Any], *, source: bool = True) -> None:
        targets = config_targets(label, config, _LOW_RANK_KEYS)
        r, alpha, dropout = check_lora_args(label, config["r"], config["alpha"],
                                            config["dropout"])
        slots = _target_slots(net, label, targets)
        replace_slots(slots, lambda linear: wrapper(linear, r, alpha, dropout,
                                                    init_weights=source))

    materialize.__name__ = materialize.__qualname__ = f"materialize_{op.split('.')[-1]}"
    materialize.__doc__ = (f"Wrap every target Linear of ``net`` in a {wrapper.__name__} "
                           f"(the registered ``{label}`` op).")
    return materialize


materialize_lora = RecognizingTransform(
    _low_rank_op(LORA_OP, LoRALinear), recognize=low_rank_recognizer(LoRALinear),
    explain_weights=low_rank_explainer(LoRALinear), recipe_api="nnx.lora_recipe")
materialize_dora = RecognizingTransform(
    _low_rank_op(DORA_OP, DoRALinear), recognize=low_rank_recognizer(DoRALinear),
    explain_weights=low_rank_explainer(DoRALinear), recipe_api="nnx.dora_recipe")


def _materialize_ia3(net: nn.Module, config: Mapping[str, Any], *, source: bool = True) -> None:
    """Wrap every target Linear of ``net`` in an IA3Linear, scaling the input of those in
    ``feedforward`` (the registered ``nnx.ia3@v1`` op). The scalings start at one, which
    draws from no RNG stream, so replay and a fresh application build the same layers."""
    label = f"{IA3_OP}@v1"
    targets = config_targets(label, config, _IA3_KEYS)
    feedforward = config["feedforward"]
    if (isinstance(feedforward, (str, bytes)) or not isinstance(feedforward, Sequence)
            or not set(feedforward) <= set(targets)):
        raise ValueError(f"{label} feedforward must be a list of some of the targets; got "
                         f"{feedforward!r}")
    slots = _target_slots(net, label, targets)
    ff = {id(s.module) for s in slots if any(p in feedforward for p in s.paths)}
    replace_slots(slots, lambda linear: IA3Linear(linear, feedforward=id(linear) in ff))


materialize_ia3 = RecognizingTransform(_materialize_ia3, recognize=recognize_ia3,
                                       explain_weights=explain_ia3_weights,
                                       recipe_api="nnx.ia3_recipe")


def _recipe_slots(what: str, net: nn.Module, patterns: Sequence[str]) -> list[Slot]:
    slots = select_linear_slots(net, patterns, what=what)
    if not slots:
        raise ValueError(f"{what}: {list(patterns)} select only already-adapted layers; "
                         f"a recipe needs plain nn.Linear targets")
    return slots


def _low_rank_recipe(what: str, op: str, net: nn.Module, patterns: Sequence[str], r: int,
                     alpha: float, dropout: float) -> TransformRecipe:
    rank, scale, drop = check_lora_args(what, r, alpha, dropout)
    slots = _recipe_slots(what, net, patterns)
    return TransformRecipe(op, 1, {"targets": [s.path for s in slots], "r": rank,
                                   "alpha": scale, "dropout": drop})


def lora_recipe(net: nn.Module, *patterns: str, r: int, alpha: float,
                dropout: float = 0.0) -> TransformRecipe:
    """The ``nnx.lora`` v1 recipe for the Linears ``patterns`` select in ``net`` (the
    globs of :func:`~nnx.peft.apply_lora_to`), resolved to explicit canonical paths.

    Nothing changes here; ``model.apply_transform(recipe)`` wraps them.
    ValueError for the same refusals as ``apply_lora_to``, and when the
    patterns select no unwrapped Linear.
    """
    return _low_rank_recipe("lora_recipe", LORA_OP, net, patterns, r, alpha, dropout)


def dora_recipe(net: nn.Module, *patterns: str, r: int, alpha: float,
                dropout: float = 0.0) -> TransformRecipe:
    """The ``nnx.dora`` v1 recipe, as :func:`lora_recipe` is LoRA's; a DoRA run's
    checkpoints then rebuild its DoRA layers (magnitude included) from the recipe."""
    return _low_rank_recipe("dora_recipe", DORA_OP, net, patterns, r, alpha, dropout)


def ia3_recipe(net: nn.Module, *patterns: str,
               feedforward: Sequence[str] | str = ()) -> TransformRecipe:
    """The ``nnx.ia3`` v1 recipe for the Linears ``patterns`` select (the globs of
    :func:`~nnx.peft.apply_ia3_to`, ``feedforward`` included), resolved to explicit
    canonical paths; the same refusals as ``apply_ia3_to``."""
    ff = feedforward_patterns(feedforward, what="ia3_recipe")
    slots = _recipe_slots("ia3_recipe", net, patterns)
    stray = [g for g in ff if not any(fnmatchcase(p, g) for s in slots for p in s.paths)]
    if stray:
        raise ValueError(f"ia3_recipe: feedforward pattern(s) {', '.join(map(repr, stray))} "
                         f"match none of the layers the target patterns select")
    return TransformRecipe(IA3_OP, 1, {
        "targets": [s.path for s in slots],
        "feedforward": [s.path for s in slots
                        if any(fnmatchcase(p, g) for p in s.paths for g in ff)]})
