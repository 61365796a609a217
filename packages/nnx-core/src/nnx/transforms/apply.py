"""Materializing recipes on a model, and replaying a checkpoint's recipes (spec §4.2).

``apply_transform`` runs a recipe on a live net (``source=True``) and returns
the recipes now materialized, which ``NNModel.apply_transform`` records on
``model.transforms``, from where the training loop puts them in the run id and
every checkpoint. ``NNModel.from_checkpoint`` replays the recorded recipes
(``source=False``) on the freshly built base before any weight is loaded:
:func:`checkpoint_recipes` resolves them all first, so an unknown one fails
without building or loading anything. Nothing here sets an attribute on a
model: the op replaces submodules of the net in place (the registry's
contract), and the caller stores the returned recipes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from torch import nn

from nnx.models import MissingModelFactoryError, RuntimeModule
from nnx.transforms.recipe import TransformRecipe, transform_states
from nnx.transforms.registry import TransformCompatibilityError, resolve_transform

__all__ = ["apply_transform", "checkpoint_recipes", "refuse_runtime", "replay_transforms",
           "train_end_transforms"]


def refuse_runtime(net: Any, what: str) -> None:
    """MissingModelFactoryError for a runtime module: nothing could replay a recipe on it."""
    if isinstance(net, RuntimeModule):
        raise MissingModelFactoryError(
            f"{what}: this model wraps a runtime module ({net.module}, reconstructible=False); "
            f"no factory can rebuild its base, so a transform recipe on it could never be "
            f"replayed from a checkpoint; register a model factory and use a ModelSpec")


def apply_transform(net: nn.Module, recipe: TransformRecipe, *, base: Any,
                    applied: Sequence[TransformRecipe] = ()) -> tuple[TransformRecipe, ...]:
    """Materialize ``recipe`` on ``net`` and return ``applied`` followed by it.

    ``base`` is the model's ``params.net`` (a runtime module is refused) and
    ``applied`` the recipes already materialized on ``net``. Every refusal (a
    runtime module, an unknown op, a config the op rejects) happens before the
    net changes.
    """
    if not isinstance(recipe, TransformRecipe):
        raise TypeError(f"apply_transform needs a TransformRecipe; got {type(recipe).__name__}")
    refuse_runtime(base, f"apply_transform({recipe.label})")
    materialize = resolve_transform(recipe)
    materialize(net, recipe.config, source=True)
    return (*applied, recipe)


def checkpoint_recipes(states: Iterable[Any]) -> tuple[TransformRecipe, ...]:
    """The recipes a checkpoint records, every one resolved; TransformCompatibilityError
    naming the index and id of the first that this process cannot replay."""
    recipes = []
    for i, state in enumerate(states):
        try:
            recipe = TransformRecipe.from_state(state)
        except ValueError as exc:
            raise TransformCompatibilityError(
                f"checkpoint transforms[{i}] is not a transform recipe ({exc}); nothing was "
                f"loaded") from None
        try:
            resolve_transform(recipe)
        except TransformCompatibilityError as exc:
            raise TransformCompatibilityError(
                f"checkpoint transforms[{i}] ({recipe.label}) cannot be replayed: {exc}; "
                f"nothing was loaded") from None
        recipes.append(recipe)
    return tuple(recipes)


def replay_transforms(net: nn.Module, recipes: Sequence[TransformRecipe], *,
                      base: Any) -> tuple[TransformRecipe, ...]:
    """Rebuild ``recipes``' topology on ``net`` (no weights read) and return them, the
    recipes now materialized; ``base`` is the model's ``params.net``."""
    if recipes:
        refuse_runtime(base, "replaying the checkpoint's transforms")
    for i, recipe in enumerate(recipes):
        try:
            resolve_transform(recipe)(net, recipe.config, source=False)
        except ValueError as exc:
            raise TransformCompatibilityError(
                f"checkpoint transforms[{i}] ({recipe.label}) does not fit the rebuilt net: "
                f"{exc}; nothing was loaded") from None
    return tuple(recipes)


def train_end_transforms(callbacks: Sequence[Any], model: Any,
                         recorded: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
    """The recipes the final LAST records: ``recorded`` (the run's, as its id holds them),
    followed by those a callback that declares ``checkpoint_transforms`` (the op ids it
    may materialize at train end, e.g. QATLifecycleCallback's conversion) appended to
    ``model.transforms`` in ``on_train_end``. Anything else changed there is refused
    (TransformCompatibilityError): the final LAST would describe a net it does not hold."""
    now = transform_states(model)
    if now == recorded:
        return recorded
    declared = {op for cb in callbacks for op in (getattr(cb, "checkpoint_transforms", None)
                                                  or ())}
    added = now[len(recorded):]
    if now[:len(recorded)] != recorded or any(t["op"] not in declared for t in added):
        raise TransformCompatibilityError(
            f"model.transforms changed during training to {list(now)} from {list(recorded)}; "
            f"only a callback's declared checkpoint_transforms ({sorted(declared)}) may "
            f"append recipes, in on_train_end; the final LAST was not written")
    return now
