"""``GraphClassifier``: whole-graph classification as a Task-protocol object (spec §25).

``NNModel(params=NNModelParams(net=graph_classifier_spec(...), loss=Losses.CROSS_ENTROPY),
task=GraphClassifier(num_classes))`` trains, evaluates and predicts through core's
default paths: each graph is one row, so the per-batch machinery beside the task (the
categorical machinery of the model's loss) sums the loss over labeled graphs and divides
by their count, per batch, per epoch (each batch's own denominator) and per evaluation:
loss and metrics are averaged over labeled graphs, never batches or nodes (IGNORE-target
graphs count in neither). The task inherits nothing from nnx-core. What it adds:

* ``check_train`` checks every training and validation batch before anything is built
  (a GraphCollection's loader was checked with its collection; its shuffling generator
  is never advanced here);
* ``sample_ids`` names each predicted row by its graph id (core's ``batch_row_ids``);
* ``identity()`` (run-id block ``{"kind": "graph.classifier", ...}``) and component
  state ``"graph.classifier"``, so a resume under another class count is refused.

The net itself checks every batch again before its forward (``GraphClassifierNet``), so
the spec's TaskSpec form, ``NNModelParams(net=..., task=TaskSpec.categorical(n,
ignore_index=IGNORE))`` without this object, refuses the same batches (docs/graphs.md).
"""

from __future__ import annotations

from typing import Any

from nnx.extend import ComponentSpec, batch_row_ids, check_count
from nnx.graph.inputs import refuse_link_level
from nnx.graph_tasks.batch import GraphBatch, check_batch, check_targets
from nnx.graph_tasks.collection import IGNORE, GraphLoader
from nnx.graph_tasks.errors import GraphBatchError, GraphTargetError

__all__ = ["COMPONENT", "GraphClassifier"]

COMPONENT = "graph.classifier"
_STATE_VERSION = 1


class GraphClassifier:
    """Graph-level classification into ``num_classes`` classes (targets ``0..n-1``,
    or :data:`IGNORE` for an unlabeled graph)."""

    def __init__(self, num_classes: int) -> None:
        self.num_classes = check_count("GraphClassifier.num_classes", num_classes)

    def __repr__(self) -> str:
        return f"GraphClassifier(num_classes={self.num_classes})"

    def check_batch(self, batch: Any) -> None:
        """``batch`` is ``(GraphBatch, y)`` of well-formed graphs with one target in
        ``0..num_classes-1`` (or IGNORE) per graph (the specific errors of §25)."""
        refuse_link_level("GraphClassifier", "graph-level", batch)
        if not (isinstance(batch, (tuple, list)) and len(batch) == 2
                and isinstance(batch[0], GraphBatch)):
            raise GraphBatchError(f"a graph classifier reads (GraphBatch, y) batches (a "
                                  f"GraphCollection's loader); got {type(batch).__name__}")
        inputs, target = batch
        check_batch(inputs)
        check_targets(inputs, target)
        bad = (target != IGNORE) & ((target < 0) | (target >= self.num_classes))
        if bool(bad.any()):
            raise GraphTargetError(f"graph(s) {inputs.graph_id[bad].tolist()} have targets "
                                   f"{target[bad].tolist()} outside 0..{self.num_classes - 1}")

    # -- the Task protocol -------------------------------------------------------------
    def objective(self) -> None:
        """The default supervised step: one row per graph (module docstring)."""
        return None

    def eval_step(self) -> None:
        """``model.evaluate``: its record averages over labeled graphs."""
        return None

    def metric_specs(self) -> tuple[()]:
        return ()

    def sample_ids(self, data: Any, rows: int) -> Any:
        """Each row's graph id, through shuffling and concatenation."""
        return batch_row_ids(data)

    def refuse_default(self, path: str) -> None:
        """Every default path scores graph rows: accept."""
        return None

    def identity(self) -> dict[str, Any]:
        return {"kind": COMPONENT, "num_classes": self.num_classes}

    def check_train(self, params: Any) -> None:
        """Every training and validation batch checked before anything is built."""
        for loader in (params.train_loader, params.val_loader):
            if loader is None or isinstance(loader, GraphLoader):
                continue  # checked with its collection; iterating it would draw
            for batch in loader:
                self.check_batch(batch)

    # -- component state "graph.classifier" ----------------------------------------------
    def component_spec(self) -> ComponentSpec:
        return ComponentSpec(COMPONENT, version=_STATE_VERSION)

    def component_state(self) -> dict[str, Any]:
        return {"num_classes": self.num_classes}

    def check_component_state(self, state: Any, *, version: int) -> list[str]:
        if not isinstance(state, dict) or state.get("num_classes") != self.num_classes:
            return [f"{COMPONENT}: the checkpoint was trained with {state!r}; this run's task "
                    f"has num_classes={self.num_classes}"]
        return []

    def load_component_state(self, state: Any, *, version: int) -> None:
        # Nothing evolves: check_component_state has proved the configuration equal.
        return None
