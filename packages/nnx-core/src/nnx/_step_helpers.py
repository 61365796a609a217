"""finalize_step: how an imperative paradigm step finishes its update (spec §6.1, §2.5).

The public face of :mod:`nnx._engine.step_helpers`; the code lives there (docs/architecture.md).
"""

from nnx._engine.step_helpers import (
    FinalizedStep as FinalizedStep,
)
from nnx._engine.step_helpers import (
    finalize_step as finalize_step,
)
from nnx._engine.step_helpers import (
    full_precision_only as full_precision_only,
)
from nnx._engine.step_helpers import (
    is_full_precision_only as is_full_precision_only,
)
from nnx._engine.step_helpers import (
    train_mode as train_mode,
)

__all__ = [
    "FinalizedStep",
    "finalize_step",
    "full_precision_only",
    "is_full_precision_only",
    "train_mode",
]
