"""Tiny data, models and loaders for test suites, and the add-on conformance check.

The public face of :mod:`nnx._surface.testing` (the tiny fixtures) and
:mod:`nnx._surface.conformance` (:func:`check_distribution`, which every
distribution's tests call); the code lives there (docs/architecture.md). The pytest
plugin :mod:`nnx._surface.pytest_plugin` ships beside them (docs/extending.md).
"""

from nnx._surface.conformance import (
    check_distribution as check_distribution,
)
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
    "check_distribution",
    "sgd",
    "tiny_batches",
    "tiny_loader",
    "tiny_model",
    "tiny_train_params",
    "weights",
]
