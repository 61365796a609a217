"""The named refusals of nnx.surgery (spec §16), each raised before anything is copied."""

from __future__ import annotations

__all__ = ["DeepenSiteError", "SurgeryBoundaryError", "SurgeryError", "SurgeryShapeError",
           "SurgeryTargetError"]


class SurgeryError(ValueError):
    """A surgery the net cannot take; the input net is left exactly as it was."""


class SurgeryTargetError(SurgeryError):
    """The named module is missing, of the wrong kind, aliased under several names, or
    sits in a container whose consumer surgery does not infer."""


class SurgeryBoundaryError(SurgeryError):
    """Between a widened layer and its consumer sits a module that is not elementwise
    (Softmax, LayerNorm, BatchNorm, a container, anything unknown)."""


class DeepenSiteError(SurgeryError):
    """The effective activation at a deepen site is not ReLU, so no identity layer
    inserted there preserves the function."""


class SurgeryShapeError(SurgeryError):
    """A requested size that the surgery cannot honour (a narrower width, a rank out of
    range, a shrinking embedding, a dropped layer whose neighbours would no longer fit)."""
