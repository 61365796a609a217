"""Named monitors (spec §6.4): one improvement rule for BEST, plateau and early stopping.

The public face of :mod:`nnx._contracts.monitors`; the code lives there (docs/architecture.md).
"""

from nnx._contracts.monitors import (
    MONITOR_SPLITS as MONITOR_SPLITS,
)
from nnx._contracts.monitors import (
    NATURAL_MIN as NATURAL_MIN,
)
from nnx._contracts.monitors import (
    MonitorRecord as MonitorRecord,
)
from nnx._contracts.monitors import (
    MonitorSpec as MonitorSpec,
)
from nnx._contracts.monitors import (
    MonitorTracker as MonitorTracker,
)
from nnx._contracts.monitors import (
    MonitorUnavailableError as MonitorUnavailableError,
)
from nnx._contracts.monitors import (
    check_monitor as check_monitor,
)
from nnx._contracts.monitors import (
    improved as improved,
)

__all__ = [
    "MONITOR_SPLITS",
    "NATURAL_MIN",
    "MonitorRecord",
    "MonitorSpec",
    "MonitorTracker",
    "MonitorUnavailableError",
    "check_monitor",
    "improved",
]
