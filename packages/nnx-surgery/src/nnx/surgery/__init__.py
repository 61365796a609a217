"""nnx-surgery: topology surgery on NNx nets (spec §16).

``widen`` / ``deepen`` are function-preserving Net2Net edits (Chen, Goodfellow and
Shlens, ICLR 2016) on validated topologies; ``drop_layer`` removes a shape-preserving
Linear; ``low_rank_factorize`` replaces a Linear by its truncated SVD (core's
``nnx.low_rank`` op, exact at max rank); ``expand_embedding`` grows an ``nn.Embedding``
(on nnx-lm's ``TransformerNN``, its vocabulary: embedding, output head and params).
Each returns a fresh module and leaves its input untouched. widen, deepen and drop_layer
keep a FeedFwdNN's params aligned with its layers, so ``NNModel(net_params=new.params)``
rebuilds exactly the new net; ``low_rank_factorize`` given an ``NNModel`` returns a copy
with core's ``nnx.low_rank`` recipe recorded, so it trains and reloads (docs/surgery.md).
"""

from nnx.surgery.deepen import deepen
from nnx.surgery.drop import drop_layer
from nnx.surgery.embedding import expand_embedding
from nnx.surgery.errors import (
    DeepenSiteError,
    SurgeryBoundaryError,
    SurgeryError,
    SurgeryShapeError,
    SurgeryTargetError,
)
from nnx.surgery.low_rank import low_rank_factorize
from nnx.surgery.widen import widen

__nnx_skeleton__ = {"kind": "training"}

__all__ = [
    "DeepenSiteError",
    "SurgeryBoundaryError",
    "SurgeryError",
    "SurgeryShapeError",
    "SurgeryTargetError",
    "deepen",
    "drop_layer",
    "expand_embedding",
    "low_rank_factorize",
    "widen",
]
