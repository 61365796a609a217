"""Topology-transform recipes (spec §4.2): versioned, replayable module surgery.

A :class:`TransformRecipe` names a transform op registered under
``(op, version)`` (:func:`register_transform`, or the ``nnx.transforms``
entry-point group, named ``op@vN``) with its JSON-like config.
``NNModel.apply_transform(recipe)`` materializes it and records it on the
model; the run id and every checkpoint carry it, and
``NNModel.from_checkpoint`` replays it on the rebuilt base before loading the
weights. Core ships ``nnx.low_rank`` v1 (:mod:`nnx.transforms.low_rank`).

A net changed in place after its params built it (an adapter applied to
``model.net``) is recorded too: ``train`` asks the ops that are a
:class:`RecognizingTransform` for the recipes that reproduce the change
(:mod:`nnx.transforms.live`) and refuses a change none reproduces.

Each name is imported on first use (issue 38): a fit loads no op it does not replay.
"""

from typing import TYPE_CHECKING

from nnx._foundation.lazy_exports import lazy_package

#: name -> the module it is read from; the TYPE_CHECKING block below lists the same.
_EXPORTS: dict[str, str] = {
    "LiveTopologyError": "nnx.transforms.live",
    "LowRankLinear": "nnx.transforms.low_rank",
    "RecognizingTransform": "nnx.transforms.live",
    "TransformCompatibilityError": "nnx.transforms.registry",
    "TransformOp": "nnx.transforms.registry",
    "TransformRecipe": "nnx.transforms.recipe",
    "apply_transform": "nnx.transforms.apply",
    "checkpoint_recipes": "nnx.transforms.apply",
    "config_targets": "nnx.transforms.recipe",
    "materialize_low_rank": "nnx.transforms.low_rank",
    "refuse_runtime": "nnx.transforms.apply",
    "register_transform": "nnx.transforms.registry",
    "registered_transforms": "nnx.transforms.registry",
    "replay_transforms": "nnx.transforms.apply",
    "resolve_transform": "nnx.transforms.registry",
    "unregister_transform": "nnx.transforms.registry",
}

__all__ = sorted(_EXPORTS)

lazy_package(__name__)

if TYPE_CHECKING:
    from nnx.transforms.apply import apply_transform as apply_transform
    from nnx.transforms.apply import checkpoint_recipes as checkpoint_recipes
    from nnx.transforms.apply import refuse_runtime as refuse_runtime
    from nnx.transforms.apply import replay_transforms as replay_transforms
    from nnx.transforms.live import LiveTopologyError as LiveTopologyError
    from nnx.transforms.live import RecognizingTransform as RecognizingTransform
    from nnx.transforms.low_rank import LowRankLinear as LowRankLinear
    from nnx.transforms.low_rank import materialize_low_rank as materialize_low_rank
    from nnx.transforms.recipe import TransformRecipe as TransformRecipe
    from nnx.transforms.recipe import config_targets as config_targets
    from nnx.transforms.registry import TransformCompatibilityError as TransformCompatibilityError
    from nnx.transforms.registry import TransformOp as TransformOp
    from nnx.transforms.registry import register_transform as register_transform
    from nnx.transforms.registry import registered_transforms as registered_transforms
    from nnx.transforms.registry import resolve_transform as resolve_transform
    from nnx.transforms.registry import unregister_transform as unregister_transform
