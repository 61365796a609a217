"""``weight_histogram``: one histogram per parameter tensor (spec §12)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nnx.viz.extras import plotly
from nnx.viz.inputs import network
from nnx.viz.report import histogram_grid

__all__ = ["weight_histogram"]

_OWNER = "nnx.viz.weight_histogram"


def weight_histogram(model: object) -> Any:
    """A Plotly grid of one histogram per ``named_parameters()`` tensor (each shared
    tensor once), for spotting dead layers, saturation and NaN / ±inf weights (their
    count is in the subplot title). Reads the weights only; the model never runs."""
    go, subplots = plotly(_OWNER)
    net = network(_OWNER, model)
    named = [(name, p.detach().float().cpu().numpy().ravel())
             for name, p in net.named_parameters()]
    if not named:
        raise ValueError(f"{_OWNER}: {type(net).__name__} has no parameters to draw")
    return histogram_grid(go, subplots, [(n, np.asarray(v)) for n, v in named],
                          title=f"{type(net).__name__} weights")
