"""HistoryWindow: the live, read-only view of a journal run's in-memory records."""

from __future__ import annotations

import operator
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any, SupportsIndex, overload

from nnx._foundation.records import NNIterationDataPoint

__all__ = ["HistoryWindow"]


class HistoryWindow(Sequence[NNIterationDataPoint]):
    """The last ``retention`` records, as a live read-only sequence (§4.5).

    It grows with each appended record (trimmed to the retention) and supports
    ``len``, indexing (negative too), iteration, ``reversed`` and slicing,
    which returns a new list. Item assignment and deletion raise TypeError;
    ``append`` and the other list mutators do not exist.
    """

    __slots__ = ("_records",)

    def __init__(self, records: deque[NNIterationDataPoint]) -> None:
        self._records = records

    def __len__(self) -> int:
        return len(self._records)

    @overload
    def __getitem__(self, index: SupportsIndex) -> NNIterationDataPoint: ...

    @overload
    def __getitem__(self, index: slice) -> list[NNIterationDataPoint]: ...

    def __getitem__(self, index: SupportsIndex | slice
                    ) -> NNIterationDataPoint | list[NNIterationDataPoint]:
        if isinstance(index, slice):
            return list(self._records)[index]
        try:
            return self._records[operator.index(index)]
        except IndexError:
            raise IndexError("HistoryWindow index out of range") from None

    def __iter__(self) -> Iterator[NNIterationDataPoint]:
        return iter(self._records)

    def __reversed__(self) -> Iterator[NNIterationDataPoint]:
        return reversed(self._records)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (HistoryWindow, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HistoryWindow(len={len(self)}, maxlen={self._records.maxlen})"

    def __setitem__(self, index: Any, value: Any) -> None:
        raise TypeError("HistoryWindow is read-only: the journal keeps the records as recorded")

    def __delitem__(self, index: Any) -> None:
        raise TypeError("HistoryWindow is read-only: the journal keeps the records as recorded")
