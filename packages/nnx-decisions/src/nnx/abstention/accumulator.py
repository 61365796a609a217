"""CoverageAccumulator (spec §19): chunked coverage equal to the eager report.

Each chunk is an AbstentionResult with its own sample ids. An id seen before (in its
chunk or an earlier one) is refused by default, because the default ids 0..n-1 repeat
from chunk to chunk; a split whose ids legitimately repeat passes
``allow_repeated_ids=True``. A refused chunk changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from nnx.abstention.errors import AbstentionError, AbstentionSchemaError
from nnx.abstention.report import AbstentionResult, CoverageReport

__all__ = ["CoverageAccumulator"]


class CoverageAccumulator:
    """Add ``(result, targets)`` chunks, then ``report()``."""

    def __init__(self, *, allow_repeated_ids: bool = False) -> None:
        if not isinstance(allow_repeated_ids, bool):
            raise AbstentionError(f"allow_repeated_ids must be a bool; got {allow_repeated_ids!r}")
        self.allow_repeated_ids = allow_repeated_ids
        self._policy: Mapping[str, Any] | None = None
        self._ids: list[int] = []
        self._seen: set[int] = set()
        self._accepted = 0
        self._incorrect = 0

    def add(self, result: AbstentionResult, targets: Any) -> None:
        """Count one chunk; a repeated id, another policy or bad targets change nothing."""
        if not isinstance(result, AbstentionResult):
            raise AbstentionError(f"add() takes an AbstentionResult; got {type(result).__name__}")
        if self._policy is not None and dict(result.policy) != dict(self._policy):
            raise AbstentionSchemaError("every chunk must come from the same policy; this one "
                                        f"is {dict(result.policy)}, earlier ones "
                                        f"{dict(self._policy)}")
        chunk = result.report(targets)  # checks the targets before anything is counted
        ids = list(chunk.sample_ids)
        if not self.allow_repeated_ids:
            values, counts = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
            repeated = sorted({int(v) for v in values[counts > 1]} | (self._seen & set(ids)))
            if repeated:
                raise AbstentionError(
                    f"sample ids {repeated[:10]} were seen before; give each chunk its own "
                    "sample_ids= (or CoverageAccumulator(allow_repeated_ids=True) for a split "
                    "whose ids legitimately repeat)")
            self._seen.update(ids)
        self._policy = result.policy
        self._ids.extend(ids)
        self._accepted += chunk.accepted
        self._incorrect += chunk.incorrect

    def report(self) -> CoverageReport:
        if not self._ids:
            raise AbstentionError("no chunk was added; there is nothing to report")
        return CoverageReport.of_counts(self._accepted, self._incorrect, self._ids)
