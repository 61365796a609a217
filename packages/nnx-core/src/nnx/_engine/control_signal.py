"""The epoch's control signal (spec §6.2, §6.4): the value that decides BEST and steps a
plateau schedule, and whether the epoch improved it.

With a named monitor (``params.monitor``) its :class:`MonitorTracker` decides; without
one the first finite of val error → val loss → train error → train loss does, against
the run's best score so far.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

from nnx._contracts.monitors import MonitorSpec, MonitorTracker
from nnx._foundation.records import MonitorRecord, NNIterationDataPoint, signal_walk
from nnx.metrics import metric_modes
from nnx.params.monitor import check_monitor_source

__all__ = ["epoch_signal", "monitor_tracker"]


def monitor_tracker(params: Any, metrics: Sequence[Any], *, custom_step: bool
                    ) -> MonitorTracker | None:
    """The tracker of ``params.monitor`` (None without one); refuses, before any run
    exists, a monitor this run cannot feed."""
    spec = params.monitor
    if spec is None:
        return None
    check_monitor_source(spec, params, who=f"{type(params).__name__}.monitor")
    if spec.split == "train" and spec.metric not in ("loss", "error") and custom_step:
        raise ValueError(f"MonitorSpec(metric={spec.metric!r}, split='train') needs the "
                         "default training step: a custom step or an objective records "
                         "no declared metric on training batches")
    return MonitorTracker(spec, spec.direction(metric_modes(metrics)))


def epoch_signal(idp: NNIterationDataPoint, *, monitor: MonitorSpec | None,
                 tracker: MonitorTracker | None, best_score: float
                 ) -> tuple[float | None, bool, MonitorRecord | None]:
    """(control value, improved?, monitor record) for the epoch's last record."""
    if tracker is None or monitor is None:
        found, rejected = signal_walk(idp)
        if rejected:  # NaN / ±inf is never a baseline: one warning per epoch (§6.2)
            names = ", ".join(f"{name}={value}" for name, value in rejected)
            used = "no finite value is available" if found is None else (
                f"using {found[0]}={found[1]}")
            warnings.warn(f"epoch {idp.epoch}: rejected non-finite control value(s) "
                          f"{names}; {used}", RuntimeWarning, stacklevel=3)  # the train() call
        score = math.inf if found is None else found[1]
        return (None if found is None else found[1]), score < best_score, None
    edp = idp.val_edp if monitor.split == "val" else idp.train_summary
    record = tracker.decide(monitor.read(edp))
    return record.value, record.improved, record
