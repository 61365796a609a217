"""The run chart (spec §6.4): the whole-epoch training loss, the validation loss, the
monitor series with its improving epochs marked, and the LR, one figure per run.

``NNRun.chart(path)`` and ``nnx runs show ID --plot out.html`` write it through
:func:`write_run_chart` as one self-contained HTML file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nnx.vis_utils.curves import epoch_series
from nnx.vis_utils.document import load_run, write_html
from nnx.viz import extras

__all__ = ["IMPROVED", "run_chart", "write_run_chart"]

#: The name of the trace marking the epochs the monitor called improved.
IMPROVED = "improved"


def run_chart(run: Any, *, root: str | os.PathLike[str] = "runs") -> Any:
    """The run chart of ``run`` (an ``NNRun`` or a run id under ``root``): a Plotly figure
    with the losses in the top row, the monitor (for a run that declares one) with a
    marker on each improving epoch in the next, and the LR in the last."""
    owner = "nnx.vis_utils.run_chart"
    go, subplots = extras.plotly(owner)
    loaded = load_run(owner, run, root)
    s = epoch_series(loaded.epoch_records())
    rows = ["loss", *([f"monitor: {s.monitor}"] if s.monitor else []), "learning rate"]
    fig = subplots.make_subplots(rows=len(rows), cols=1, shared_xaxes=True,
                                 subplot_titles=rows, vertical_spacing=0.08)
    fig.add_trace(go.Scatter(x=s.epochs, y=s.train_loss, mode="lines+markers",
                             name=s.train_label), row=1, col=1)
    fig.add_trace(go.Scatter(x=s.epochs, y=s.val_loss, mode="lines+markers",
                             name="val loss"), row=1, col=1)
    if s.monitor:
        fig.add_trace(go.Scatter(x=s.epochs, y=s.monitor_value, mode="lines+markers",
                                 name=f"monitor {s.monitor}"), row=2, col=1)
        marked = [v for v, up in zip(s.monitor_value, s.improved, strict=True) if up]
        fig.add_trace(go.Scatter(x=s.improved_epochs, y=marked, mode="markers", name=IMPROVED,
                                 marker={"symbol": "star", "size": 14}), row=2, col=1)
    fig.add_trace(go.Scatter(x=s.epochs, y=s.lr, mode="lines+markers", name="lr"),
                  row=len(rows), col=1)
    fig.update_xaxes(title_text="epoch", row=len(rows), col=1)
    fig.update_layout(title=f"run {loaded.id}", height=260 * len(rows))
    return fig


def write_run_chart(run: Any, path: str | os.PathLike[str], *,
                    root: str | os.PathLike[str] = "runs") -> Path:
    """:func:`run_chart` as one self-contained HTML file at ``path`` (plotly.js inlined);
    the path written."""
    return write_html(run_chart(run, root=root), path)
