"""``gradient_flow``: the per-parameter gradient norms after ``backward()`` (spec §12)."""

from __future__ import annotations

from typing import Any

from nnx.viz.errors import NoGradientError
from nnx.viz.extras import plotly
from nnx.viz.inputs import network
from nnx.viz.report import bars

__all__ = ["gradient_flow"]

_OWNER = "nnx.viz.gradient_flow"


def gradient_flow(model: object) -> Any:
    """A Plotly bar chart of each trainable parameter's gradient L2 norm, in
    ``named_parameters()`` order: call it after ``loss.backward()``, before
    ``zero_grad()``. Frozen parameters and those the forward did not reach (no
    ``.grad``) are skipped; :class:`NoGradientError` (a ValueError) when none is left.
    Reads the gradients only; the model never runs."""
    go, _ = plotly(_OWNER)
    net = network(_OWNER, model)
    found = [(name, float(p.grad.detach().float().norm()))
             for name, p in net.named_parameters()
             if p.requires_grad and p.grad is not None]
    if not found:
        raise NoGradientError(
            f"{_OWNER}: no trainable parameter of {type(net).__name__} has a gradient; "
            f"call it after loss.backward() and before optimizer.zero_grad()")
    names, norms = zip(*found, strict=True)
    return bars(go, names, norms, title=f"{type(net).__name__} gradient flow",
                y_title="gradient L2 norm")
