"""Training curves: a run's per-epoch series, and the per-record ones of its history.

:func:`epoch_series` is the one reading of a run's epoch records that every figure here
draws (the curves and the run chart of spec §6.4): per epoch, the training loss (the
whole-epoch summary when the run records one, else the epoch's last batch), the
validation loss and error, the monitor's value and decision, and the LR.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from nnx.extend import iter_history
from nnx.vis_utils.document import load_run
from nnx.viz import extras

__all__ = ["EpochSeries", "epoch_series", "history_curves", "training_curves"]


def _finite(value: float | None) -> float | None:
    """A plotted value: None (a gap) for a missing or non-finite one."""
    return None if value is None or not math.isfinite(value) else float(value)


@dataclass
class EpochSeries:
    """One run's per-epoch series, aligned on ``epochs`` (None: no value that epoch)."""

    epochs: list[int] = field(default_factory=list)
    train_loss: list[float | None] = field(default_factory=list)
    #: True when ``train_loss`` is the whole-epoch summary (§6.4) on every epoch.
    whole_epoch: bool = True
    val_loss: list[float | None] = field(default_factory=list)
    val_error: list[float | None] = field(default_factory=list)
    lr: list[float | None] = field(default_factory=list)
    #: "val nll" for a run with a named monitor, else None (and the lists below empty).
    monitor: str | None = None
    monitor_value: list[float | None] = field(default_factory=list)
    improved: list[bool] = field(default_factory=list)

    @property
    def train_label(self) -> str:
        return "train loss (whole epoch)" if self.whole_epoch else "train loss (last batch)"

    @property
    def improved_epochs(self) -> list[int]:
        return [e for e, up in zip(self.epochs, self.improved, strict=True) if up]


def epoch_series(records: Iterable[Any]) -> EpochSeries:
    """The series of the epoch records ``records`` (``NNRun.epoch_records()``)."""
    series = EpochSeries()
    for idp in records:
        train = idp.train_summary or idp.train_edp
        series.whole_epoch &= idp.train_summary is not None
        series.epochs.append(int(idp.epoch))
        series.train_loss.append(None if train is None else _finite(train.loss))
        val = idp.val_edp
        series.val_loss.append(None if val is None else _finite(val.loss))
        series.val_error.append(None if val is None else _finite(val.error))
        series.lr.append(_finite(idp.lr))
        selection = idp.selection
        if selection is not None:
            series.monitor = f"{selection.split} {selection.metric}"
        series.monitor_value.append(None if selection is None else _finite(selection.value))
        series.improved.append(bool(selection is not None and selection.improved))
    if series.monitor is None:
        series.monitor_value, series.improved = [], []
    if not series.epochs:
        series.whole_epoch = False
    return series


def training_curves(run: Any, *, root: str | os.PathLike[str] = "runs") -> Any:
    """Training and validation loss (and validation error) per epoch of ``run`` (an
    ``NNRun`` or a run id under ``root``), as a Plotly figure."""
    owner = "nnx.vis_utils.VisUtils.training_curves"
    go, subplots = extras.plotly(owner)
    loaded = load_run(owner, run, root)
    series = epoch_series(loaded.epoch_records())
    has_error = any(v is not None for v in series.val_error)
    fig = subplots.make_subplots(rows=2 if has_error else 1, cols=1, shared_xaxes=True,
                                 subplot_titles=("loss", "val error") if has_error else None)
    fig.add_trace(go.Scatter(x=series.epochs, y=series.train_loss, mode="lines+markers",
                             name=series.train_label), row=1, col=1)
    fig.add_trace(go.Scatter(x=series.epochs, y=series.val_loss, mode="lines+markers",
                             name="val loss"), row=1, col=1)
    if has_error:
        fig.add_trace(go.Scatter(x=series.epochs, y=series.val_error, mode="lines+markers",
                                 name="val error"), row=2, col=1)
    fig.update_layout(title=f"run {loaded.id}", xaxis_title="epoch")
    return fig


def history_curves(run: Any, *, root: str | os.PathLike[str] = "runs",
                   lineage: bool = False) -> Any:
    """Every committed record's training loss (x: the record's position in the run), and
    the validation loss where an epoch's last record carries it, read from the run's
    history by ``nnx.history``'s reader (``nnx.extend.iter_history``: a journal chunk by
    chunk, or idps.csv).
    ``run`` is a run id under ``root`` or a run directory; ``lineage=True`` first draws
    the records of the run it resumed from, as ``iter_history`` yields them."""
    owner = "nnx.vis_utils.VisUtils.history_curves"
    go, _subplots = extras.plotly(owner)
    if not isinstance(run, (str, os.PathLike)):
        raise TypeError(f"{owner}: run must be a run id or a run directory; got "
                        f"{type(run).__name__}")
    steps: list[int] = []
    train: list[float | None] = []
    val_steps: list[int] = []
    val: list[float | None] = []
    for step, idp in enumerate(iter_history(run, root=root, lineage=lineage)):
        steps.append(step)
        train.append(None if idp.train_edp is None else _finite(idp.train_edp.loss))
        if idp.val_edp is not None:
            val_steps.append(step)
            val.append(_finite(idp.val_edp.loss))
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=steps, y=train, mode="lines", name="train loss (per record)"))
    fig.add_trace(go.Scatter(x=val_steps, y=val, mode="lines+markers", name="val loss"))
    fig.update_layout(title=f"history of {os.fspath(run)}", xaxis_title="record")
    return fig
