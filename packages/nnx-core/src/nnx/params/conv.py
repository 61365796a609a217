"""NNConvParams: a convolutional stack in front of NNParams' dense head."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from nnx._foundation.config_base import always, set_field
from nnx._foundation.validation import check_count, check_counts
from nnx.params.net import NNParams

__all__ = ["NNConvParams"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NNConvParams(NNParams):
    """ConvNN's shape.

    ``input_dim`` is the pixel count of one square input channel (H × W, a
    perfect square): 64 for 8×8 images. Each entry of ``conv_channels`` adds a
    block conv(kernel_size, stride, padding) → activation → max-pool(pool_size);
    the flattened result feeds the dense layers of ``hidden_dims`` and then
    ``output_dim`` logits.
    """

    conv_channels: tuple[int, ...] = always((16, 32))
    in_channels: int = always(1)
    kernel_size: int = always(3)
    stride: int = 1
    padding: int = 1
    pool_size: int = 2

    _DECODERS: ClassVar[Mapping[str, Any]] = {**NNParams._DECODERS, "conv_channels": tuple}

    def validate(self) -> None:
        NNParams.validate(self)
        n = self.field_name
        set_field(self, "conv_channels", check_counts(n("conv_channels"), self.conv_channels))
        if not self.conv_channels:
            raise ValueError(f"{n('conv_channels')} must list at least one convolution block")
        for field in ("in_channels", "kernel_size", "stride", "pool_size"):
            set_field(self, field, check_count(n(field), getattr(self, field)))
        set_field(self, "padding", check_count(n("padding"), self.padding, minimum=0))
        assert self.input_dim is not None
        side = math.isqrt(self.input_dim)
        if side * side != self.input_dim:
            raise ValueError(
                f"{n('input_dim')} is the pixel count of a square image (H × W) and must be a "
                f"perfect square; got {self.input_dim}"
            )
        self.feature_sides()

    @property
    def image_side(self) -> int:
        assert self.input_dim is not None
        return math.isqrt(self.input_dim)

    def feature_sides(self) -> tuple[int, ...]:
        """The spatial side after each block; refuses a stack that shrinks the image away."""
        sides = []
        side = self.image_side
        for i in range(len(self.conv_channels)):
            side = (side + 2 * self.padding - self.kernel_size) // self.stride + 1
            side //= self.pool_size
            if side < 1:
                raise ValueError(
                    f"{self.field_name('conv_channels')}: block {i} reduces a {self.image_side}×"
                    f"{self.image_side} image to nothing (kernel_size={self.kernel_size}, "
                    f"stride={self.stride}, padding={self.padding}, pool_size={self.pool_size})"
                )
            sides.append(side)
        return tuple(sides)

    @property
    def flat_features(self) -> int:
        """Width of the flattened conv output that feeds the dense head."""
        return self.conv_channels[-1] * self.feature_sides()[-1] ** 2
