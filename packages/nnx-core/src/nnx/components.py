"""Checkpointed component state (spec §14.1).

The public face of :mod:`nnx._engine.components`; the code lives there (docs/architecture.md).
"""

from nnx._engine.components import (
    Component as Component,
)
from nnx._engine.components import (
    ComponentRestoreError as ComponentRestoreError,
)
from nnx._engine.components import (
    ComponentSpec as ComponentSpec,
)
from nnx._engine.components import (
    check_components as check_components,
)
from nnx._engine.components import (
    collect_states as collect_states,
)
from nnx._engine.components import (
    discover_components as discover_components,
)
from nnx._engine.components import (
    is_component as is_component,
)
from nnx._engine.components import (
    restore_components as restore_components,
)

__all__ = [
    "Component",
    "ComponentRestoreError",
    "ComponentSpec",
    "check_components",
    "collect_states",
    "discover_components",
    "is_component",
    "restore_components",
]
