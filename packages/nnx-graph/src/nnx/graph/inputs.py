"""``GraphInputs``: what a graph net reads from one batch — the graph and its seed rows.

A node-level batch is ``(GraphInputs, y_seed)``: the net passes messages over the whole
(sub)graph and returns only the seed rows (spec §3.1, "graph seed-row slicing"), so the
default train step, ``evaluate()`` and ``predict()`` see exactly one row per seed node,
never the neighbours that were only there to be aggregated; ``predict_proba`` names
each row by its global node id (``sample_ids()``, core's ``IdentifiedInputs``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["GraphInputs", "GraphLevelBatchError", "refuse_graph_level"]


@dataclass(frozen=True)
class GraphInputs:
    """Node features ``x`` (N, F), ``edge_index`` (2, E) over local rows, and ``seed``:
    the local rows scored, and ``node_ids``: each local row's global node id."""

    x: torch.Tensor
    edge_index: torch.Tensor
    seed: torch.Tensor
    node_ids: torch.Tensor

    @property
    def seed_ids(self) -> torch.Tensor:
        """The global node id of each seed row."""
        return self.node_ids[self.seed]

    def sample_ids(self) -> torch.Tensor:
        """``seed_ids``: predict_proba's sample ids for these rows (spec §3.1; the
        :class:`nnx.extend.IdentifiedInputs` protocol)."""
        return self.seed_ids

    def __len__(self) -> int:
        return int(self.seed.numel())

    def to(self, device: torch.device | str) -> GraphInputs:
        return GraphInputs(self.x.to(device), self.edge_index.to(device),
                           self.seed.to(device), self.node_ids.to(device))


class GraphLevelBatchError(TypeError):
    """A node-level consumer (a node net, ``NNGraphDataset``) was given whole graphs (a
    ``GraphCollection``, its batches, or a torch-geometric batch of several graphs):
    scoring their nodes as one graph's would mix graphs, so it is refused by name."""


def refuse_graph_level(owner: str, value: object) -> None:
    """Raise :class:`GraphLevelBatchError` when ``value`` holds whole graphs: it says so
    (``graph_level``, nnx.graph_tasks' collections and batches) or is a torch-geometric
    batch of more than one graph (``num_graphs``)."""
    several = getattr(value, "num_graphs", 1)
    if getattr(value, "graph_level", False) or (isinstance(several, int) and several > 1):
        raise GraphLevelBatchError(
            f"{owner} is node-level (one graph, scored node by node); got "
            f"{type(value).__name__} holding whole graphs. Classify graphs with "
            "nnx.graph_tasks (GraphCollection, graph_classifier_spec, GraphClassifier)")
