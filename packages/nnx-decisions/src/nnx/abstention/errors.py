"""The named errors of nnx.abstention (spec §19)."""

from __future__ import annotations

__all__ = ["AbstentionError", "AbstentionSchemaError"]


class AbstentionError(ValueError):
    """Invalid input (malformed probabilities, a prediction whose class is not a top
    class, a threshold outside [0, 1]), a split used for the wrong purpose, or a
    document that does not load. Never quietly turned into an abstention."""


class AbstentionSchemaError(AbstentionError):
    """Another label order, model, probability field or calibrator than the policy's;
    raised before any probability is read."""
