"""``activation_map``: what one named layer outputs for an input (spec §12)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from nnx.viz.extras import plotly
from nnx.viz.guard import untouched
from nnx.viz.inputs import as_tensor, device_of, find_module, network
from nnx.viz.report import channel_grid, heatmap

__all__ = ["activation_map"]

_OWNER = "nnx.viz.activation_map"


def _first_tensor(output: Any) -> torch.Tensor | None:
    """The layer's output tensor (the first one of a tuple, as an LSTM returns)."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    return None


def activation_map(model: object, x: Any, layer_name: str) -> Any:
    """A Plotly figure of ``layer_name``'s output for ``x``.

    ``layer_name`` is a dotted name from ``model.named_modules()`` (``"layers.0"``); an
    unknown one raises :class:`UnknownLayerError` (a ValueError) listing the available
    names. The model runs once under ``torch.no_grad()`` in eval mode; every submodule's
    mode and flags are put back and the hook removed, also on error (§13.2). A 4-D output
    ``(N, C, H, W)`` is a grid of per-channel heatmaps of the first sample; a 3-D one
    ``(N, T, F)`` the first sample's ``(T, F)`` heatmap; a 2-D one ``(N, F)`` one heatmap.
    """
    go, subplots = plotly(_OWNER)
    net = network(_OWNER, model)
    layer = find_module(_OWNER, net, layer_name)
    inputs = as_tensor(_OWNER, "x", x, device_of(net))
    captured: list[torch.Tensor] = []

    def keep(_module: nn.Module, _args: Any, output: Any) -> None:
        found = _first_tensor(output)
        if found is not None and not captured:
            captured.append(found.detach().float().cpu())

    with untouched(net, mode="eval"):
        handle = layer.register_forward_hook(keep)
        try:
            with torch.no_grad():
                net(inputs)
        finally:
            handle.remove()
    if not captured:
        raise ValueError(f"{_OWNER}: {layer_name!r} produced no tensor output for this "
                         f"input (the forward did not call it, or it returns no tensor)")
    act = captured[0]
    title = f"{layer_name} activations {tuple(act.shape)}"
    if act.dim() == 4:
        return channel_grid(go, subplots, act[0].numpy(), title=title + ", sample 0")
    if act.dim() == 3:
        return heatmap(go, act[0].numpy(), title=title + ", sample 0", x_title="feature",
                       y_title="position")
    if act.dim() == 2:
        return heatmap(go, act.numpy(), title=title, x_title="feature", y_title="sample")
    raise ValueError(f"{_OWNER}: {layer_name!r} output has shape {tuple(act.shape)}; "
                     f"activation_map draws 2-D (N, F), 3-D (N, T, F) or 4-D (N, C, H, W)")
