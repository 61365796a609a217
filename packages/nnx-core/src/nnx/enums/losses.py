"""Losses: ``Losses.CROSS_ENTROPY()`` → ``nn.CrossEntropyLoss()``.

Keyword arguments pass straight to the torch module (class weights,
``ignore_index``, ``reduction``, ``pos_weight`` …), which stays authoritative.
``BINARY_CROSS_ENTROPY`` is the logits form (``BCEWithLogitsLoss``) because
built-in nets return raw logits.
"""

from __future__ import annotations

import enum
import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

# torch is imported on first use, not at import: ``nnx runs show`` renders a run's typed
# configuration (these members) and must run without torch (docs/architecture.md).


class Losses(enum.Enum):
    CROSS_ENTROPY = "cross_entropy"
    NEGATIVE_LOG_LIKELIHOOD = "negative_log_likelihood"
    BINARY_CROSS_ENTROPY = "binary_cross_entropy"
    MEAN_SQUARED_ERROR = "mean_squared_error"
    MEAN_ABSOLUTE_ERROR = "mean_absolute_error"
    SMOOTH_L1 = "smooth_l1"
    HUBER = "huber"

    def __call__(self, **kwargs: Any) -> nn.Module:
        return _modules()[self](**kwargs)

    @property
    def is_classification(self) -> bool:
        return self in (Losses.CROSS_ENTROPY, Losses.NEGATIVE_LOG_LIKELIHOOD)

    @property
    def is_regression(self) -> bool:
        return self in (
            Losses.MEAN_SQUARED_ERROR,
            Losses.MEAN_ABSOLUTE_ERROR,
            Losses.SMOOTH_L1,
            Losses.HUBER,
        )


@functools.cache
def _modules() -> dict[Losses, type[nn.Module]]:
    from torch import nn

    return {
        Losses.CROSS_ENTROPY: nn.CrossEntropyLoss,
        Losses.NEGATIVE_LOG_LIKELIHOOD: nn.NLLLoss,
        Losses.BINARY_CROSS_ENTROPY: nn.BCEWithLogitsLoss,
        Losses.MEAN_SQUARED_ERROR: nn.MSELoss,
        Losses.MEAN_ABSOLUTE_ERROR: nn.L1Loss,
        Losses.SMOOTH_L1: nn.SmoothL1Loss,
        Losses.HUBER: nn.HuberLoss,
    }
