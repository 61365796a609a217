"""Tiny data, models and loaders for test suites: nnx-core's and every add-on's.

The public face of :mod:`nnx._surface.testing`; the code lives there (docs/architecture.md).
"""

from nnx._surface.testing import (
    sgd as sgd,
)
from nnx._surface.testing import (
    tiny_batches as tiny_batches,
)
from nnx._surface.testing import (
    tiny_loader as tiny_loader,
)
from nnx._surface.testing import (
    tiny_model as tiny_model,
)
from nnx._surface.testing import (
    tiny_train_params as tiny_train_params,
)
from nnx._surface.testing import (
    weights as weights,
)

__all__ = [
    "sgd",
    "tiny_batches",
    "tiny_loader",
    "tiny_model",
    "tiny_train_params",
    "weights",
]
