"""``low_rank_factorize``: a Linear replaced by its truncated SVD (spec §16).

This is core's ``nnx.low_rank`` op run on a copy, so the factors are exactly what a
recorded ``TransformRecipe("nnx.low_rank", 1, ...)`` builds: ``up @ down`` is the rank-``k``
truncation of the weight (computed in float64), whose Frobenius distance to the weight
is ``sqrt(sum_{i>k} s_i^2)`` (Eckart–Young), and the weight itself at
``k = min(in, out)``.
"""

from __future__ import annotations

import copy

from torch import nn

from nnx.extend import check_count, materialize_low_rank
from nnx.surgery.errors import SurgeryShapeError, SurgeryTargetError
from nnx.surgery.sites import find_module

__all__ = ["low_rank_factorize"]


def low_rank_factorize(net: nn.Module, *, layer_name: str, rank: int) -> nn.Module:
    """A copy of ``net`` whose ``nn.Linear`` ``layer_name`` is a ``LowRankLinear`` of
    rank ``rank`` (``down``: in → rank without bias, ``up``: rank → out with the bias).

    The factors keep the weight's requires_grad (the bias keeps its own) and the
    Linear's train/eval mode. A FeedFwdNN's params do not change (its hidden widths
    are the same); an NNModel records the change as a recipe (docs/surgery.md).
    Refusals, before anything is copied: SurgeryTargetError (no such module, not
    exactly an ``nn.Linear``, aliased or tied), SurgeryShapeError (``rank`` outside
    ``[1, min(in, out)]``).
    """
    linear = find_module(net, layer_name, "low_rank_factorize")
    if type(linear) is not nn.Linear:
        raise SurgeryTargetError(f"low_rank_factorize: {layer_name!r} is a "
                                 f"{type(linear).__name__}, not an nn.Linear")
    rank = check_count("low_rank_factorize rank", rank)
    top = min(linear.in_features, linear.out_features)
    if rank > top:
        raise SurgeryShapeError(f"low_rank_factorize: rank {rank} is out of range for "
                                f"{layer_name!r} ({linear.in_features} → "
                                f"{linear.out_features}); it must be in [1, {top}]")
    out = copy.deepcopy(net)
    materialize_low_rank(out, {"targets": [layer_name], "rank": rank})
    return out
