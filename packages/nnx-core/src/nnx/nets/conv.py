"""ConvNN: convolution blocks in front of a FeedFwdNN-style dense head."""

from __future__ import annotations

from torch import Tensor, nn

from nnx.nets._batch import XYBatch
from nnx.nets._images import as_images
from nnx.nets.feedforward import FeedFwdNN
from nnx.params.conv import NNConvParams
from nnx.params.net import NNParams

__all__ = ["ConvNN"]


class ConvNN(XYBatch, nn.Module):
    """``features``: conv → activation → max-pool per ``conv_channels`` entry;
    ``head``: a FeedFwdNN over the flattened features, ending in raw logits."""

    def __init__(self, params: NNConvParams) -> None:
        super().__init__()
        self.params = params
        blocks: list[nn.Module] = []
        in_ch = params.in_channels
        for out_ch in params.conv_channels:
            blocks += [
                nn.Conv2d(in_ch, out_ch, params.kernel_size, params.stride, params.padding),
                params.activation(),
                nn.MaxPool2d(params.pool_size),
            ]
            in_ch = out_ch
        self.features = nn.Sequential(*blocks)
        # The dense part is exactly a FeedFwdNN over flat_features inputs, so
        # reuse it (same per-layer activations and dropouts) rather than
        # re-implementing the stack.
        self.head = FeedFwdNN(
            NNParams(
                input_dim=params.flat_features,
                output_dim=params.output_dim,
                hidden_dims=params.hidden_dims,
                activations=params.layer_activations,
                dropout_probs=params.layer_dropouts,
            )
        )

    def forward(self, x: Tensor) -> Tensor:
        p = self.params
        images = as_images(x, p.in_channels, p.image_side, type(self).__name__)
        out: Tensor = self.head(self.features(images).flatten(1))
        return out
