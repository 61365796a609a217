"""The named refusal of nnx.prune, raised before any weight changes."""

from __future__ import annotations

__all__ = ["PruneError"]


class PruneError(ValueError):
    """A prune is refused: an amount outside [0, 1), a net with no Linear / Conv weight, a
    2:4 pattern on a layer whose input width is not a multiple of 4, or a net still
    carrying pruning masks or weight_norm / spectral_norm parametrizations (spec §16)."""
