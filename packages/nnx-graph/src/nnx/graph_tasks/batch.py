"""``GraphBatch``: several whole graphs as one disjoint graph, and the checks every
graph-level batch passes before a forward (spec §25).

A loader batch is ``(GraphBatch, y)``: node features ``x`` (N, F), ``edge_index`` (2, E)
over the batch's node rows, ``batch`` (N,) naming each row's graph position, ``ptr``
(G + 1,) the row offsets (graph ``g`` owns rows ``ptr[g]:ptr[g + 1]``) and ``graph_id``
(G,); ``y`` (G,) holds one target per graph. ``sample_ids()`` answers the graph ids, so
``predict_proba`` and ``iter_predict`` name each row by its graph (core's
``IdentifiedInputs``), whatever order a shuffling loader drew them in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from nnx.graph_tasks.errors import (
    BatchVectorError,
    CrossGraphEdgeError,
    EmptyGraphError,
    GraphIdError,
    GraphTargetError,
)

__all__ = ["GraphBatch", "check_batch", "check_targets", "collate"]


@dataclass(frozen=True)
class GraphBatch:
    """The model inputs of one batch of whole graphs (module docstring)."""

    x: torch.Tensor
    edge_index: torch.Tensor
    batch: torch.Tensor
    ptr: torch.Tensor
    graph_id: torch.Tensor

    #: Marks a batch of whole graphs, so node-level nets and NNGraphDataset (nnx.graph,
    #: which cannot import this package) refuse it by name.
    graph_level: ClassVar[bool] = True

    @property
    def num_graphs(self) -> int:
        return int(self.ptr.numel()) - 1

    def sample_ids(self) -> torch.Tensor:
        """The graph id of each output row (spec §3.1, §25)."""
        return self.graph_id

    def __len__(self) -> int:
        return self.num_graphs

    def to(self, device: torch.device | str) -> GraphBatch:
        return GraphBatch(self.x.to(device), self.edge_index.to(device),
                          self.batch.to(device), self.ptr.to(device),
                          self.graph_id.to(device))


def collate(graphs: Sequence[tuple[torch.Tensor, torch.Tensor]],
            ids: torch.Tensor) -> GraphBatch:
    """Checked graphs ``(x, edge_index)`` as one ``GraphBatch``: node rows stacked,
    each graph's edges shifted by its offset."""
    sizes = torch.tensor([int(x.shape[0]) for x, _ in graphs], dtype=torch.long)
    ptr = torch.zeros(len(graphs) + 1, dtype=torch.long)
    ptr[1:] = torch.cumsum(sizes, 0)
    edges = [edge_index + ptr[g] for g, (_, edge_index) in enumerate(graphs)]
    return GraphBatch(torch.cat([x for x, _ in graphs]), torch.cat(edges, dim=1),
                      torch.repeat_interleave(torch.arange(len(graphs)), sizes), ptr, ids)


def _long_vector(name: str, value: Any, error: type[Exception]) -> torch.Tensor:
    if (not isinstance(value, torch.Tensor) or value.ndim != 1
            or value.dtype not in (torch.int64, torch.int32)):
        raise error(f"GraphBatch.{name} must be a 1-D integer tensor; got "
                    f"{getattr(value, 'shape', type(value).__name__)}")
    return value


def check_batch(inputs: GraphBatch) -> None:
    """Refuse, by a specific error, a batch that cannot be scored graph by graph: graph
    ids present and unique, no zero-node graph, ``ptr`` / ``batch`` consistent, no edge
    crossing graphs (spec §25)."""
    ids = _long_vector("graph_id", inputs.graph_id, GraphIdError)
    ptr = _long_vector("ptr", inputs.ptr, BatchVectorError)
    vector = _long_vector("batch", inputs.batch, BatchVectorError)
    graphs = int(ptr.numel()) - 1
    if graphs < 1 or ids.numel() != graphs:
        raise GraphIdError(f"GraphBatch holds {graphs} graph(s) (ptr) but {ids.numel()} "
                           "graph id(s): every graph needs its id")
    if bool((ids < 0).any()) or int(torch.unique(ids).numel()) != graphs:
        raise GraphIdError(f"GraphBatch.graph_id must be unique non-negative integers; got "
                           f"{ids.tolist()}")
    rows = int(inputs.x.shape[0]) if inputs.x.ndim == 2 else -1
    if int(ptr[0]) != 0 or int(ptr[-1]) != rows or vector.numel() != rows:
        raise BatchVectorError(f"GraphBatch.ptr must run from 0 to the {rows} node rows and "
                               f"batch name each of them; got ptr {ptr.tolist()}, "
                               f"{vector.numel()} batch entries")
    sizes = ptr[1:] - ptr[:-1]
    if bool((sizes <= 0).any()):
        empty = ids[sizes <= 0].tolist()
        raise EmptyGraphError(f"GraphBatch: graph(s) {empty} have no node")
    expected = torch.repeat_interleave(torch.arange(graphs, device=ptr.device), sizes)
    if not torch.equal(vector.to(torch.long), expected):
        raise BatchVectorError("GraphBatch.batch disagrees with ptr: each graph's rows "
                               "must be one contiguous run, in graph order")
    edges = inputs.edge_index
    if (not isinstance(edges, torch.Tensor) or edges.ndim != 2 or edges.shape[0] != 2
            or edges.dtype != torch.long):
        raise CrossGraphEdgeError("GraphBatch.edge_index must be a (2, edges) int64 tensor")
    if edges.numel():
        if int(edges.min()) < 0 or int(edges.max()) >= rows:
            raise CrossGraphEdgeError(f"GraphBatch.edge_index names a node outside the "
                                      f"batch's {rows} rows")
        crossing = vector[edges[0]] != vector[edges[1]]
        if bool(crossing.any()):
            first = int(crossing.nonzero()[0, 0])
            a, b = int(vector[edges[0, first]]), int(vector[edges[1, first]])
            raise CrossGraphEdgeError(f"GraphBatch: edge {edges[:, first].tolist()} joins "
                                      f"graph {int(ids[a])} to graph {int(ids[b])}")


def check_targets(inputs: GraphBatch, target: Any) -> None:
    """One integer target per graph of ``inputs`` (spec §25)."""
    if target is None:
        return
    if (not isinstance(target, torch.Tensor) or target.ndim != 1
            or target.is_floating_point() or target.is_complex()):
        raise GraphTargetError(f"a graph batch's targets must be a 1-D integer tensor, one "
                               f"per graph; got {getattr(target, 'shape', type(target).__name__)}")
    if target.numel() != inputs.num_graphs:
        raise GraphTargetError(f"a graph batch of {inputs.num_graphs} graph(s) has "
                               f"{target.numel()} target(s): each graph has one")
