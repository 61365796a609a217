"""DecisionResults: ``decide``'s answer over many rows, one typed result per row read.

A provider that validates a whole batch at once (FixedHeadProvider: one tensor-wide
check, :func:`nnx.decisions.validation.check_rows`) has nothing left to check per row;
building 100,000 frozen results nobody reads would be most of its time. So it returns
a :class:`DecisionResults`: an immutable sequence that holds the batch's arrays and
builds a row's ``ChoiceResult`` / ``BooleanResult`` / ``ScoreResult`` when that row is
first read (indexing, iteration), then keeps it, so the same row is the same object
every time, as in a tuple.

It behaves as the tuple of its rows: ``len``, indexing (negative too), slicing (a lazy
view sharing the built rows), iteration, ``in``, ``count``, ``index``, ``reversed``,
``==`` / ``<`` against a tuple or another DecisionResults, ``hash``, ``+`` and ``*``
(which give tuples), ``repr`` and pickling (a plain tuple) are the tuple's. It is not a
``tuple`` instance: ``tuple(results)`` builds every row and gives one.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

from nnx.decisions.results import DecisionResult

__all__ = ["DecisionResults"]


class DecisionResults(Sequence[DecisionResult]):
    """The rows of one ``decide`` call (module docstring); ``row(i)`` builds row ``i``."""

    __slots__ = ("_built", "_indices", "_row")

    def __init__(self, count: int, row: Callable[[int], DecisionResult]) -> None:
        self._row = row
        self._indices = range(count)
        # Shared with every slice of this batch, keyed by the batch's row number.
        self._built: dict[int, DecisionResult] = {}

    def _at(self, n: int) -> DecisionResult:
        built = self._built.get(n)
        if built is None:
            built = self._built[n] = self._row(n)
        return built

    def __len__(self) -> int:
        return len(self._indices)

    @overload
    def __getitem__(self, index: int) -> DecisionResult: ...

    @overload
    def __getitem__(self, index: slice) -> DecisionResults: ...

    def __getitem__(self, index: int | slice) -> DecisionResult | DecisionResults:
        if isinstance(index, slice):
            view = DecisionResults.__new__(DecisionResults)
            view._row, view._built = self._row, self._built
            view._indices = self._indices[index]
            return view
        try:
            position = operator.index(index)
        except TypeError:
            raise TypeError(f"DecisionResults indices must be integers or slices, not "
                            f"{type(index).__name__}") from None
        try:
            n = self._indices[position]
        except IndexError:
            raise IndexError("DecisionResults index out of range") from None
        return self._at(n)

    def __iter__(self) -> Iterator[DecisionResult]:
        for n in self._indices:
            yield self._at(n)

    def __reversed__(self) -> Iterator[DecisionResult]:
        for n in reversed(self._indices):
            yield self._at(n)

    # -- the tuple's comparisons, hash and operators, on the built rows ---------------

    @staticmethod
    def _as_tuple(other: Any) -> tuple[Any, ...] | None:
        if isinstance(other, DecisionResults):
            return tuple(other)
        return other if isinstance(other, tuple) else None

    def __eq__(self, other: object) -> bool:
        theirs = self._as_tuple(other)
        if theirs is None:
            return NotImplemented
        return len(theirs) == len(self) and tuple(self) == theirs

    def __lt__(self, other: object) -> bool:
        theirs = self._as_tuple(other)
        return NotImplemented if theirs is None else tuple(self) < theirs

    def __le__(self, other: object) -> bool:
        theirs = self._as_tuple(other)
        return NotImplemented if theirs is None else tuple(self) <= theirs

    def __gt__(self, other: object) -> bool:
        theirs = self._as_tuple(other)
        return NotImplemented if theirs is None else tuple(self) > theirs

    def __ge__(self, other: object) -> bool:
        theirs = self._as_tuple(other)
        return NotImplemented if theirs is None else tuple(self) >= theirs

    def __hash__(self) -> int:
        # Equal to a tuple, so hashed as that tuple (a row holding a dict raises, as it would).
        return hash(tuple(self))

    def __add__(self, other: Any) -> tuple[Any, ...]:
        theirs = self._as_tuple(other)
        return NotImplemented if theirs is None else tuple(self) + theirs

    def __radd__(self, other: Any) -> tuple[Any, ...]:
        return other + tuple(self) if isinstance(other, tuple) else NotImplemented

    def __mul__(self, times: Any) -> tuple[Any, ...]:
        try:
            return tuple(self) * operator.index(times)
        except TypeError:
            return NotImplemented

    __rmul__ = __mul__

    def __repr__(self) -> str:
        return repr(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        # The bound builder does not travel: a pickle (or a copy) is the plain tuple.
        return tuple, (tuple(self),)
