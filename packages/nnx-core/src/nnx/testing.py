"""Tiny data, models and loaders for test suites, the add-on conformance check, and the
pytest plugin every nnx distribution's tests run with (``-p nnx.testing``).

The public face of :mod:`nnx._surface.testing` (the tiny fixtures),
:mod:`nnx._surface.kill_points` (kill points of a writer, for crash-safety tests),
:mod:`nnx._surface.conformance` (:func:`check_distribution`, which every
distribution's tests call) and :mod:`nnx._surface.pytest_plugin` (its two hooks, so
``-p nnx.testing`` loads the plugin); the code lives there (docs/architecture.md,
docs/extending.md).
"""

from nnx._surface.conformance import (
    check_distribution as check_distribution,
)
from nnx._surface.kill_points import (
    fork_action as fork_action,
)
from nnx._surface.kill_points import (
    writer_kill_points as writer_kill_points,
)
from nnx._surface.pytest_plugin import (
    pytest_ignore_collect as pytest_ignore_collect,
)
from nnx._surface.pytest_plugin import (
    pytest_load_initial_conftests as pytest_load_initial_conftests,
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
    "fork_action",
    "sgd",
    "tiny_batches",
    "tiny_loader",
    "tiny_model",
    "tiny_train_params",
    "weights",
    "writer_kill_points",
]
