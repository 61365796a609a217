"""nnx.lr_finder's named errors."""

from __future__ import annotations

__all__ = ["LRSweepError"]


class LRSweepError(ValueError):
    """The sweep measured nothing to suggest from: the loader yielded no batch, or the
    first batch's loss was not finite (at ``start_lr``: the model or the loss is broken,
    not the rate). The net and every RNG stream are restored before it is raised."""
