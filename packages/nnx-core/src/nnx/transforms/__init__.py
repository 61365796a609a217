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
"""

from nnx.transforms.apply import (
    apply_transform,
    checkpoint_recipes,
    refuse_runtime,
    replay_transforms,
)
from nnx.transforms.live import LiveTopologyError, RecognizingTransform
from nnx.transforms.low_rank import LowRankLinear, materialize_low_rank
from nnx.transforms.recipe import TransformRecipe, config_targets
from nnx.transforms.registry import (
    TransformCompatibilityError,
    TransformOp,
    register_transform,
    registered_transforms,
    resolve_transform,
    unregister_transform,
)

__all__ = [
    "LiveTopologyError",
    "LowRankLinear",
    "RecognizingTransform",
    "TransformCompatibilityError",
    "TransformOp",
    "TransformRecipe",
    "apply_transform",
    "checkpoint_recipes",
    "config_targets",
    "materialize_low_rank",
    "refuse_runtime",
    "register_transform",
    "registered_transforms",
    "replay_transforms",
    "resolve_transform",
    "unregister_transform",
]
