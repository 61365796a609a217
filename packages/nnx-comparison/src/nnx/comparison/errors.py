"""The refusals of nnx.comparison: each a ValueError naming what it refused, raised before
anything is summarized, paired or written."""

from __future__ import annotations

__all__ = [
    "ComparisonError",
    "DuplicateObservationError",
    "LineageError",
    "PairingError",
    "PoolingError",
    "ReportIntegrityError",
]


class ComparisonError(ValueError):
    """Base of every nnx.comparison refusal."""


class DuplicateObservationError(ComparisonError):
    """Two observations of one attempt for one metric (spec §23: one per attempt)."""


class PoolingError(ComparisonError):
    """Observations that do not form one poolable group were asked to pool."""


class PairingError(ComparisonError):
    """Two sides that cannot be paired replicate by replicate."""


class LineageError(ComparisonError):
    """A run's parents cannot be followed: a cycle, more than 64 ancestors, or an
    ancestor whose files cannot be read."""


class ReportIntegrityError(ComparisonError):
    """A saved report whose stored results disagree with its observations."""
