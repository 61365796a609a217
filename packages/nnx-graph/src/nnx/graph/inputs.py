"""``GraphInputs``: what a graph net reads from one batch — the graph and its seed rows.

A node-level batch is ``(GraphInputs, y_seed)``: the net passes messages over the whole
(sub)graph and returns only the seed rows (spec §3.1, "graph seed-row slicing"), so the
default train step, ``evaluate()`` and ``predict()`` see exactly one row per seed node,
never the neighbours that were only there to be aggregated; ``predict_proba`` names
each row by its global node id (``sample_ids()``, core's ``IdentifiedInputs``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["GraphInputs", "GraphLevelBatchError", "LinkLevelBatchError", "refuse_graph_level",
           "refuse_link_level"]


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


class LinkLevelBatchError(TypeError):
    """A node-level net or a graph classifier was given link batches (nnx.link_tasks'
    candidate pairs): it scores nodes or graphs, never candidate pairs, and cannot check a
    batch against its link split (spec §26 "Batch roles"), so it is refused by name before
    its forward pass runs."""


def _link_batch(value: object) -> bool:
    """Whether ``value`` (or an item of a tuple / list batch) carries candidate pairs:
    a ``link_role`` or ``edge_label_index`` field, as ``LinkTask.loader`` batches do."""
    items: Sequence[Any] = value if isinstance(value, (tuple, list)) else (value,)
    for item in items:
        if isinstance(item, Mapping):
            if "link_role" in item or "edge_label_index" in item:
                return True
        elif isinstance(item, torch.Tensor):
            continue
        elif getattr(item, "link_role", None) is not None or \
                getattr(item, "edge_label_index", None) is not None:
            return True
    return False


def refuse_link_level(owner: str, level: str, value: object,
                      candidates: Sequence[object] = ()) -> None:
    """Raise :class:`LinkLevelBatchError` when ``value`` is a link batch, or when
    ``candidates`` is not empty: the third input (``edge_label_index``) a link objective
    passes its net (``net(x, edge_index, edge_label_index)``)."""
    if not candidates and not _link_batch(value):
        return
    raise LinkLevelBatchError(
        f"{owner} is {level}: it scores {'nodes' if level == 'node-level' else 'graphs'}, "
        "never candidate pairs, and cannot check a link batch against its split. Predict "
        "links with nnx.link_tasks: a net(x, edge_index, edge_label_index) such as "
        "link_predictor_spec(...)'s, with task=LinkTask(split)")
