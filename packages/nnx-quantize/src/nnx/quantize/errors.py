"""The named refusal of nnx.quantize, raised before anything is copied or changed."""

from __future__ import annotations

__all__ = ["QuantizeError"]


class QuantizeError(ValueError):
    """``quantize_int8`` is refused: not an NNModel, or a net with no ``nn.Linear`` to
    quantize, or one already quantized."""
