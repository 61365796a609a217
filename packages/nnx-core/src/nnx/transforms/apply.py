"""Materializing recipes on a model, and replaying a checkpoint's recipes (spec §4.2).

``apply_transform`` runs a recipe on a live model (``source=True``) and
records it on ``model.transforms``, from where the training loop puts it in
the run id and every checkpoint. ``NNModel.from_checkpoint`` replays the
recorded recipes (``source=False``) on the freshly built base before any
weight is loaded: :func:`checkpoint_recipes` resolves them all first, so an
unknown one fails without building or loading anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from nnx.models import MissingModelFactoryError, RuntimeModule
from nnx.transforms.recipe import TransformRecipe
from nnx.transforms.registry import TransformCompatibilityError, resolve_transform

if TYPE_CHECKING:
    from nnx._surface.model import NNModel

__all__ = ["apply_transform", "checkpoint_recipes", "refuse_runtime", "replay_transforms"]


def refuse_runtime(net: Any, what: str) -> None:
    """MissingModelFactoryError for a runtime module: nothing could replay a recipe on it."""
    if isinstance(net, RuntimeModule):
        raise MissingModelFactoryError(
            f"{what}: this model wraps a runtime module ({net.module}, reconstructible=False); "
            f"no factory can rebuild its base, so a transform recipe on it could never be "
            f"replayed from a checkpoint; register a model factory and use a ModelSpec")


def apply_transform(model: NNModel, recipe: TransformRecipe) -> None:
    """Materialize ``recipe`` on ``model.net`` and append it to ``model.transforms``.

    Every refusal (a runtime module, an unknown op, a config the op rejects)
    happens before the net changes.
    """
    if not isinstance(recipe, TransformRecipe):
        raise TypeError(f"apply_transform needs a TransformRecipe; got {type(recipe).__name__}")
    refuse_runtime(model.params.net, f"apply_transform({recipe.label})")
    materialize = resolve_transform(recipe)
    materialize(model.net, recipe.config, source=True)
    model.transforms = (*model.transforms, recipe)


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


def replay_transforms(model: NNModel, recipes: Sequence[TransformRecipe]) -> None:
    """Rebuild ``recipes``' topology on ``model.net`` (no weights read) and record them."""
    if recipes:
        refuse_runtime(model.params.net, "replaying the checkpoint's transforms")
    for i, recipe in enumerate(recipes):
        try:
            resolve_transform(recipe)(model.net, recipe.config, source=False)
        except ValueError as exc:
            raise TransformCompatibilityError(
                f"checkpoint transforms[{i}] ({recipe.label}) does not fit the rebuilt net: "
                f"{exc}; nothing was loaded") from None
    model.transforms = tuple(recipes)
