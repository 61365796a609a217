"""A checkpoint's logits over a loader, embedded in two dimensions by t-SNE.

The checkpoint's model is rebuilt as ``NNModel.from_checkpoint`` rebuilds it (a runtime
module needs ``module=``), each loader batch is split as training splits it
(``batch_adapter=``, else the model's own), and the forward runs in eval mode under the
non-destructive contract (spec §13.2). Each point is one loader row, coloured by its
target when the targets are class indices.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

from nnx import NNModel
from nnx.extend import POSITIVE, check_count, check_real, check_seed
from nnx.vis_utils.errors import GraphBatchRefusedError
from nnx.viz import extras
from nnx.viz.guard import untouched
from nnx.viz.inputs import split_batch

__all__ = ["two_dim_tsne_checkpoint_logits"]

_OWNER = "nnx.vis_utils.VisUtils.two_dim_tsne_checkpoint_logits"


def _refuse_graphs(batch: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    # nnx-graph marks a batch of whole graphs with graph_level (GraphBatch): its rows
    # are graphs assembled from node rows, not the loader samples a point stands for.
    # The marker is read as an attribute, so nnx-viz never imports nnx-graph.
    for part in (batch, *args, *kwargs.values()):
        if getattr(part, "graph_level", False) is True:
            raise GraphBatchRefusedError(
                f"{_OWNER}: got a batch of whole graphs ({type(part).__name__}); the t-SNE "
                f"of checkpoint logits embeds one point per loader row, and a graph "
                f"collection's batch is graphs built from node rows. Embed the graph "
                f"classifier's predict_proba outputs instead")


def _parts(batch: Any) -> list[Any]:
    """A raw loader batch and its top-level items (a GraphCollection loader yields
    ``(GraphBatch, y)``): what :func:`_refuse_graphs` can see before any adapter runs."""
    return [*batch] if isinstance(batch, (tuple, list)) else []


def _logits(model: Any, batches: Iterable[Any], batch_adapter: Any, max_samples: int
            ) -> tuple[np.ndarray, np.ndarray | None]:
    net = model.net
    rows: list[np.ndarray] = []
    targets: list[np.ndarray] | None = []
    seen = 0
    with untouched(net), torch.no_grad():
        for batch in batches:
            args, kwargs, target = split_batch(_OWNER, model, net, batch, batch_adapter)
            _refuse_graphs(batch, args, kwargs)
            out = net(*args, **kwargs)
            if not isinstance(out, torch.Tensor):
                raise TypeError(f"{_OWNER}: the net must return a logits tensor; got "
                                f"{type(out).__name__}")
            flat = out.detach().float().reshape(out.shape[0], -1).cpu().numpy()
            rows.append(flat)
            if targets is not None:
                if isinstance(target, torch.Tensor) and target.dim() == 1 \
                        and not target.is_floating_point() and len(target) == len(flat):
                    targets.append(target.cpu().numpy())
                else:
                    targets = None  # not class indices: the points are drawn uncoloured
            seen += len(flat)
            if seen >= max_samples:
                break
    logits = np.concatenate(rows)[:max_samples]
    labels = None if targets is None else np.concatenate(targets)[:max_samples]
    return logits, labels


def two_dim_tsne_checkpoint_logits(checkpoint: Any, loader: Any, *,
                                   module: torch.nn.Module | None = None,
                                   batch_adapter: Any = None, max_samples: int = 1000,
                                   perplexity: float = 30.0, seed: int = 0,
                                   ) -> tuple[np.ndarray, Any]:
    """``(points, figure)``: the first ``max_samples`` rows' logits of the model saved in
    ``checkpoint`` (an ``NNCheckpoint`` or a checkpoint path) over ``loader``, embedded
    in 2-D by scikit-learn's t-SNE (``points`` is (n, 2); ``seed`` fixes it), and their
    scatter plot. ``perplexity`` is capped at n - 1 for a small sample. A batch of whole
    graphs raises :class:`GraphBatchRefusedError` before its forward."""
    go, _subplots = extras.plotly(_OWNER)
    tsne = extras.sklearn_tsne(_OWNER)
    check_count(f"{_OWNER}: max_samples", max_samples)
    check_real(f"{_OWNER}: perplexity", perplexity, POSITIVE)
    check_seed(f"{_OWNER}: seed", seed)
    if not isinstance(checkpoint, (str, os.PathLike)) and not hasattr(checkpoint, "state_dict"):
        raise TypeError(f"{_OWNER}: checkpoint must be an NNCheckpoint or a checkpoint path; "
                        f"got {type(checkpoint).__name__}")
    # The first batch is read (once: a shuffling loader's generator advances as for one
    # pass) and a graph batch refused before the checkpoint's weights go anywhere, into
    # the caller's ``module`` included.
    batches = iter(loader)
    first = next(batches, None)
    if first is None:
        raise ValueError(f"{_OWNER}: the loader yielded no batch")
    _refuse_graphs(first, _parts(first), {})
    model = NNModel.from_checkpoint(checkpoint, module=module, batch_adapter=batch_adapter)
    logits, labels = _logits(model, itertools.chain([first], batches), batch_adapter,
                             max_samples)
    if len(logits) < 2:
        raise ValueError(f"{_OWNER}: t-SNE needs at least 2 samples; the loader gave "
                         f"{len(logits)}")
    points = tsne(n_components=2, perplexity=min(float(perplexity), len(logits) - 1.0),
                  random_state=seed, init="pca").fit_transform(logits)
    marker: dict[str, Any] = {"size": 6}
    if labels is not None:
        marker.update(color=labels.tolist(), colorscale="Viridis", showscale=True,
                      colorbar={"title": "target"})
    fig = go.Figure(go.Scatter(x=points[:, 0].tolist(), y=points[:, 1].tolist(),
                               mode="markers", marker=marker, name="logits"))
    fig.update_layout(title="t-SNE of checkpoint logits", xaxis_title="t-SNE 1",
                      yaxis_title="t-SNE 2")
    return np.asarray(points), fig
