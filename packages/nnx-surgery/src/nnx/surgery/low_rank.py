"""``low_rank_factorize``: a Linear replaced by its truncated SVD (spec §16).

This is core's ``nnx.low_rank`` op run on a copy, so the factors are exactly what a
recorded ``TransformRecipe("nnx.low_rank", 1, ...)`` builds: ``up @ down`` is the rank-``k``
truncation of the weight (computed in float64), whose Frobenius distance to the weight
is ``sqrt(sum_{i>k} s_i^2)`` (Eckart–Young), and the weight itself at
``k = min(in, out)``.

Given an ``NNModel`` it returns a copy of the model with that recipe applied and
recorded: the params keep building a plain Linear (the widths do not change), so only
the recipe can tell ``train`` and ``from_checkpoint`` which net the model holds.
"""

from __future__ import annotations

import copy
from typing import TypeVar, overload

from torch import nn

from nnx import MissingModelFactoryError, NNModel, RuntimeModule, TransformRecipe
from nnx.extend import check_count, materialize_low_rank
from nnx.surgery.errors import SurgeryShapeError, SurgeryTargetError
from nnx.surgery.sites import find_module

__all__ = ["low_rank_factorize"]

M = TypeVar("M", bound=NNModel)


@overload
def low_rank_factorize(net: M, *, layer_name: str, rank: int) -> M: ...


@overload
def low_rank_factorize(net: nn.Module, *, layer_name: str, rank: int) -> nn.Module: ...


def low_rank_factorize(net: nn.Module | NNModel, *, layer_name: str,
                       rank: int) -> nn.Module | NNModel:
    """A copy of ``net`` whose ``nn.Linear`` ``layer_name`` is a ``LowRankLinear`` of
    rank ``rank`` (``down``: in → rank without bias, ``up``: rank → out with the bias).

    The factors keep the weight's requires_grad (the bias keeps its own) and the
    Linear's train/eval mode. A FeedFwdNN's params do not change (its hidden widths
    are the same). Given an ``NNModel`` (``layer_name`` names a module of its ``net``),
    it returns a copy of the model (same class) with the factorization applied as
    core's recorded recipe ``TransformRecipe("nnx.low_rank", 1, {"targets":
    [layer_name], "rank": rank})``, so the copy trains, checkpoints and reloads
    through ``NNModel.from_checkpoint`` (docs/surgery.md).
    Refusals, before anything is copied: SurgeryTargetError (no such module, not
    exactly an ``nn.Linear``, aliased or tied), SurgeryShapeError (``rank`` outside
    ``[1, min(in, out)]``), MissingModelFactoryError (a model wrapping a runtime
    module: no factory could replay the recipe from a checkpoint).
    """
    module = net.net if isinstance(net, NNModel) else net
    linear = find_module(module, layer_name, "low_rank_factorize")
    if type(linear) is not nn.Linear:
        raise SurgeryTargetError(f"low_rank_factorize: {layer_name!r} is a "
                                 f"{type(linear).__name__}, not an nn.Linear")
    rank = check_count("low_rank_factorize rank", rank)
    top = min(linear.in_features, linear.out_features)
    if rank > top:
        raise SurgeryShapeError(f"low_rank_factorize: rank {rank} is out of range for "
                                f"{layer_name!r} ({linear.in_features} → "
                                f"{linear.out_features}); it must be in [1, {top}]")
    config = {"targets": [layer_name], "rank": rank}
    if not isinstance(net, NNModel):
        out = copy.deepcopy(net)
        materialize_low_rank(out, config)
        return out
    # apply_transform would refuse this too, but only after the model was copied.
    if isinstance(net.params.net, RuntimeModule):
        raise MissingModelFactoryError(
            "low_rank_factorize: this model wraps a runtime module; no factory can rebuild "
            "its base, so the nnx.low_rank recipe could never be replayed from a checkpoint. "
            "Factorize model.net and train it as NNModel(module=...), or register a model "
            "factory and use a ModelSpec")
    model = copy.deepcopy(net)
    model.apply_transform(TransformRecipe("nnx.low_rank", 1, config))
    return model
