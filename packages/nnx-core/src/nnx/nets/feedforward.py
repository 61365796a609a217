"""FeedFwdNN: a multilayer perceptron built from NNParams."""

from __future__ import annotations

import itertools
import math

from torch import Tensor, nn

from nnx.nets._batch import XYBatch
from nnx.params.net import NNParams

__all__ = ["FeedFwdNN"]


class FeedFwdNN(XYBatch, nn.Module):
    """``hidden_dims`` blocks of linear → activation → dropout, then a linear to logits.

    ``layers`` holds only the Linear layers, so parameter names are the stable
    ``layers.{i}.weight`` / ``layers.{i}.bias`` (the last index is the output
    layer) that per-layer optimizer groups and checkpoints refer to; the
    parameter-free activations and dropouts live in lists of their own.
    """

    def __init__(self, params: NNParams) -> None:
        super().__init__()
        self.params = params
        assert params.input_dim is not None  # NNParams validation fills it in
        widths = (params.input_dim, *params.hidden_dims)
        self.layers = nn.ModuleList(
            self._hidden_linear(w_in, w_out) for w_in, w_out in itertools.pairwise(widths)
        )
        self.layers.append(nn.Linear(widths[-1], params.output_dim))
        self.activations = nn.ModuleList(act() for act in params.layer_activations)
        self.dropouts = nn.ModuleList(nn.Dropout(p) for p in params.layer_dropouts)

    def _hidden_linear(self, in_features: int, out_features: int) -> nn.Module:
        """The linear map of one hidden layer; subclasses swap in other layer kinds."""
        return nn.Linear(in_features, out_features)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim == 0:
            raise ValueError(f"{type(self).__name__} expects a batch (N, ...); got a scalar")
        # Flatten everything after the batch axis so images or sequences of
        # features feed straight in.
        # (math.prod rather than -1 so an empty batch reshapes too.)
        rows = x.reshape(x.shape[0], math.prod(x.shape[1:]))
        if rows.shape[1] != self.params.input_dim:
            raise ValueError(
                f"{type(self).__name__} expects {self.params.input_dim} features per row; "
                f"got {rows.shape[1]} (input shape {tuple(x.shape)})"
            )
        x = rows
        hidden = zip(self.layers[:-1], self.activations, self.dropouts, strict=True)
        for linear, act, drop in hidden:
            x = drop(act(linear(x)))
        out: Tensor = self.layers[-1](x)  # raw logits: the loss applies any softmax
        return out
