"""Named monitors (spec §6.4): one improvement rule for BEST, plateau and early stopping.

A :class:`MonitorSpec` names a split, a metric (``"loss"``, ``"error"`` or a
declared metric's name), a direction and a minimum improvement. Its
:meth:`MonitorSpec.improved` is the single rule every consumer applies: the
first finite value improves; a later one must beat the best by more than
``min_delta`` (``current < best - min_delta`` for "min", the same comparison
an absolute-threshold ReduceLROnPlateau makes); ties and non-finite values
never improve. A :class:`MonitorTracker` applies it epoch by epoch and
returns each epoch's :class:`MonitorRecord`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nnx._foundation.config_base import Params, set_field
from nnx._foundation.records import MONITOR_DIRECTIONS as _DIRECTIONS
from nnx._foundation.records import MONITOR_SPLITS, MonitorRecord, NNEvaluationDataPoint
from nnx._foundation.validation import NON_NEGATIVE, check_choice, check_real

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

#: The record's own control values; lower is better for both.
NATURAL_MIN = ("loss", "error")
_POLICIES = ("skip", "error")


class MonitorUnavailableError(RuntimeError):
    """A monitored value was missing or non-finite under an ``"error"`` policy."""


def improved(current: float | None, best: float | None, *, direction: str,
             min_delta: float = 0.0) -> bool:
    """The one improvement rule.

    A non-finite or missing ``current`` never improves; otherwise the first
    finite value (``best`` None) improves, and a later one must beat ``best`` by
    more than ``min_delta`` in ``direction`` — ties never improve.
    """
    check_choice("direction", direction, _DIRECTIONS)
    if current is None or not math.isfinite(current):
        return False
    if best is None or not math.isfinite(best):
        return True
    if direction == "min":
        return current < best - min_delta
    return current > best + min_delta


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorSpec(Params):
    """What a run selects on: ``MonitorSpec(metric="nll", split="val", min_delta=0.01)``.

    ``mode`` None takes the metric's natural direction (loss and error: "min").
    ``on_missing="skip"`` makes an epoch without a value a non-decision;
    ``on_nonfinite="skip"`` makes a NaN / ±inf value an epoch without
    improvement; ``"error"`` raises :class:`MonitorUnavailableError` instead.
    """

    metric: str = "loss"
    split: str = "val"
    mode: str | None = None
    min_delta: float = 0.0
    on_missing: str = "skip"
    on_nonfinite: str = "skip"

    def __post_init__(self) -> None:
        if not isinstance(self.metric, str) or not self.metric:
            raise ValueError(
                f"MonitorSpec.metric must be 'loss', 'error' or a declared metric's name; "
                f"got {self.metric!r}"
            )
        check_choice("MonitorSpec.split", self.split, MONITOR_SPLITS)
        if self.mode is not None:
            check_choice("MonitorSpec.mode", self.mode, _DIRECTIONS)
        set_field(self, "min_delta",
                  check_real("MonitorSpec.min_delta", self.min_delta, NON_NEGATIVE))
        check_choice("MonitorSpec.on_missing", self.on_missing, _POLICIES)
        check_choice("MonitorSpec.on_nonfinite", self.on_nonfinite, _POLICIES)

    @property
    def key(self) -> str:
        """``<split>.<metric>``, as loggers name the monitor series."""
        return f"{self.split}.{self.metric}"

    def read(self, edp: NNEvaluationDataPoint | None) -> float | None:
        """The monitored value of this split's record (None when it is absent or empty).

        Pass the epoch's ``val_edp`` for split "val" and its ``train_summary`` for
        split "train"; declared metrics are read from ``edp.metrics``.
        """
        if edp is None or edp.status == "empty":
            return None
        return edp.value(self.metric)

    def direction(self, metric_modes: Mapping[str, str] | None = None) -> str:
        """``mode``, or the metric's natural direction.

        ``metric_modes`` maps declared metric names to their registered mode
        (:func:`nnx.metrics.metric_modes`); loss and error are always "min".
        """
        if self.mode is not None:
            return self.mode
        if self.metric in NATURAL_MIN:
            return "min"
        modes = metric_modes or {}
        if self.metric not in modes:
            raise ValueError(
                f"MonitorSpec(metric={self.metric!r}) has no natural direction: it is not a "
                f"declared metric ({_names(modes)}); declare it or set mode='min' / 'max'"
            )
        return check_choice(f"mode of metric {self.metric!r}", modes[self.metric], _DIRECTIONS)

    def improved(self, current: float | None, best: float | None, *,
                 direction: str | None = None) -> bool:
        """The one rule, in this monitor's direction and with its ``min_delta``.

        ``direction`` is needed only when ``mode`` is None and the metric is a
        declared one (pass :meth:`direction`'s result).
        """
        resolved = direction if direction is not None else self.direction()
        return improved(current, best, direction=resolved, min_delta=self.min_delta)


def _names(names: Iterable[str]) -> str:
    listed = sorted(names)
    return "declared: " + ", ".join(repr(n) for n in listed) if listed else "none declared"


def check_monitor(spec: MonitorSpec, declared_metric_names: Iterable[str]) -> None:
    """Refuse a monitor of a metric the run does not declare (at params construction)."""
    if not isinstance(spec, MonitorSpec):
        raise ValueError(f"monitor must be a MonitorSpec; got {spec!r}")
    declared = set(declared_metric_names)
    if spec.metric in NATURAL_MIN or spec.metric in declared:
        return
    raise ValueError(
        f"MonitorSpec(metric={spec.metric!r}) names no declared metric ({_names(declared)}); "
        f"monitor 'loss', 'error' or declare MetricSpec({spec.metric!r}) in metrics="
    )


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
