"""nnx.prune (nnx-quantize): magnitude pruning with an exact sparsity and the 2:4 pattern
(spec §16). Both prune in place and, by default, leave the state_dict keys of the unpruned
net, so a pruned checkpoint loads into stock code under ``strict=True``. See
docs/quantize.md.
"""

from nnx.prune.errors import PruneError
from nnx.prune.magnitude import magnitude_prune
from nnx.prune.semi_structured import semi_structured_24

__nnx_skeleton__ = {"kind": "training"}

__all__ = ["PruneError", "magnitude_prune", "semi_structured_24"]
