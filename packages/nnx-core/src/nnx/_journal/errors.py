"""The journal's one error type."""

from __future__ import annotations

__all__ = ["HistoryCorruptionError"]


class HistoryCorruptionError(ValueError):
    """Committed history on disk no longer matches its manifest, index or digests.

    Raised for a chunk whose bytes do not match its SHA-256, a missing chunk,
    an index line that breaks the hash chain, or a manifest that cannot be
    read. Readers raise it without modifying anything.
    """
