"""nnx.viz's named errors, each raised before the model runs or anything is drawn."""

from __future__ import annotations

__all__ = ["NoGradientError", "UnknownLayerError", "UnknownMethodError"]


class UnknownLayerError(ValueError):
    """``activation_map``'s layer name is not a submodule of the net; the message lists
    the first available names (``model.named_modules()``)."""


class UnknownMethodError(ValueError):
    """``attribute``'s ``method`` is not one of the six Captum methods it dispatches to."""


class NoGradientError(ValueError):
    """``gradient_flow`` found no trainable parameter with a gradient (usually:
    ``loss.backward()`` was not called, or ``zero_grad(set_to_none=True)`` ran after it)."""
