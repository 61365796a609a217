"""Checkpointed component state (spec §14.1).

The public face of :mod:`nnx._contracts.components`; the code lives there (docs/architecture.md).
"""

from nnx._contracts.components import (
    Component as Component,
)
from nnx._contracts.components import (
    ComponentRestoreError as ComponentRestoreError,
)
from nnx._contracts.components import (
    ComponentSpec as ComponentSpec,
)
from nnx._contracts.components import (
    check_components as check_components,
)
from nnx._contracts.components import (
    collect_states as collect_states,
)
from nnx._contracts.components import (
    discover_components as discover_components,
)
from nnx._contracts.components import (
    is_component as is_component,
)
from nnx._contracts.components import (
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
