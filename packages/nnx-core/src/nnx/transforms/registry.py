"""The process registry of topology-transform ops (spec §4.2).

Ops live in the ``nnx.transforms`` versioned registry, so an add-on can also
announce one through an entry point named ``op@vN``. An op is a callable
``materialize(net, config, *, source=True) -> None`` that replaces submodules
of ``net`` in place:

* ``source=True`` transforms a live net (it may read its weights, e.g. SVD);
* ``source=False`` replays the recipe on a freshly built base: it must build
  exactly the same topology from ``config`` alone, because the weights are
  loaded afterwards.

It must check everything it needs before it changes the net, so a refusal
leaves the net as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from torch import nn

from nnx._foundation.plugins import VersionedRegistry, versioned_registry
from nnx.transforms.recipe import TransformRecipe

__all__ = [
    "TransformCompatibilityError",
    "TransformOp",
    "register_transform",
    "registered_transforms",
    "resolve_transform",
    "unregister_transform",
]


class TransformCompatibilityError(ValueError):
    """A recipe names an op this process cannot materialize, or cannot replay it here."""


class TransformOp(Protocol):
    def __call__(self, net: nn.Module, config: Mapping[str, Any], *,
                 source: bool = True) -> None: ...


def _registry() -> VersionedRegistry:
    return versioned_registry("nnx.transforms")


# Core's own op, nnx.low_rank@v1, is announced by nnx-core's pyproject in the
# nnx.transforms entry-point group, the path an add-on's op takes: an explicit
# register_transform still wins over it, and unregister_transform hides it.


def register_transform(op: str, version: int, materialize: TransformOp) -> None:
    """Register ``materialize`` as transform ``op`` at ``version`` for this process.

    A later registration of the same (op, version) replaces it.
    """
    if not callable(materialize):
        raise TypeError(f"register_transform needs a callable materialize; got {materialize!r}")
    _registry().register(op, version, materialize)


def registered_transforms() -> list[tuple[str, int]]:
    """Every transform ``(op, version)`` registered in this process (``nnx.low_rank``
    included), sorted."""
    return _registry().registered()


def unregister_transform(op: str, version: int) -> None:
    """Forget transform ``(op, version)`` for this process; KeyError naming it if unknown.
    A recipe naming it then raises TransformCompatibilityError."""
    _registry().unregister(op, version, what="transform")


def resolve_transform(recipe: TransformRecipe) -> TransformOp:
    """The op ``recipe`` names; TransformCompatibilityError before any op code runs."""
    if not isinstance(recipe, TransformRecipe):
        raise TypeError(f"resolve_transform needs a TransformRecipe; got "
                        f"{type(recipe).__name__}")
    found = _registry().require(
        recipe.op, recipe.version, what="transform", error=TransformCompatibilityError,
        register=f"nnx.register_transform({recipe.op!r}, {recipe.version}, materialize)")
    op: TransformOp = found
    return op
