"""Multi-process training on torch.distributed (DDP): ``model.train(params, distributed=DDP())``.

The public face of :mod:`nnx._engine.distributed`; the code lives there (docs/architecture.md).
"""

from nnx._engine.distributed import (
    DDP as DDP,
)
from nnx._engine.distributed import (
    DistributedSession as DistributedSession,
)
from nnx._engine.distributed import (
    MemoryHistory as MemoryHistory,
)

__all__ = [
    "DDP",
    "DistributedSession",
    "MemoryHistory",
]
