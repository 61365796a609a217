"""The one optimizer build hook (spec §3.1, §7, §8.1).

The public face of :mod:`nnx._engine.optimizers`; the code lives there (docs/architecture.md).
"""

from nnx._engine.optimizers import (
    DEFAULT_GROUP as DEFAULT_GROUP,
)
from nnx._engine.optimizers import (
    MissingOptimizerFactoryError as MissingOptimizerFactoryError,
)
from nnx._engine.optimizers import (
    build_optimizer as build_optimizer,
)
from nnx._engine.optimizers import (
    build_param_groups as build_param_groups,
)
from nnx._engine.optimizers import (
    register_optimizer_factory as register_optimizer_factory,
)
from nnx._engine.optimizers import (
    registered_optimizer_factories as registered_optimizer_factories,
)
from nnx._engine.optimizers import (
    resolve_optimizer_factory as resolve_optimizer_factory,
)
from nnx._engine.optimizers import (
    unregister_optimizer_factory as unregister_optimizer_factory,
)

__all__ = [
    "DEFAULT_GROUP",
    "MissingOptimizerFactoryError",
    "build_optimizer",
    "build_param_groups",
    "register_optimizer_factory",
    "registered_optimizer_factories",
    "resolve_optimizer_factory",
    "unregister_optimizer_factory",
]
