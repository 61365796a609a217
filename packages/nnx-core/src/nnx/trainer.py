"""Trainer: one model, several named optimizers (spec §8, §8.1–§8.4).

The public face of :mod:`nnx._surface.trainer`; the code lives there (docs/architecture.md).
"""

from nnx._surface.trainer import (
    Trainer as Trainer,
)
from nnx._surface.trainer import (
    TrainerStepContext as TrainerStepContext,
)

__all__ = [
    "Trainer",
    "TrainerStepContext",
]
