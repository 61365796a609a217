"""The named errors of nnx.vis_utils, each raised before anything is computed or written."""

from __future__ import annotations

__all__ = ["GraphBatchRefusedError", "LabelError"]


class LabelError(ValueError):
    """Class labels that cannot be counted: not 1-D integers >= 0, or a length mismatch."""


class GraphBatchRefusedError(TypeError):
    """A whole-graph batch (nnx-graph's GraphCollection loaders) given to the t-SNE of
    checkpoint logits, whose points are the loader's rows, one per sample."""
