"""ViTNN: a Vision Transformer classifier built from NNViTParams."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nnx.nets._batch import XYBatch
from nnx.nets._images import as_images
from nnx.params.vit import NNViTParams

__all__ = ["ViTNN"]


class ViTNN(XYBatch, nn.Module):
    """Patch embedding + CLS token → pre-norm encoder layers → LayerNorm → linear head."""

    def __init__(self, params: NNViTParams) -> None:
        super().__init__()
        self.params = params
        assert params.n_heads is not None  # NNViTParams requires it
        d = params.d_model
        # A conv with kernel = stride = patch_size embeds each patch independently.
        self.patch_embed = nn.Conv2d(
            params.in_channels, d, kernel_size=params.patch_size, stride=params.patch_size
        )
        self.cls_token = nn.Parameter(torch.empty(1, 1, d))
        self.pos_embed = nn.Parameter(torch.empty(1, params.n_patches + 1, d))
        # Small init, as in ViT: large random embeddings would swamp the patch signal.
        nn.init.normal_(self.cls_token, std=0.02)
        nn.init.normal_(self.pos_embed, std=0.02)
        self.embed_dropout = nn.Dropout(params.dropout_prob)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(
                d,
                params.n_heads,
                dim_feedforward=d * params.ffn_mult,
                dropout=params.dropout_prob,
                activation="gelu",
                batch_first=True,
                norm_first=True,
            )
            for _ in range(params.n_layers)
        )
        # Pre-norm layers leave their residual stream un-normalized; normalize once at the end.
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, params.output_dim)

    def forward(self, x: Tensor) -> Tensor:
        p = self.params
        images = as_images(x, p.in_channels, p.image_size, type(self).__name__)
        tokens = self.patch_embed(images).flatten(2).transpose(1, 2)  # (N, n_patches, d)
        cls = self.cls_token.expand(tokens.shape[0], -1, -1)
        h = self.embed_dropout(torch.cat((cls, tokens), dim=1) + self.pos_embed)
        for block in self.blocks:
            h = block(h)
        out: Tensor = self.head(self.norm(h[:, 0]))  # classify from the CLS token
        return out
