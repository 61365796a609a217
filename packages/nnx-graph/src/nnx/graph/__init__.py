"""nnx-graph: node classification on one graph over torch-geometric (spec §3, §4.2, §13).

It joins the ``nnx`` namespace the way every add-on does: it ships ``nnx/graph/`` (never
``nnx/__init__.py``), imports core through ``nnx`` and ``nnx.extend`` only, and announces
its names once, as entry points in its ``pyproject.toml``:

``nnx.exports`` ``GraphConvNN``, ``GraphSageNN``, ``GraphAttNN``, ``NNGraphDataset``
``nnx.nets``    ``GRAPH_CONV``, ``GRAPH_SAGE``, ``GRAPH_ATT`` (``Nets.GRAPH_CONV(params=...)``)

Only torch-geometric's pure-torch message passing is used, so pyg-lib, torch-scatter and
torch-sparse are never needed.
"""

from nnx.graph.dataset import NNGraphDataset
from nnx.graph.inputs import GraphInputs, GraphLevelBatchError, LinkLevelBatchError
from nnx.graph.nets import (
    GRAPH_ATT,
    GRAPH_CONV,
    GRAPH_SAGE,
    GraphAttNN,
    GraphConvNN,
    GraphSageNN,
)
from nnx.graph.sampling import NeighborLoader

__all__ = ["GRAPH_ATT", "GRAPH_CONV", "GRAPH_SAGE", "GraphAttNN", "GraphConvNN",
           "GraphInputs", "GraphLevelBatchError", "GraphSageNN", "LinkLevelBatchError",
           "NNGraphDataset", "NeighborLoader"]

# Which skeleton this package follows (docs/extending.md, "Add-on skeletons"): training
# extensions, each a params config, its module and one entry point.
__nnx_skeleton__ = {"kind": "training"}
