"""Task declarations (spec §6.3): categorical, multilabel and regression."""

from nnx.tasks.spec import TaskSpec

__all__ = ["TaskSpec"]
