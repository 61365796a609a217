"""``drop_layer``: remove a Linear whose input and output widths are equal (spec §16).

Only a square Linear can go without the layers around it changing shape, so any other
is refused. The function changes (the layer's map is gone): fine-tune afterwards.
"""

from __future__ import annotations

import copy

from torch import nn

from nnx import FeedFwdNN
from nnx.surgery.errors import SurgeryShapeError, SurgeryTargetError
from nnx.surgery.params import params_removed
from nnx.surgery.sites import children, linear_site, with_children

__all__ = ["drop_layer"]


def drop_layer(net: nn.Module, *, layer_name: str) -> nn.Module:
    """A copy of ``net`` without Linear ``layer_name``.

    In a FeedFwdNN the whole hidden block goes (its Linear, activation and dropout) and
    the params drop its width (later layers renumber); the output layer stays. In an
    ``nn.Sequential`` only the Linear goes. Refusals, before anything is copied:
    SurgeryTargetError (no such Linear, an aliased one, another container, a FeedFwdNN's
    output layer), SurgeryShapeError (``in_features != out_features``).
    """
    site = linear_site(net, layer_name, "drop_layer")
    linear = site.linear
    if linear.in_features != linear.out_features:
        raise SurgeryShapeError(f"drop_layer: {layer_name!r} maps {linear.in_features} → "
                                f"{linear.out_features}; only a Linear with equal input and "
                                f"output widths can be dropped without reshaping its "
                                f"neighbours")
    if site.feedfwd:
        assert isinstance(net, FeedFwdNN)
        i = site.index
        if i == len(net.layers) - 1:
            raise SurgeryTargetError(f"drop_layer: {layer_name!r} is the FeedFwdNN's output "
                                     f"layer; drop a hidden layer")
        out = copy.deepcopy(net)
        del out.layers[i], out.activations[i], out.dropouts[i]
        out.params = params_removed(out.params, i)
        return out
    parent = net.get_submodule(site.parent_name) if site.parent_name else net
    kept = [(key, m) for k, (key, m) in enumerate(children(parent)) if k != site.index]
    return with_children(net, site.parent_name, kept)
