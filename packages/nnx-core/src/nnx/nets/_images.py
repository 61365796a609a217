"""Shape checks shared by the image nets, which accept images or flattened rows."""

from __future__ import annotations

from torch import Tensor

__all__ = ["as_images"]


def as_images(x: Tensor, channels: int, side: int, owner: str) -> Tensor:
    """Return ``x`` as ``(N, channels, side, side)``.

    Data pipelines often hand over flattened ``(N, C·H·W)`` rows (the layout
    FeedFwdNN wants), so both layouts are accepted; anything else is refused
    up front rather than surfacing later as an opaque conv or matmul error.
    """
    image = (channels, side, side)
    if x.ndim == 4 and tuple(x.shape[1:]) == image:
        return x
    if x.ndim == 2 and x.shape[1] == channels * side * side:
        return x.reshape(x.shape[0], *image)
    raise ValueError(
        f"{owner} expects input of shape (N, {channels}, {side}, {side}) or "
        f"(N, {channels * side * side}); got {tuple(x.shape)}"
    )
