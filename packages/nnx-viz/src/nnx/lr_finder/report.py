"""The LR sweep's result (spec §13.1): the series, the suggestion and its Plotly figure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["LRFinderResult", "sweep_figure"]


@dataclass(frozen=True)
class LRFinderResult:
    """What :func:`nnx.lr_finder` measured.

    ``lrs[i]`` is the rate batch ``i`` trained at, ``losses[i]`` its raw loss and
    ``smoothed_losses[i]`` the bias-corrected EMA up to it; all three have one entry per
    batch run (fewer than ``num_iter`` when the sweep stopped early). ``suggested_lr``
    is the steepest descent of the smoothed curve (Smith 2017): a ``max_lr`` for a
    one-cycle schedule. ``diverged`` says the sweep stopped early because the smoothed
    loss crossed the divergence bound (its last entry is the one that crossed it) or a
    loss was not finite (that batch is not in the series).
    """

    lrs: tuple[float, ...]
    losses: tuple[float, ...]
    smoothed_losses: tuple[float, ...]
    suggested_lr: float
    diverged: bool
    figure: Any  # plotly.graph_objects.Figure


def sweep_figure(go: Any, lrs: Sequence[float], losses: Sequence[float],
                 smoothed: Sequence[float], suggested_lr: float) -> Any:
    """Raw and smoothed loss over the LR on a log axis, the suggestion marked."""
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=list(lrs), y=list(losses), mode="lines", name="loss",
                                opacity=0.4))
    figure.add_trace(go.Scatter(x=list(lrs), y=list(smoothed), mode="lines",
                                name="smoothed loss"))
    at = list(lrs).index(suggested_lr)
    figure.add_trace(go.Scatter(x=[suggested_lr], y=[smoothed[at]], mode="markers",
                                name=f"suggested {suggested_lr:.2e}",
                                marker={"size": 10, "symbol": "x"}))
    figure.update_layout(title="LR finder", xaxis={"type": "log", "title": "learning rate"},
                         yaxis={"title": "loss"})
    return figure
