"""Global unstructured magnitude pruning with an exact sparsity (spec §16).

Every Linear / Conv ``weight`` of the net is ranked together by ``|w|``; the
``round(amount * n)`` smallest are pruned. Ties are broken by position (layers in module
order, each weight in row-major order; the earlier of two equal magnitudes is pruned first),
so the count is exact and the cut deterministic: every kept ``|w|`` is ≥ every pruned one,
strictly > unless the cut falls inside a run of equal magnitudes.

``bake=True`` (the default) multiplies the weights in place by their masks: the parameters
stay the same objects with the same keys, dtypes and ``requires_grad`` flags, so the
state_dict loads into stock code under ``strict=True``. ``bake=False`` attaches the masks
through ``torch.nn.utils.prune.custom_from_mask`` instead (``weight_orig`` /
``weight_mask`` keys), which ``NNModel.train`` refuses on a built-in net.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import prune

from nnx.prune.errors import PruneError
from nnx.prune.targets import prunable_layers

__all__ = ["magnitude_prune"]


def magnitude_prune(net: nn.Module, amount: float, *, bake: bool = True) -> nn.Module:
    """Prune ``net`` in place to exactly ``round(amount * n)`` zeroed weights out of the
    ``n`` Linear / Conv weights, smallest ``|w|`` first; returns ``net``. Refuses
    (:class:`PruneError`) before any change: ``amount`` outside [0, 1), no prunable weight,
    masks or weight_norm / spectral_norm parametrizations already on the net."""
    if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not (
            0.0 <= float(amount) < 1.0):
        raise PruneError(f"magnitude_prune: amount must be a fraction in [0, 1); got {amount!r}")
    layers = prunable_layers(net, what="magnitude_prune")
    weights: list[torch.Tensor] = [layer.get_parameter("weight") for _, layer in layers]
    sizes = [w.numel() for w in weights]
    magnitudes = torch.cat([w.detach().abs().reshape(-1).to(torch.float64).cpu()
                            for w in weights])
    n_pruned = round(float(amount) * magnitudes.numel())
    # stable: equal magnitudes keep their positional order, so the earlier is pruned first
    order = torch.argsort(magnitudes, stable=True)
    keep = torch.ones(magnitudes.numel(), dtype=torch.bool)
    keep[order[:n_pruned]] = False
    parts = torch.split(keep, sizes)
    for (_, layer), w, part in zip(layers, weights, parts, strict=True):
        mask = part.reshape(w.shape).to(w.device)
        if bake:
            with torch.no_grad():
                w.mul_(mask.to(w.dtype))
        else:
            prune.custom_from_mask(layer, "weight", mask)  # type: ignore[no-untyped-call]
    return net
