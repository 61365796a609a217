"""EarlyStopping (spec §5, §6.2): stop when a validation signal stops improving.

``monitor=None`` picks, once per run, the first finite of ``val_edp.error`` →
``val_edp.loss`` and keeps it (``selected_monitor``). An explicit key reads
exactly that field; a declared :class:`~nnx.monitors.MonitorSpec` applies the
run's monitor rule. A missing value is not counted toward patience (one
RuntimeWarning per run says so); a NaN / ±inf value counts as an epoch
without improvement, so a diverged run still stops. With ``monitor=None`` that
holds before any field is selected too: a present but non-finite validation
error or loss counts, and only a truly absent one is "missing".
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from nnx._contracts.components import ComponentSpec
from nnx._contracts.monitors import MonitorTracker
from nnx._foundation.validation import NON_NEGATIVE, check_count, check_real
from nnx.callbacks.base import Callback, CallbackContext
from nnx.metrics import metric_modes
from nnx.params.monitor import MonitorSpec, check_monitor_source

__all__ = ["MONITOR_KEYS", "EarlyStopping"]

MONITOR_KEYS = ("val_edp.error", "val_edp.loss", "train_edp.error", "train_edp.loss")


def _read(idp: Any, key: str) -> tuple[bool, float | None]:
    """(present, value) of ``"<split>_edp.<field>"`` on the epoch's last record."""
    split, field = key.split(".")
    edp = None if idp is None else getattr(idp, split)
    value = None if edp is None else getattr(edp, field)
    return value is not None, value


class EarlyStopping(Callback):
    """``EarlyStopping(monitor="val_edp.loss", mode="min", patience=5, min_delta=0.0)``."""

    def __init__(self, monitor: Any = None, mode: str = "min", patience: int = 5,
                 min_delta: float = 0.0, *, name: str | None = None) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"EarlyStopping.mode must be 'min' or 'max'; got {mode!r}")
        if isinstance(monitor, MonitorSpec):
            self.spec: Any = monitor
        elif monitor is None or monitor in MONITOR_KEYS:
            self.spec = None
        else:
            raise ValueError(
                f"EarlyStopping.monitor must be one of {', '.join(MONITOR_KEYS)}, a "
                f"MonitorSpec or None; got {monitor!r} (declare an accuracy metric and monitor "
                "it through MonitorSpec)")
        if monitor is None and mode == "max":
            raise ValueError("EarlyStopping(mode='max') needs an explicit monitor")
        self.monitor = monitor
        self.mode = mode
        self.patience = check_count("EarlyStopping.patience", patience, minimum=0)
        self.min_delta = check_real("EarlyStopping.min_delta", min_delta, NON_NEGATIVE)
        self.name = name
        self.on_train_begin_reset()

    def on_train_begin_reset(self) -> None:
        self.best: float | None = None
        self.wait = 0
        self.stopped_epoch: int | None = None
        self.selected_monitor: str | None = None if self.monitor is None else (
            self.monitor if isinstance(self.monitor, str) else None)
        self._warned = False
        self.tracker: Any = None
        if self.spec is not None:
            self.tracker = MonitorTracker(self.spec, self.spec.mode or "min")

    def check_run(self, params: Any) -> None:
        """Refuse, before any run is reserved, a monitor the run cannot resolve or feed
        (a validation-split MonitorSpec without a val_loader, §6.4)."""
        if self.spec is None:
            return
        check_monitor_source(self.spec, params, who="EarlyStopping(monitor=MonitorSpec(...))")
        if self.spec.mode is None:
            self.spec.direction(metric_modes(tuple(getattr(params, "metrics", ()) or ())))

    def on_train_begin(self, ctx: CallbackContext) -> None:
        self.on_train_begin_reset()
        if self.spec is not None and self.spec.mode is None:
            # A declared metric's natural direction is its registered mode (accuracy:
            # "max"), exactly as the run's own monitor resolves it (spec §6.4).
            run = ctx.run
            params = getattr(run, "trainer_params", None) or getattr(run, "train_params", None)
            declared = tuple(getattr(params, "metrics", ()) or ())
            self.tracker = MonitorTracker(self.spec, self.spec.direction(metric_modes(declared)))

    def _value(self, ctx: CallbackContext) -> tuple[bool, float | None]:
        if self.monitor is None and self.selected_monitor is None:
            present = []
            for key in ("val_edp.error", "val_edp.loss"):
                found, value = _read(ctx.idp, key)
                if found and value is not None and math.isfinite(value):
                    self.selected_monitor = key
                    break
                if found:
                    present.append(value)
            else:
                # No finite value yet, so no field is selected (the first finite one will
                # be). A present NaN / ±inf still counts as an epoch without improvement
                # (§6.2), so a run diverged from its first epoch stops too.
                return (True, math.nan) if present else (False, None)
        assert self.selected_monitor is not None
        return _read(ctx.idp, self.selected_monitor)

    def _improved(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.best is None:
            return True
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def on_epoch_end(self, ctx: CallbackContext) -> None:
        if self.tracker is not None:
            split = "val_edp" if self.spec.split == "val" else "train_summary"
            record = self.tracker.decide(self.spec.read(getattr(ctx.idp, split, None)))
            if record.status == "missing":
                return
            improved = record.improved
        else:
            present, value = self._value(ctx)
            if not present or value is None:
                if not self._warned:
                    self._warned = True
                    what = self.selected_monitor or "val_edp.error / val_edp.loss"
                    # The run id makes the text per run: Python's default filter shows one
                    # text once per call site, which would silence every later run (§6.2).
                    run_id = getattr(ctx.run, "id", None)
                    warnings.warn(f"EarlyStopping (run {run_id}): {what} is missing this "
                                  "epoch (no validation loader, or the evaluator never sets "
                                  "it); the epoch does not count toward patience",
                                  RuntimeWarning, stacklevel=2)
                return
            improved = self._improved(value)
            if improved:
                self.best = value
        if improved:
            self.wait = 0
        else:
            self.wait += 1
            if self.wait >= self.patience:  # patience=0 reacts on the first bad epoch
                self.stopped_epoch = ctx.epoch
                ctx.should_stop = True

    # -- component protocol (§14.1) ----------------------------------------------------
    def component_spec(self) -> ComponentSpec:
        return ComponentSpec(self.name or "early_stopping", 1, required=False,
                             numbered=self.name is None)

    def _identity(self) -> Any:
        return self.spec.state() if self.spec is not None else self.monitor

    def component_state(self) -> dict[str, Any]:
        return {"best": self.best, "wait": self.wait, "selected_monitor": self.selected_monitor,
                "monitor": self._identity(), "mode": self.mode,
                "tracker": None if self.tracker is None else self.tracker.state_dict()}

    def check_component_state(self, state: dict[str, Any], *, version: int) -> list[str]:
        problems = []
        if state.get("monitor") != self._identity():
            problems.append(f"EarlyStopping was saved monitoring {state.get('monitor')!r}, "
                            f"now {self._identity()!r}")
        if state.get("mode") != self.mode:
            problems.append(f"EarlyStopping was saved with mode={state.get('mode')!r}, "
                            f"now {self.mode!r}")
        return problems

    def load_component_state(self, state: dict[str, Any], *, version: int) -> None:
        self.best, self.wait = state["best"], state["wait"]
        self.selected_monitor = state["selected_monitor"]
        if self.tracker is not None and state.get("tracker") is not None:
            self.tracker.load_state_dict(state["tracker"])
