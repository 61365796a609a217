"""The chronological strategy: cutoffs, gaps and the kinds of time (spec §13.3).

Train is ``t < validation_start``, validation ``validation_start <= t <
test_start`` and test ``t >= test_start``: a time on a cutoff starts the later
split, so tied rows never separate. A gap excludes ``cutoff - gap <= t <
cutoff`` before each cutoff. Times are numbers, dates, or naive or aware
datetimes (``numpy.datetime64`` is a naive datetime), one kind per plan; the
gap is a number, whole days, or a timedelta to match.
"""

from __future__ import annotations

import datetime as dt
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nnx.data_splits._ids import Key, SplitError

__all__ = ["TIME_KINDS", "Cutoffs", "assign_chronological", "cutoffs_from_state", "cutoffs_state",
           "gap_from_state"]

TIME_KINDS = ("number", "date", "datetime", "datetime-tz")
_MICRO = dt.timedelta(microseconds=1)
Cutoffs = tuple[Any, Any]


def time_kind(value: Any) -> str:
    """The kind of one time value; a SplitError for anything else."""
    if isinstance(value, dt.datetime):
        return "datetime" if value.tzinfo is None or value.utcoffset() is None else "datetime-tz"
    if isinstance(value, dt.date):
        return "date"
    if isinstance(value, np.datetime64):
        return "datetime"
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return "number"
    raise SplitError(f"a time must be a number, date or datetime; got {value!r} "
                     f"({type(value).__name__})")


def as_time(value: Any, what: str) -> Any:
    """A comparable time: numpy.datetime64 becomes a datetime, NaN / NaT are refused."""
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            raise SplitError(f"{what} is NaT; every planned row needs a time")
        micro = value.astype("datetime64[us]")
        if micro != value:
            raise SplitError(f"{what} = {value} has sub-microsecond precision, which a "
                             "datetime cannot hold; round the times first")
        return micro.item()
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not math.isfinite(float(value)):
            raise SplitError(f"{what} is {value!r}; every planned row needs a finite time")
        return int(value) if isinstance(value, numbers.Integral) else float(value)
    return value


def _gap(gap: Any, kind: str) -> Any:
    if gap is None:
        return None
    if kind == "number":
        number = float(gap) if isinstance(gap, numbers.Real) else math.nan
        if isinstance(gap, bool) or not (math.isfinite(number) and number >= 0):
            raise SplitError(f"gap must be a finite number >= 0 for number times; got {gap!r}")
        return int(gap) if isinstance(gap, numbers.Integral) else number
    if not isinstance(gap, dt.timedelta) or gap < dt.timedelta(0):
        raise SplitError(f"gap must be a timedelta >= 0 for {kind} times; got {gap!r}")
    if kind == "date" and gap % dt.timedelta(days=1):
        raise SplitError(f"gap must be whole days for date times; got {gap!r}")
    return gap


def assign_chronological(ids: Sequence[Key], times: Sequence[Any], cutoffs: Any,
                         gap: Any) -> tuple[list[list[Key]], list[Key], dict[str, Any]]:
    """The ids of each split, the excluded (gap) ids, and the parameters to record."""
    if not isinstance(cutoffs, (tuple, list)) or len(cutoffs) != 2:
        raise SplitError("cutoffs must be (validation_start, test_start), either may be None; "
                         f"got {cutoffs!r}")
    kinds = {time_kind(t) for t in times}
    if len(kinds) != 1:
        raise SplitError(f"times mix kinds ({', '.join(sorted(kinds))}); a plan uses one")
    kind = kinds.pop()
    values = [as_time(t, f"times[{i}]") for i, t in enumerate(times)]
    cuts = tuple(None if c is None else _cutoff(c, kind, i) for i, c in enumerate(cutoffs))
    if cuts[0] is not None and cuts[1] is not None and cuts[0] > cuts[1]:
        raise SplitError(f"cutoffs must be in order: validation_start {cutoffs[0]!r} is after "
                         f"test_start {cutoffs[1]!r}")
    width = _gap(gap, kind)
    placed: list[list[Key]] = [[], [], []]
    excluded: list[Key] = []
    for sample, t in zip(ids, values, strict=True):
        if width is not None and any(c is not None and c - width <= t < c for c in cuts):
            excluded.append(sample)
            continue
        split = 0
        for k, c in enumerate(cuts, start=1):
            if c is not None and t >= c:
                split = k
        placed[split].append(sample)
    return placed, excluded, {"time_kind": kind, "cutoffs": cutoffs_state(cuts, kind),
                              "gap": _gap_state(width, kind)}


def _cutoff(value: Any, kind: str, index: int) -> Any:
    what = "validation_start" if index == 0 else "test_start"
    if time_kind(value) != kind:
        raise SplitError(f"cutoffs[{index}] ({what}) {value!r} is a {time_kind(value)}, "
                         f"but the times are {kind}s")
    return as_time(value, f"cutoffs[{index}]")


def cutoffs_state(cuts: Sequence[Any], kind: str) -> list[Any]:
    """Cutoffs as JSON: numbers as they are, dates and datetimes in ISO 8601."""
    return [c if c is None or kind == "number" else c.isoformat() for c in cuts]


def _gap_state(width: Any, kind: str) -> Any:
    """The gap as JSON: a number, whole days for dates, else microseconds."""
    if width is None or kind == "number":
        return width
    if kind == "date":
        return {"days": width.days}
    return {"microseconds": width // _MICRO}


def cutoffs_from_state(state: Sequence[Any], kind: str) -> tuple[Any, Any]:
    """The recorded cutoffs back as the values :func:`assign_chronological` takes."""
    def one(value: Any) -> Any:
        if value is None or kind == "number":
            return value
        if kind == "date":
            return dt.date.fromisoformat(value)
        return dt.datetime.fromisoformat(value)
    first, second = (one(v) for v in state)
    return first, second


def gap_from_state(state: Any) -> Any:
    if isinstance(state, Mapping) and set(state) == {"days"}:
        return dt.timedelta(days=state["days"])
    if isinstance(state, Mapping) and set(state) == {"microseconds"}:
        return dt.timedelta(microseconds=state["microseconds"])
    return state
