"""``widen``: Net2WiderNet on a Linear and the Linear that reads it (spec §16).

The new units copy existing ones (unit ``j`` of the new ones repeats old unit
``j mod width``: a fixed mapping, so no RNG stream moves); the consumer's input columns
are copied along and each unit's columns divided by its number of copies. The units
between pass only through elementwise modules, so every copy carries the same value and
the consumer's output is unchanged.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from nnx import FeedFwdNN
from nnx.extend import check_count
from nnx.surgery.errors import SurgeryShapeError
from nnx.surgery.params import params_widened
from nnx.surgery.sites import consumer, linear_site, new_linear, swap

__all__ = ["widen"]


def widen(net: nn.Module, *, layer_name: str, new_width: int) -> nn.Module:
    """A copy of ``net`` whose Linear ``layer_name`` has ``new_width`` outputs, computing
    the same function.

    ``layer_name`` must be an ``nn.Linear`` inside an ``nn.Sequential`` or a FeedFwdNN's
    ``layers``, read by the next Linear of that container through elementwise modules
    only. Refusals, before anything is copied: SurgeryTargetError (no such Linear, an
    aliased or tied one, another container, the output layer), SurgeryBoundaryError
    (a Softmax, LayerNorm, BatchNorm or any other non-elementwise module before the
    consumer), SurgeryShapeError (``new_width`` not wider).
    """
    site = linear_site(net, layer_name, "widen")
    width = site.linear.out_features
    new_width = check_count("widen new_width", new_width)
    if new_width <= width:
        raise SurgeryShapeError(f"widen: {layer_name!r} has {width} outputs; new_width must "
                                f"be larger (got {new_width})")
    reader_name = consumer(net, site, "widen")
    reader = net.get_submodule(reader_name)
    assert isinstance(reader, nn.Linear)  # consumer() returns only Linears

    source = torch.arange(new_width, device=site.linear.weight.device) % width
    copies = torch.bincount(source, minlength=width).to(reader.weight.dtype)
    weight, bias = site.linear.weight.detach(), site.linear.bias
    wide = new_linear(site.linear, weight[source],
                      None if bias is None else bias.detach()[source])
    reads = new_linear(reader, reader.weight.detach()[:, source] / copies[source],
                       None if reader.bias is None else reader.bias.detach())

    out = copy.deepcopy(net)
    out = swap(out, layer_name, wide)
    out = swap(out, reader_name, reads)
    if site.feedfwd:
        assert isinstance(out, FeedFwdNN)
        out.params = params_widened(out.params, site.index, new_width)
    return out
