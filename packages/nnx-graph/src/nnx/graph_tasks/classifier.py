"""``GraphClassifierNet``: encoder → ``GraphPool`` → head, one row of logits per graph
(spec §25), and ``graph_classifier_spec``, its registered recipe.

The encoder is a node-level net of ``nnx.graph`` (GCN, GraphSAGE or GAT) mapping node
features through ``hidden_dims``; its node rows are pooled per graph and the head (an
activation, then a linear layer) gives ``(G, num_classes)`` logits. ``forward`` takes a
:class:`GraphBatch`, moves it to the net's device and checks it before any layer runs;
``unpack_batch`` checks the targets (one per graph) where core splits the batch, so every
path (train, evaluate, predict) refuses a malformed batch before the forward pass.

The recipe is the model factory ``graph.classifier@v1`` (an ``nnx.model_factories``
entry point): ``graph_classifier_spec(...)`` is the ``ModelSpec`` run.yaml records, so
``NNModel.from_checkpoint`` rebuilds the same encoder, pool and head from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from nnx import ModelSpec
from nnx.extend import NNParams, check_choice, check_count, check_seed
from nnx.graph import GraphAttNN, GraphConvNN, GraphSageNN
from nnx.graph.inputs import refuse_link_level
from nnx.graph_tasks.batch import GraphBatch, check_batch, check_targets
from nnx.graph_tasks.errors import GraphBatchError, GraphExportRefused
from nnx.graph_tasks.pool import POOLS, GraphPool

__all__ = ["ENCODERS", "RECIPE", "GraphClassifierNet", "build_graph_classifier",
           "graph_classifier_spec", "recipe_config"]

#: The encoders a graph classifier is built with.
ENCODERS = {"graph_conv": GraphConvNN, "graph_sage": GraphSageNN, "graph_att": GraphAttNN}
#: The registered recipe: (model factory id, version).
RECIPE = ("graph.classifier", 1)


class GraphClassifierNet(nn.Module):
    """Encoder (node rows) → ``GraphPool(pool)`` → head: ``(G, num_classes)`` logits."""

    def __init__(self, *, input_dim: int, num_classes: int, hidden_dims: Sequence[int],
                 encoder: str = "graph_conv", pool: str = "mean") -> None:
        super().__init__()
        self.config = recipe_config(input_dim=input_dim, num_classes=num_classes,
                                    hidden_dims=hidden_dims, encoder=encoder, pool=pool)
        widths = tuple(self.config["hidden_dims"])
        self.encoder = ENCODERS[encoder](NNParams(input_dim=input_dim, output_dim=widths[-1],
                                                  hidden_dims=widths[:-1]))
        self.pool = GraphPool(pool)
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(widths[-1], num_classes))

    def unpack_batch(self, batch: Any) -> tuple[tuple[GraphBatch], torch.Tensor | None]:
        """``((GraphBatch,), y)`` of a ``(GraphBatch, y)`` batch (or a bare GraphBatch),
        its targets checked against its graphs; a link batch is refused by name."""
        refuse_link_level(type(self).__name__, "graph-level", batch)
        inputs, target = batch, None
        if isinstance(batch, (tuple, list)) and len(batch) in (1, 2):
            inputs, target = batch[0], (batch[1] if len(batch) == 2 else None)
        if not isinstance(inputs, GraphBatch):
            raise GraphBatchError(f"a graph classifier reads (GraphBatch, y) batches (a "
                                  f"GraphCollection's loader); got {type(inputs).__name__}")
        check_targets(inputs, target)
        return (inputs,), target

    def refuse_onnx_export(self) -> None:
        """Asked by ``NNModel.to_onnx`` before anything is read or written: a graph
        classifier's forward reads a whole GraphBatch, which no tensor-only ONNX graph
        stands for."""
        raise GraphExportRefused(
            "a graph classifier has no ONNX form: its forward reads a whole GraphBatch "
            "(features, edges, batch vector and ids together), so ONNX export is refused "
            "before anything is written; export_state_dict() keeps the weights")

    def forward(self, inputs: GraphBatch, *candidates: Any) -> torch.Tensor:
        # ``candidates``: what a link objective passes after (x, edge_index), refused by name.
        refuse_link_level(type(self).__name__, "graph-level", inputs, candidates)
        if not isinstance(inputs, GraphBatch):
            raise GraphBatchError(f"a graph classifier's forward takes one GraphBatch; "
                                  f"got {type(inputs).__name__}")
        device = next(self.head.parameters()).device
        if inputs.x.device != device:
            inputs = inputs.to(device)
        check_batch(inputs)
        nodes = self.encoder(inputs.x, inputs.edge_index)
        pooled = self.pool(nodes, inputs.batch, inputs.num_graphs)
        out: torch.Tensor = self.head(pooled)
        return out


def recipe_config(*, input_dim: int, num_classes: int, hidden_dims: Sequence[int],
                  encoder: str, pool: str) -> dict[str, Any]:
    """The recipe's checked configuration, as plain data (what run.yaml records)."""
    widths = [check_count(f"hidden_dims[{i}]", w) for i, w in enumerate(hidden_dims)]
    if not widths:
        raise ValueError("a graph classifier needs at least one hidden width (the "
                         "encoder's output)")
    return {"input_dim": check_count("input_dim", input_dim),
            "num_classes": check_count("num_classes", num_classes),
            "hidden_dims": widths,
            "encoder": check_choice("encoder", encoder, tuple(ENCODERS)),
            "pool": check_choice("pool", pool, POOLS)}


def build_graph_classifier(config: Mapping[str, Any]) -> GraphClassifierNet:
    """The ``graph.classifier@v1`` model factory: the net ``config`` describes."""
    unknown = sorted(set(config) - {"input_dim", "num_classes", "hidden_dims", "encoder",
                                    "pool"})
    if unknown:
        raise ValueError(f"graph classifier config: unknown key(s) {unknown}")
    return GraphClassifierNet(input_dim=config["input_dim"],
                              num_classes=config["num_classes"],
                              hidden_dims=tuple(config["hidden_dims"]),
                              encoder=config.get("encoder", "graph_conv"),
                              pool=config.get("pool", "mean"))


def graph_classifier_spec(*, input_dim: int, num_classes: int,
                          hidden_dims: Sequence[int] = (32,), encoder: str = "graph_conv",
                          pool: str = "mean", seed: int = 0) -> ModelSpec:
    """The registered recipe (``NNModelParams(net=graph_classifier_spec(...))``): checked
    now by building nothing but the config, recorded in run.yaml, rebuilt on reload."""
    config = recipe_config(input_dim=input_dim, num_classes=num_classes,
                           hidden_dims=hidden_dims, encoder=encoder, pool=pool)
    return ModelSpec(RECIPE[0], RECIPE[1], config, seed=check_seed("seed", seed))
