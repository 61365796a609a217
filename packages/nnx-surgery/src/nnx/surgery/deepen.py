"""``deepen``: Net2DeeperNet after a Linear whose activation is ReLU (spec §16).

The inserted block is an identity Linear (zero bias) followed by a ReLU. After a ReLU
every value is non-negative, so ``relu(I·h + 0) = h`` and the net computes the same
function, in training mode too: in a FeedFwdNN the new block's dropout is 0, and in an
``nn.Sequential`` the block goes right after the ReLU, before any dropout that follows.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from nnx import Activations, FeedFwdNN
from nnx.surgery.errors import DeepenSiteError
from nnx.surgery.params import params_inserted
from nnx.surgery.sites import LinearSite, children, linear_site, new_linear, with_children

__all__ = ["deepen"]


def _identity(like: nn.Linear) -> nn.Linear:
    """A new, trainable width × width identity Linear in ``like``'s mode and dtype."""
    width = like.out_features
    eye = torch.eye(width, dtype=like.weight.dtype, device=like.weight.device)
    return new_linear(like, eye, torch.zeros_like(eye[0]), requires_grad=True)


def _feedfwd_site(net: FeedFwdNN, site: LinearSite) -> None:
    """The effective activation of hidden layer ``site.index`` (the params' per-layer
    value and the module that runs) must be ReLU."""
    i, name = site.index, site.name
    if i == len(net.layers) - 1:
        raise DeepenSiteError(f"deepen: {name!r} is the output layer; it has no "
                              f"activation to insert after")
    effective = net.params.layer_activations[i]
    if effective is not Activations.RELU or type(net.activations[i]) is not nn.ReLU:
        raise DeepenSiteError(f"deepen: the activation after {name!r} is "
                              f"{effective.name} ({type(net.activations[i]).__name__}); "
                              f"deepen preserves the function only after a ReLU")


def deepen(net: nn.Module, *, after_layer_name: str) -> nn.Module:
    """A copy of ``net`` with an identity Linear + ReLU inserted after the ReLU that
    follows Linear ``after_layer_name``, computing the same function.

    In a FeedFwdNN the new hidden layer has the site's width, activation ReLU and
    dropout 0, and the params list it (later layers renumber: ``layers.{i+1}`` is the
    new one). In an ``nn.Sequential`` the module right after the Linear must be an
    ``nn.ReLU``. Refusals, before anything is copied: SurgeryTargetError (no such
    Linear, an aliased one, another container), DeepenSiteError (no ReLU there).
    """
    site = linear_site(net, after_layer_name, "deepen")
    if site.feedfwd:
        assert isinstance(net, FeedFwdNN)
        _feedfwd_site(net, site)
        out = copy.deepcopy(net)
        i = site.index
        out.layers.insert(i + 1, _identity(site.linear))
        relu, drop = nn.ReLU(), nn.Dropout(0.0)
        out.activations.insert(i + 1, relu.train(site.linear.training))
        out.dropouts.insert(i + 1, drop.train(site.linear.training))
        out.params = params_inserted(out.params, i + 1, site.linear.out_features,
                                     Activations.RELU, 0.0)
        return out
    parent = net.get_submodule(site.parent_name) if site.parent_name else net
    modules = [m for _, m in children(parent)]
    after = modules[site.index + 1] if site.index + 1 < len(modules) else None
    if type(after) is not nn.ReLU:
        found = "nothing" if after is None else type(after).__name__
        raise DeepenSiteError(f"deepen: {after_layer_name!r} is followed by {found}, not an "
                              f"nn.ReLU; deepen preserves the function only after a ReLU")
    entries = children(parent)
    key = entries[site.index][0]
    block = [(f"{key}_deepened", _identity(site.linear)),
             (f"{key}_deepened_relu", nn.ReLU().train(site.linear.training))]
    entries[site.index + 2:site.index + 2] = block
    return with_children(net, site.parent_name, entries)
