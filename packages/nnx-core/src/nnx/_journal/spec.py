"""HistoryJournal: the configuration that switches a run to a bounded history (§4.5).

It is runtime configuration, never part of the run id: the same run trains to
the same id with or without a journal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nnx._foundation.validation import check_count, check_optional_count

__all__ = ["DEFAULT_CHUNK", "HistoryJournal"]

#: The chunk size used when none is given (capped at the retention).
DEFAULT_CHUNK = 250


@dataclass(frozen=True, slots=True)
class HistoryJournal:
    """Keep the last ``retention`` records in memory; write records in chunks.

    ``chunk_size`` (records per chunk file) must not exceed ``retention``, so
    records waiting for their chunk are always inside the window. ``None``
    resolves to ``min(250, retention)``, exposed as :attr:`chunk`.
    """

    retention: int
    chunk_size: int | None = None

    def __post_init__(self) -> None:
        retention = check_count("HistoryJournal.retention", self.retention)
        chunk = check_optional_count("HistoryJournal.chunk_size", self.chunk_size,
                                     none_means=f"min({DEFAULT_CHUNK}, retention)")
        if chunk is not None and chunk > retention:
            raise ValueError(f"HistoryJournal.chunk_size must be an integer <= retention "
                             f"({retention}); got {chunk}")
        object.__setattr__(self, "retention", retention)
        object.__setattr__(self, "chunk_size", chunk)

    @property
    def chunk(self) -> int:
        """The resolved chunk size: ``chunk_size``, or ``min(250, retention)``."""
        return self.chunk_size if self.chunk_size is not None else min(DEFAULT_CHUNK,
                                                                       self.retention)

    def state(self) -> dict[str, Any]:
        return {"retention": self.retention, "chunk_size": self.chunk_size}
