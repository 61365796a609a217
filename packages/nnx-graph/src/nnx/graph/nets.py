"""The node-level graph nets: ``Nets.GRAPH_CONV`` / ``GRAPH_SAGE`` / ``GRAPH_ATT`` (spec §3).

Each is ``hidden_dims`` message-passing layers (activation, then dropout), then one more
layer to ``output_dim`` logits, configured by core's plain :class:`NNParams`
(``n_heads`` sets GAT's attention heads). The layers are torch-geometric's ``GCNConv``,
``SAGEConv`` (mean) and ``GATConv`` on their pure-torch paths.

``forward(x, edge_index)`` scores every node; ``forward(GraphInputs)`` scores the seed
rows only (seed-row slicing, §3.1).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import torch
from torch import nn
from torch_geometric.nn import GATConv, GCNConv, SAGEConv

from nnx import PositionalInputs
from nnx.extend import NetRegistration, NNParams
from nnx.graph.inputs import GraphInputs, refuse_graph_level, refuse_link_level

__all__ = ["GRAPH_ATT", "GRAPH_CONV", "GRAPH_SAGE", "GraphAttNN", "GraphConvNN",
           "GraphSageNN", "NodeInputs"]


class NodeInputs(PositionalInputs):
    """The split a node net's batches always had, ``(inputs, y)`` or bare inputs (core's
    ``PositionalInputs()``), after refusing a link batch by name: the default train /
    evaluate / predict paths never reach the generic "expects (1 input(s)[, target])
    batches" error with one (spec §26 "Batch roles"). A mapping given to ``predict()``
    still arrives as keyword inputs."""

    def __init__(self, owner: str) -> None:
        super().__init__(1)
        self.owner = owner

    def split(self, batch: Any) -> tuple[tuple[Any, ...], dict[str, Any], Any]:
        refuse_link_level(self.owner, "node-level", batch)
        return super().split(batch)

    def __repr__(self) -> str:
        return f"NodeInputs({self.owner!r})"


class _GraphNN(nn.Module):
    """Shared stack: one conv per width step, activation and dropout between them."""

    def __init__(self, params: NNParams) -> None:
        super().__init__()
        if params.input_dim is None:
            raise ValueError(f"{type(self).__name__} needs params.input_dim (the node "
                             "feature width); lazy graph layers are not supported")
        self.params = params
        self.convs = nn.ModuleList(self._layers(params))
        self.activations = nn.ModuleList(act() for act in params.layer_activations)
        self.dropouts = nn.ModuleList(nn.Dropout(p) for p in params.layer_dropouts)

    def _layers(self, params: NNParams) -> list[nn.Module]:
        raise NotImplementedError

    def batch_adapter(self) -> NodeInputs:
        """How NNModel splits this net's batches (core's ``default_batch_adapter``)."""
        return NodeInputs(type(self).__name__)

    def forward(self, x: torch.Tensor | GraphInputs,
                edge_index: torch.Tensor | None = None, *candidates: Any) -> torch.Tensor:
        # ``candidates``: a link objective calls ``net(x, edge_index, edge_label_index)``;
        # taking the third input only to refuse it names the mistake instead of a TypeError.
        seed = None
        refuse_link_level(type(self).__name__, "node-level", x, candidates)
        refuse_graph_level(type(self).__name__, x)
        if isinstance(x, GraphInputs):
            h, edge_index, seed = x.x, x.edge_index, x.seed
        else:
            h = x
        if edge_index is None:
            raise TypeError(f"{type(self).__name__} needs an edge_index (or GraphInputs)")
        hidden = zip(self.convs[:-1], self.activations, self.dropouts, strict=True)
        for conv, act, drop in hidden:
            h = drop(act(self._layer(conv, h, edge_index)))
        out = self._layer(self.convs[-1], h, edge_index)
        return out if seed is None else out[seed]

    def _layer(self, conv: nn.Module, h: torch.Tensor, edge_index: torch.Tensor
               ) -> torch.Tensor:
        out: torch.Tensor = conv(h, edge_index)
        return out


class GraphConvNN(_GraphNN):
    """GCN: each layer is ``D^-1/2 (A + I) D^-1/2 X W + b``."""

    def _layers(self, params: NNParams) -> list[nn.Module]:
        dims = [params.input_dim, *params.hidden_dims, params.output_dim]
        return [GCNConv(a, b) for a, b in pairwise(dims)]


class GraphSageNN(_GraphNN):
    """GraphSAGE (mean): each layer is ``mean_{j in N(i)} x_j W_l + x_i W_r + b``.

    A layer that narrows (``in > out``) projects before it aggregates,
    ``mean_j (x_j W_l)``: the same value (the mean is linear; the bias is added after,
    so an isolated node still gets ``b``), with the scatter over ``out`` columns
    instead of ``in`` (a Cora-sized 1433 → 16 layer aggregates 16 columns, not 1433).
    """

    def _layers(self, params: NNParams) -> list[nn.Module]:
        dims = [params.input_dim, *params.hidden_dims, params.output_dim]
        return [SAGEConv(a, b, aggr="mean") for a, b in pairwise(dims)]

    def _layer(self, conv: nn.Module, h: torch.Tensor, edge_index: torch.Tensor
               ) -> torch.Tensor:
        sage: Any = conv  # torch-geometric is untyped
        if sage.in_channels <= sage.out_channels:
            return _GraphNN._layer(self, conv, h, edge_index)
        lin_l = sage.lin_l
        projected = nn.functional.linear(h, lin_l.weight)
        out: torch.Tensor = sage.propagate(edge_index, x=(projected, projected), size=None)
        if lin_l.bias is not None:
            out = out + lin_l.bias
        root: torch.Tensor = sage.lin_r(h)
        return out + root


class GraphAttNN(_GraphNN):
    """GAT: ``n_heads`` (default 1) heads, concatenated in hidden layers, averaged in the
    output layer; attention is a softmax over each node's neighbours and itself."""

    def _layers(self, params: NNParams) -> list[nn.Module]:
        heads = params.n_heads or 1
        layers: list[nn.Module] = []
        width = params.input_dim
        for hidden in params.hidden_dims:
            layers.append(GATConv(width, hidden, heads=heads, concat=True))
            width = hidden * heads
        layers.append(GATConv(width, params.output_dim, heads=heads, concat=False))
        return layers


#: The ``nnx.nets`` entries: how each ``Nets`` member builds, and its params class.
GRAPH_CONV = NetRegistration(build=GraphConvNN, params_class=NNParams)
GRAPH_SAGE = NetRegistration(build=GraphSageNN, params_class=NNParams)
GRAPH_ATT = NetRegistration(build=GraphAttNN, params_class=NNParams)
