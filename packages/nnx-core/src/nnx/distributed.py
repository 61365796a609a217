"""Training across processes on torch.distributed: ``model.train(params, distributed=DDP())``
(a replica per rank) or ``distributed=FSDP()`` (the model sharded over the ranks, FSDP2).

The public face of :mod:`nnx._engine.distributed` and :mod:`nnx._engine.fsdp`; the code lives
there (docs/architecture.md).
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
from nnx._engine.fsdp import (
    FSDP as FSDP,
)
from nnx._engine.fsdp import (
    FSDPSession as FSDPSession,
)
from nnx._engine.fsdp import (
    FSDPUnsupportedError as FSDPUnsupportedError,
)

__all__ = [
    "DDP",
    "FSDP",
    "DistributedSession",
    "FSDPSession",
    "FSDPUnsupportedError",
    "MemoryHistory",
]
