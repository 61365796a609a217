"""Fine-tuning helpers (spec §7): freeze by glob, load foreign weights, export.

The public face of :mod:`nnx._engine.finetune`; the code lives there (docs/architecture.md).
"""

from nnx._engine.finetune import (
    LoadResult as LoadResult,
)
from nnx._engine.finetune import (
    export_state_dict as export_state_dict,
)
from nnx._engine.finetune import (
    freeze as freeze,
)
from nnx._engine.finetune import (
    frozen as frozen,
)
from nnx._engine.finetune import (
    load_pretrained as load_pretrained,
)
from nnx._engine.finetune import (
    unfreeze as unfreeze,
)

__all__ = [
    "LoadResult",
    "export_state_dict",
    "freeze",
    "frozen",
    "load_pretrained",
    "unfreeze",
]
