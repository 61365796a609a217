"""A FeedFwdNN's params kept aligned with its layers after surgery (spec §16).

``NNModel`` rebuilds a FeedFwdNN from its ``NNParams`` (a checkpoint records them), so
a surgery that changes the hidden layers writes params that build exactly the new
layers: the hidden widths and the per-layer activations and dropouts. A per-layer list
equal everywhere is left out of the recorded state by NNParams itself, so a net whose
layers all share one activation and dropout keeps its plain recorded form.
"""

from __future__ import annotations

import dataclasses

from nnx import Activations, NNParams

__all__ = ["params_inserted", "params_removed", "params_widened"]


def _with(params: NNParams, widths: list[int], acts: list[Activations],
          drops: list[float]) -> NNParams:
    # A list equal to the shared value is left unset, so the params equal the ones a
    # user would write for the new net; replace() runs the params' own validation.
    same_act = all(a is params.activation for a in acts)
    same_drop = all(p == params.dropout_prob for p in drops)
    return dataclasses.replace(params, hidden_dims=tuple(widths),
                               activations=None if same_act else tuple(acts),
                               dropout_probs=None if same_drop else tuple(drops))


def _lists(params: NNParams) -> tuple[list[int], list[Activations], list[float]]:
    return (list(params.hidden_dims), list(params.layer_activations),
            list(params.layer_dropouts))


def params_widened(params: NNParams, layer: int, width: int) -> NNParams:
    """Hidden layer ``layer`` is ``width`` wide."""
    widths, acts, drops = _lists(params)
    widths[layer] = width
    return _with(params, widths, acts, drops)


def params_inserted(params: NNParams, layer: int, width: int, activation: Activations,
                    dropout: float) -> NNParams:
    """A hidden layer inserted at position ``layer``."""
    widths, acts, drops = _lists(params)
    widths.insert(layer, width)
    acts.insert(layer, activation)
    drops.insert(layer, dropout)
    return _with(params, widths, acts, drops)


def params_removed(params: NNParams, layer: int) -> NNParams:
    """Hidden layer ``layer`` removed."""
    widths, acts, drops = _lists(params)
    del widths[layer], acts[layer], drops[layer]
    return _with(params, widths, acts, drops)
