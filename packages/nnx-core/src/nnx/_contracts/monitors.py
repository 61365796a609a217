"""Named monitors (spec §6.4): the engine's side of one improvement rule.

:class:`MonitorSpec` and :func:`improved` — the rule BEST, plateau scheduling and
early stopping share — are configuration and live in :mod:`nnx.params.monitor`;
they are re-exported here for the engine. A :class:`MonitorTracker` applies a
spec epoch by epoch and returns each epoch's :class:`MonitorRecord`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nnx._foundation.records import MONITOR_DIRECTIONS as _DIRECTIONS
from nnx._foundation.records import MONITOR_SPLITS, MonitorRecord
from nnx._foundation.validation import check_choice
from nnx.params.monitor import NATURAL_MIN, MonitorSpec, check_monitor, improved

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


class MonitorUnavailableError(RuntimeError):
    """A monitored value was missing or non-finite under an ``"error"`` policy."""


class MonitorTracker:
    """Applies a monitor's rule and policies epoch by epoch, keeping the best value."""

    def __init__(self, spec: MonitorSpec, direction: str) -> None:
        if not isinstance(spec, MonitorSpec):
            raise ValueError(f"MonitorTracker needs a MonitorSpec; got {spec!r}")
        self.spec = spec
        self.direction = check_choice("MonitorTracker direction", direction, _DIRECTIONS)
        self._best: float | None = None

    @property
    def best(self) -> float | None:
        """The best finite value so far (None before the first)."""
        return self._best

    def _record(self, value: float | None, status: str, did_improve: bool) -> MonitorRecord:
        return MonitorRecord(
            metric=self.spec.metric, split=self.spec.split, direction=self.direction,
            min_delta=self.spec.min_delta, value=value, status=status, improved=did_improve,
        )

    def decide(self, value: float | None) -> MonitorRecord:
        """This epoch's decision for ``value`` (None when the summary lacks it)."""
        if value is None:
            if self.spec.on_missing == "error":
                raise MonitorUnavailableError(
                    f"monitor {self.spec.key} has no value this epoch (on_missing='error')"
                )
            return self._record(None, "missing", False)
        number = float(value)
        if not math.isfinite(number):
            if self.spec.on_nonfinite == "error":
                raise MonitorUnavailableError(
                    f"monitor {self.spec.key} is {number} this epoch (on_nonfinite='error')"
                )
            return self._record(number, "nonfinite", False)
        did_improve = improved(number, self._best, direction=self.direction,
                               min_delta=self.spec.min_delta)
        if did_improve:
            self._best = number
        return self._record(number, "ok", did_improve)

    def state_dict(self) -> dict[str, Any]:
        return {"metric": self.spec.metric, "split": self.spec.split,
                "direction": self.direction, "best": self._best}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a saved tracker; refuses one that monitored something else."""
        mine = self.state_dict()
        differing = [k for k in ("metric", "split", "direction") if state.get(k) != mine[k]]
        if differing:
            detail = ", ".join(f"{k}: saved {state.get(k)!r}, now {mine[k]!r}"
                               for k in differing)
            raise ValueError(f"cannot continue monitor {self.spec.key}: {detail}")
        best = state.get("best")
        self._best = None if best is None else float(best)
