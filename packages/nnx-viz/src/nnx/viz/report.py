"""The Plotly figures nnx.viz returns: heatmaps, a channel grid, histograms and bars.

Each builder takes the plain arrays a helper computed and Plotly's modules (imported by
the entry point, :mod:`nnx.viz.extras`), and returns a ``plotly.graph_objects.Figure``;
nothing here runs a model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["MAX_CHANNELS", "bars", "channel_grid", "heatmap", "histogram_grid"]

#: A 4-D activation's grid shows at most this many channels (the first ones).
MAX_CHANNELS = 64


def _grid(count: int) -> tuple[int, int]:
    cols = max(1, math.ceil(math.sqrt(count)))
    return math.ceil(count / cols), cols


def heatmap(go: Any, z: np.ndarray, *, title: str, x_title: str, y_title: str) -> Any:
    """One heatmap of the 2-D ``z`` (row 0 at the top, as a matrix reads)."""
    fig = go.Figure(go.Heatmap(z=np.asarray(z, dtype=np.float64), colorscale="Viridis"))
    fig.update_layout(title=title, xaxis_title=x_title, yaxis_title=y_title)
    fig.update_yaxes(autorange="reversed")
    return fig


def channel_grid(go: Any, subplots: Any, maps: np.ndarray, *, title: str) -> Any:
    """A grid of per-channel heatmaps of ``maps`` ``(C, H, W)``, one colour scale."""
    shown = maps[:MAX_CHANNELS]
    rows, cols = _grid(len(shown))
    fig = subplots.make_subplots(rows=rows, cols=cols,
                                 subplot_titles=[f"channel {c}" for c in range(len(shown))])
    for c, plane in enumerate(shown):
        fig.add_trace(go.Heatmap(z=np.asarray(plane, dtype=np.float64), coloraxis="coloraxis"),
                      row=c // cols + 1, col=c % cols + 1)
    more = f" (first {MAX_CHANNELS} of {len(maps)} channels)" if len(maps) > len(shown) else ""
    fig.update_layout(title=title + more, coloraxis={"colorscale": "Viridis"})
    fig.update_yaxes(autorange="reversed")
    return fig


def histogram_grid(go: Any, subplots: Any, named: Sequence[tuple[str, np.ndarray]], *,
                   title: str) -> Any:
    """One histogram per ``(name, values)``, in a grid; a tensor's NaN / ±inf entries are
    counted in its subplot's title (a histogram cannot bin them)."""
    rows, cols = _grid(len(named))
    titles = []
    for name, values in named:
        bad = int(values.size - np.isfinite(values).sum())
        titles.append(f"{name} ({bad} non-finite)" if bad else name)
    fig = subplots.make_subplots(rows=rows, cols=cols, subplot_titles=titles)
    for i, (name, values) in enumerate(named):
        finite = values[np.isfinite(values)].astype(np.float64)
        fig.add_trace(go.Histogram(x=finite, name=name, showlegend=False),
                      row=i // cols + 1, col=i % cols + 1)
    fig.update_layout(title=title)
    return fig


def bars(go: Any, names: Sequence[str], values: Sequence[float], *, title: str,
         y_title: str) -> Any:
    """One bar per name, in order."""
    fig = go.Figure(go.Bar(x=list(names), y=[float(v) for v in values]))
    fig.update_layout(title=title, xaxis_title="parameter", yaxis_title=y_title)
    return fig
