"""``attribute``: six Captum input-attribution methods behind one call (spec §12)."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from nnx.viz.errors import UnknownMethodError
from nnx.viz.extras import captum_attr, plotly
from nnx.viz.guard import untouched
from nnx.viz.inputs import as_tensor, device_of, network
from nnx.viz.report import heatmap

__all__ = ["METHODS", "attribute"]

_OWNER = "nnx.viz.attribute"

#: method name → Captum's class in ``captum.attr``.
METHODS = {
    "integrated_gradients": "IntegratedGradients",
    "gradient_shap": "GradientShap",
    "deep_lift": "DeepLift",
    "saliency": "Saliency",
    "input_x_gradient": "InputXGradient",
    "occlusion": "Occlusion",
}


def _defaults(method: str, x: torch.Tensor, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keywords a one-call use needs: GradientShap's baselines (zeros, one per
    sample) and Occlusion's window (one input element; a ``(C, k, k)`` patch with k = 3
    or less on a 4-D image batch). The caller's own keywords win."""
    out = dict(kwargs)
    if method == "gradient_shap":
        out.setdefault("baselines", torch.zeros_like(x))
    if method == "occlusion" and "sliding_window_shapes" not in out:
        if x.dim() == 4:
            k = min(3, x.shape[2], x.shape[3])
            out["sliding_window_shapes"] = (x.shape[1], k, k)
        else:
            out["sliding_window_shapes"] = (1,) * (x.dim() - 1)
    return out


def _figure(go: Any, attribution: torch.Tensor, method: str) -> Any:
    a = attribution.detach().float().cpu()
    title = f"{method} attribution"
    if a.dim() == 4:  # (N, C, H, W): the first sample, averaged over channels
        return heatmap(go, a[0].mean(dim=0).numpy(), title=title + ", sample 0",
                       x_title="width", y_title="height")
    if a.dim() == 3:  # (N, T, F): the first sample
        return heatmap(go, a[0].numpy(), title=title + ", sample 0", x_title="feature",
                       y_title="position")
    return heatmap(go, a.reshape(a.shape[0], -1).numpy(), title=title, x_title="feature",
                   y_title="sample")


def attribute(model: object, x: Any, *, method: str, target: Any,
              **method_kwargs: Any) -> tuple[torch.Tensor, Any]:
    """``(attribution, figure)``: Captum's ``method`` attribution of ``x`` for ``target``
    (the output index, or None for a single output) and a Plotly heatmap of it.

    ``method``: ``integrated_gradients``, ``gradient_shap``, ``deep_lift``, ``saliency``,
    ``input_x_gradient`` or ``occlusion``; ``method_kwargs`` go to its ``attribute``
    (``n_steps``, ``baselines``, ``sliding_window_shapes``, ...). The attribution has
    ``x``'s shape. The heatmap shows a 4-D input's first sample averaged over channels,
    a 3-D input's first sample, a 2-D input one row per sample. The model runs in eval
    mode on a copy of ``x``; every submodule's mode, flags, gradients and hooks are put
    back, also on error (§13.2). Needs the ``captum`` extra.
    """
    attr = captum_attr(_OWNER)
    go, _ = plotly(_OWNER)
    net = network(_OWNER, model)
    if method not in METHODS:
        raise UnknownMethodError(f"{_OWNER}: method must be one of "
                                 f"{', '.join(METHODS)}; got {method!r}")
    if method_kwargs.get("return_convergence_delta"):
        raise ValueError(f"{_OWNER} returns (attribution, figure); for the convergence "
                         f"delta call captum.attr.{METHODS[method]} directly")
    # A detached copy needing gradients: Captum would otherwise set requires_grad on the
    # caller's own tensor (and warn that it did).
    inputs = as_tensor(_OWNER, "x", x, device_of(net), min_dim=2).detach().clone()
    if inputs.is_floating_point():
        inputs.requires_grad_(True)
    kwargs = _defaults(method, inputs.detach(), method_kwargs)
    with untouched(net, mode="eval"), torch.enable_grad(), warnings.catch_warnings():
        # DeepLift announces the hooks it sets on the non-linearities; untouched() removes
        # any it leaves, so the notice says nothing to act on.
        warnings.filterwarnings("ignore", message=r"Setting forward, backward hooks")
        explainer = getattr(attr, METHODS[method])(net)
        attribution = explainer.attribute(inputs, target=target, **kwargs)
    attribution = attribution.detach()
    return attribution, _figure(go, attribution, method)
