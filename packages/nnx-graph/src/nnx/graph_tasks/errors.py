"""The named errors of ``nnx.graph_tasks`` (spec §25): each says which rule a collection
or a batch broke, raised before anything is trained, scored or written."""

from __future__ import annotations

__all__ = ["BatchVectorError", "CrossGraphEdgeError", "EmptyGraphError",
           "GraphBatchError", "GraphCollectionError", "GraphExportRefused", "GraphIdError",
           "GraphTargetError"]


class GraphCollectionError(ValueError):
    """A ``GraphCollection`` argument breaks a rule: ids, node counts, feature width,
    edges or targets (the collection checks every graph once, when it is built)."""


class GraphBatchError(ValueError):
    """A graph-level batch that cannot be scored graph by graph; the base of the
    specific batch errors below."""


class GraphIdError(GraphBatchError):
    """Graph ids missing, not integers, negative or repeated within a batch."""


class EmptyGraphError(GraphBatchError):
    """A graph of the batch has no node (``ptr`` does not strictly increase)."""


class BatchVectorError(GraphBatchError):
    """``ptr`` and the ``batch`` vector disagree (or do not cover the node rows)."""


class CrossGraphEdgeError(GraphBatchError):
    """An edge joins nodes of two graphs, or names a node outside the batch."""


class GraphTargetError(GraphBatchError):
    """The batch's targets are not one integer per graph."""


class GraphExportRefused(TypeError):
    """A graph classifier reads a whole batch of graphs (features, edges, the batch
    vector): no single-tensor ONNX graph stands for it, so export is refused before
    anything is written (``export_state_dict()`` keeps the weights)."""
