"""MonitorSpec (spec §6.4): what a run selects on, and the one improvement rule.

A :class:`MonitorSpec` names a split, a metric (``"loss"``, ``"error"`` or a
declared metric's name), a direction and a minimum improvement. Its
:meth:`MonitorSpec.improved` is the single rule every consumer applies: the
first finite value improves; a later one must beat the best by more than
``min_delta`` (``current < best - min_delta`` for "min", the same comparison
an absolute-threshold ReduceLROnPlateau makes); ties and non-finite values
never improve. The spec is configuration (it is part of the run id), so it
lives here; the engine's :class:`nnx.monitors.MonitorTracker` applies it epoch
by epoch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

from nnx._foundation.config_base import Params, set_field
from nnx._foundation.records import MONITOR_DIRECTIONS as _DIRECTIONS
from nnx._foundation.records import MONITOR_SPLITS, NNEvaluationDataPoint
from nnx._foundation.validation import NON_NEGATIVE, check_choice, check_real

__all__ = ["NATURAL_MIN", "MonitorSpec", "check_monitor", "check_monitor_source", "improved"]

#: The record's own control values; lower is better for both.
NATURAL_MIN = ("loss", "error")
#: What a missing or non-finite monitored value does: skip the epoch or raise.
_POLICIES = ("skip", "error")


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


@dataclass(frozen=True, slots=True)
class MonitorSpec(Params):
    """What a run selects on: ``MonitorSpec("nll", split="val", min_delta=0.01)``.

    The metric is positional-or-keyword (``MonitorSpec("auroc")``, §24 / §26); the
    rest are keyword-only, so a bare second value never lands on the wrong field.

    ``mode`` None takes the metric's natural direction (loss and error: "min").
    ``on_missing="skip"`` makes an epoch without a value a non-decision;
    ``on_nonfinite="skip"`` makes a NaN / ±inf value an epoch without
    improvement; ``"error"`` raises :class:`nnx.monitors.MonitorUnavailableError`
    instead.
    """

    metric: str = "loss"
    _: KW_ONLY
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


def check_monitor_source(spec: MonitorSpec, params: Any, *, who: str = "a MonitorSpec") -> None:
    """Refuse, before training, a validation-split monitor of a run without a
    ``val_loader`` (§6.4): its every epoch would be missing, so BEST, plateau
    scheduling or early stopping would silently never decide. ``params`` is the
    run's NNTrainParams / NNTrainerParams; ``who`` names the monitor's owner."""
    if spec.split == "val" and getattr(params, "val_loader", None) is None:
        raise ValueError(
            f"{who} monitors the validation split ({spec.key}), but "
            f"{type(params).__name__}.val_loader is None: pass validation data, or monitor "
            f"the training split (split='train')")
