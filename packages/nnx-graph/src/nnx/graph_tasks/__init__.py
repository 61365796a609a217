"""nnx.graph_tasks: whole-graph classification over torch-geometric (spec §25).

One row per graph, keyed by a stable graph id, through the ordinary training,
evaluation, prediction and reload paths::

    GraphCollection(graphs, ids, targets | unlabeled=[...]) --loader()--> (GraphBatch, y)
    GraphClassifierNet: encoder(x, edge_index) -> GraphPool("mean" | "sum") -> head
    NNModel(params=NNModelParams(net=graph_classifier_spec(...), loss=...),
            task=GraphClassifier(n))

Part of the nnx-graph distribution; names announced once, as its entry points
(``nnx.exports``; the recipe ``graph.classifier@v1`` under ``nnx.model_factories``).
"""

from nnx.graph_tasks.batch import GraphBatch
from nnx.graph_tasks.classifier import (
    GraphClassifierNet,
    build_graph_classifier,
    graph_classifier_spec,
)
from nnx.graph_tasks.collection import IGNORE, GraphCollection, GraphLoader
from nnx.graph_tasks.errors import (
    BatchVectorError,
    CrossGraphEdgeError,
    EmptyGraphError,
    GraphBatchError,
    GraphCollectionError,
    GraphExportRefused,
    GraphIdError,
    GraphTargetError,
)
from nnx.graph_tasks.pool import GraphPool
from nnx.graph_tasks.task import GraphClassifier

__all__ = ["IGNORE", "BatchVectorError", "CrossGraphEdgeError", "EmptyGraphError",
           "GraphBatch", "GraphBatchError", "GraphClassifier", "GraphClassifierNet",
           "GraphCollection", "GraphCollectionError", "GraphExportRefused", "GraphIdError",
           "GraphLoader", "GraphPool", "GraphTargetError", "build_graph_classifier",
           "graph_classifier_spec"]

# Which skeleton this package follows (docs/extending.md, "Add-on skeletons").
__nnx_skeleton__ = {"kind": "training"}
