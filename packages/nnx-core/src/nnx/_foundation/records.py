"""What a run records: evaluation data points and per-batch iteration data points.

An :class:`NNEvaluationDataPoint` (edp) is one evaluation: a batch's training
values, or a whole validation pass. An :class:`NNIterationDataPoint` (idp) is
one training microbatch: its ``train_edp``, and on the epoch's last batch also
the validation result, the whole-epoch training summary and the monitor's
decision (a :class:`MonitorRecord`). All serialize to plain data with
``state()``; optional values are written only when set, so records of runs
that do not use a feature keep their columns.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from nnx._foundation.validation import NON_NEGATIVE, check_choice, check_real

__all__ = [
    "EDP_FIELDS",
    "MONITOR_DIRECTIONS",
    "MONITOR_SPLITS",
    "MonitorRecord",
    "NNEvaluationDataPoint",
    "NNIterationDataPoint",
    "deferred_record",
    "first_finite",
    "signal_walk",
    "with_extra_now",
]

#: The scalar fields of an edp, in column order.
EDP_FIELDS = ("loss", "error", "accuracy", "f1", "recall", "precision")
_TASK_FIELDS = ("kind", "count", "status")


def _number(name: str, value: Any) -> float | None:
    if value is None or type(value) is float:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value)  # tensors and NumPy scalars
        except (TypeError, ValueError):
            raise ValueError(f"NNEvaluationDataPoint.{name} must be a number or None; "
                             f"got {type(value).__name__}") from None
    return float(value)


def _numbers(name: str, values: Mapping[str, Any] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    if not values:
        return out
    for key, value in values.items():
        if not isinstance(key, str):
            raise ValueError(f"NNEvaluationDataPoint.{name} keys must be strings; got {key!r}")
        number = _number(f"{name}[{key!r}]", value)
        if number is not None:
            out[key] = number
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class NNEvaluationDataPoint:
    """One evaluation's values. ``error`` is 1 - accuracy for classification.

    ``extra`` holds a custom step's own values; ``metrics`` the declared and
    task metrics. ``kind`` / ``count`` / ``status`` are set by task records
    (``status`` is ``"ok"`` or ``"empty"`` when every target was masked).
    """

    loss: float | None = None
    error: float | None = None
    accuracy: float | None = None
    f1: float | None = None
    recall: float | None = None
    precision: float | None = None
    extra: Mapping[str, float] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    kind: str | None = None
    count: int | None = None
    status: str | None = None

    def __post_init__(self) -> None:
        for name in EDP_FIELDS:
            object.__setattr__(self, name, _number(name, getattr(self, name)))
        object.__setattr__(self, "extra", _numbers("extra", self.extra))
        object.__setattr__(self, "metrics", _numbers("metrics", self.metrics))
        if self.count is not None:
            object.__setattr__(self, "count", int(self.count))

    def state(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            n: getattr(self, n) for n in EDP_FIELDS if getattr(self, n) is not None
        }
        if self.extra:
            out["extra"] = dict(self.extra)
        if self.metrics:
            out["metrics"] = dict(self.metrics)
        for name in _TASK_FIELDS:
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> NNEvaluationDataPoint:
        return cls(**dict(state))

    def value(self, name: str) -> float | None:
        """A scalar field or a metric by name (``"loss"``, ``"error"``, ``"nll"`` …)."""
        if name in EDP_FIELDS:
            result: float | None = getattr(self, name)
            return result
        return self.metrics.get(name, self.extra.get(name))


#: The fields a deferred record computes on first read (see :func:`deferred_record`).
_DEFERRED = ("error", "accuracy", "f1", "recall", "precision", "count")
_FIELD_NAMES = tuple(NNEvaluationDataPoint.__dataclass_fields__)
_SLOTS = {name: NNEvaluationDataPoint.__dict__[name] for name in _FIELD_NAMES}


class FieldSource(Protocol):
    """What a deferred record computes its fields from (a batch's labels)."""

    def fields(self) -> dict[str, Any]:
        """``error`` … ``precision`` (a name missing is None), and ``count`` when the
        source knows it."""


def _deferred_field(name: str) -> property:
    slot = _SLOTS[name]
    convert = _count if name == "count" else functools.partial(_number, name)

    def get(self: _DeferredRecord) -> Any:
        if self._source is not None:
            self._settle()
        return slot.__get__(self)

    def set_(self: _DeferredRecord, value: Any) -> None:  # the dataclass __init__ (replace)
        slot.__set__(self, convert(value))

    return property(get, set_)


def _count(value: Any) -> int | None:
    return None if value is None else int(value)


class _DeferredRecord(NNEvaluationDataPoint):
    """An :class:`NNEvaluationDataPoint` whose classification fields are computed from
    their source on first read. The default step's per-batch records are these: the
    label work costs more than the rest of the step's bookkeeping together, and on
    the training path the records are read at the epoch's commit, when the history
    is written, so doing it there takes it off every step. Reads, equality,
    ``state()``, ``repr``, pickling and ``dataclasses.replace`` see exactly the eager
    record's values."""

    __slots__ = ("_source",)

    _source: FieldSource | None

    error = _deferred_field("error")
    accuracy = _deferred_field("accuracy")
    f1 = _deferred_field("f1")
    recall = _deferred_field("recall")
    precision = _deferred_field("precision")
    count = _deferred_field("count")

    def __getattr__(self, name: str) -> Any:
        if name == "_source":  # made by the dataclass __init__ (replace): nothing deferred
            return None
        raise AttributeError(name)

    def _settle(self) -> None:
        source = self._source
        if source is None:  # another thread settled it meanwhile
            return
        values = source.fields()
        for name in _DEFERRED[:-1]:
            _SLOTS[name].__set__(self, _number(name, values.get(name)))
        if "count" in values:
            _SLOTS["count"].__set__(self, _count(values["count"]))
        # Last: a reader in another thread (the background commit's writer renders the
        # history) that sees no source finds every field already set.
        object.__setattr__(self, "_source", None)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _FIELD_NAMES)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NNEvaluationDataPoint):
            return NotImplemented
        return self._values() == tuple(getattr(other, name) for name in _FIELD_NAMES)

    __hash__ = NNEvaluationDataPoint.__hash__

    def __repr__(self) -> str:
        return repr(_eager(self._values()))

    def __reduce__(self) -> tuple[Any, ...]:
        return _eager, (self._values(),)


def _eager(values: tuple[Any, ...]) -> NNEvaluationDataPoint:
    return NNEvaluationDataPoint(**dict(zip(_FIELD_NAMES, values, strict=True)))


def deferred_record(source: FieldSource, *, loss: float | None, kind: str | None = None,
                    count: int | None = None, status: str | None = None) -> NNEvaluationDataPoint:
    """A record with ``loss`` and the task fields now, and ``source.fields()``
    (``error`` … ``precision``, and ``count`` when the source gives it) computed when
    one of them is first read."""
    record = object.__new__(_DeferredRecord)
    object.__setattr__(record, "_source", source)
    _SLOTS["loss"].__set__(record, _number("loss", loss))
    _SLOTS["extra"].__set__(record, {})
    _SLOTS["metrics"].__set__(record, {})
    _SLOTS["kind"].__set__(record, kind)
    _SLOTS["count"].__set__(record, count)
    _SLOTS["status"].__set__(record, status)
    return record


def with_extra_now(record: NNEvaluationDataPoint,
                   extra: Mapping[str, Any]) -> NNEvaluationDataPoint:
    """``record`` with ``extra`` set in place, for a record just made that nobody holds
    yet: a deferred record keeps its fields deferred (``dataclasses.replace`` would read,
    and so compute, every one of them)."""
    if extra:
        object.__setattr__(record, "extra", _numbers("extra", {**record.extra, **extra}))
    return record


MONITOR_SPLITS = ("val", "train")
MONITOR_DIRECTIONS = ("min", "max")
_STATUSES = ("ok", "missing", "nonfinite")
_RECORD_FIELDS = ("metric", "split", "direction", "min_delta", "value", "status", "improved")


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorRecord:
    """One epoch's monitor decision: identity, rule, value, status and outcome (§6.4).

    ``status`` is "ok", "missing" (no value: not a decision) or "nonfinite"
    (an epoch without improvement). It lives here, beside the records that carry
    it as ``NNIterationDataPoint.selection``; :mod:`nnx.monitors` re-exports it.
    ``record["improved"]`` / ``record.get("value")`` read its ``state()`` keys, as
    the plain mapping ``selection`` used to be.
    """

    metric: str
    split: str
    direction: str
    min_delta: float
    value: float | None
    status: str
    improved: bool

    def __post_init__(self) -> None:
        if not isinstance(self.metric, str) or not self.metric:
            raise ValueError(f"MonitorRecord.metric must be a metric name; got {self.metric!r}")
        check_choice("MonitorRecord.split", self.split, MONITOR_SPLITS)
        check_choice("MonitorRecord.direction", self.direction, MONITOR_DIRECTIONS)
        check_choice("MonitorRecord.status", self.status, _STATUSES)
        object.__setattr__(self, "min_delta",
                           check_real("MonitorRecord.min_delta", self.min_delta, NON_NEGATIVE))
        if self.value is not None:
            object.__setattr__(self, "value", float(self.value))
        object.__setattr__(self, "improved", bool(self.improved))

    @property
    def decided(self) -> bool:
        """False for a missing value: no BEST, no plateau step, no patience count."""
        return self.status != "missing"

    @property
    def key(self) -> str:
        """``<split>.<metric>``, as loggers name the monitor series."""
        return f"{self.split}.{self.metric}"

    def state(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "metric": self.metric, "split": self.split, "direction": self.direction,
            "min_delta": self.min_delta, "status": self.status, "improved": self.improved,
        }
        if self.value is not None:
            out["value"] = self.value
        return out

    def __getitem__(self, key: str) -> Any:
        return self.state()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.state().get(key, default)

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> MonitorRecord:
        if not isinstance(state, Mapping):
            raise ValueError(f"MonitorRecord state must be a mapping; got {state!r}")
        data = dict(state)
        unknown = set(data) - set(_RECORD_FIELDS)
        if unknown:
            raise ValueError(f"MonitorRecord state has unknown field(s) {sorted(unknown)}")
        data.setdefault("value", None)
        missing = [name for name in _RECORD_FIELDS if name not in data]
        if missing:
            raise ValueError(f"MonitorRecord state lacks field(s) {missing}; got {state!r}")
        return cls(**data)


def _selection(value: Any) -> MonitorRecord | None:
    """``selection`` as a MonitorRecord: a record as is, its ``state()`` mapping rebuilt
    (CSV, journal and checkpoint read-back, ``from_state``)."""
    if value is None or isinstance(value, MonitorRecord):
        return value
    if isinstance(value, Mapping):
        return MonitorRecord.from_state(value)
    raise ValueError(f"NNIterationDataPoint.selection must be a MonitorRecord, its state() "
                     f"mapping or None; got {type(value).__name__}")


@dataclass(frozen=True, slots=True, kw_only=True)
class NNIterationDataPoint:
    """One training microbatch.

    ``iter_idx`` counts microbatches over the whole run, ``batch_idx`` within
    the epoch, ``update_count`` committed optimizer updates so far. The epoch's
    last idp also carries ``val_edp``, ``train_summary`` (when metrics or a
    monitor are declared) and ``selection`` (the epoch's :class:`MonitorRecord`;
    its ``state()`` mapping is accepted and rebuilt into one).
    """

    epoch: int
    iter_idx: int
    batch_idx: int
    train_edp: NNEvaluationDataPoint | None = None
    val_edp: NNEvaluationDataPoint | None = None
    train_summary: NNEvaluationDataPoint | None = None
    lr: float | None = None
    update_count: int | None = None
    selection: MonitorRecord | None = None

    def __post_init__(self) -> None:
        selection = self.selection  # one record per microbatch: the common case is cheap
        if selection is not None and not isinstance(selection, MonitorRecord):
            object.__setattr__(self, "selection", _selection(selection))

    @property
    def epoch_idx(self) -> int:
        """``epoch`` under the name EvalStepContext uses (§6.2); read-only, never
        serialized (``state()`` writes ``epoch`` once)."""
        return self.epoch

    def state(self) -> dict[str, Any]:
        out: dict[str, Any] = {"epoch": self.epoch, "iter_idx": self.iter_idx,
                               "batch_idx": self.batch_idx}
        for name in ("train_edp", "val_edp", "train_summary"):
            edp = getattr(self, name)
            if edp is not None:
                out[name] = edp.state()
        if self.lr is not None:
            out["lr"] = self.lr
        if self.update_count is not None:
            out["update_count"] = self.update_count
        if self.selection is not None:
            out["selection"] = self.selection.state()
        return out

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> NNIterationDataPoint:
        data = dict(state)
        for name in ("train_edp", "val_edp", "train_summary"):
            if data.get(name) is not None:
                data[name] = NNEvaluationDataPoint.from_state(data[name])
        return cls(**data)


def signal_walk(
    idp: NNIterationDataPoint,
) -> tuple[tuple[str, float] | None, list[tuple[str, float]]]:
    """The control-signal walk of :func:`first_finite`, with the non-finite values it
    rejected on the way (``[(name, value), ...]``, in walk order)."""
    val = idp.val_edp
    if val is not None and (val.status == "empty" or (val.error is None and val.loss is None)):
        return None, []  # an unavailable validation record ends the walk: no signal
    rejected: list[tuple[str, float]] = []
    for split, edp in (("val", val), ("train", idp.train_edp)):
        if edp is None:
            continue
        for name in ("error", "loss"):
            value = getattr(edp, name)
            if value is None:
                continue
            if math.isfinite(value):
                return (f"{split}_edp.{name}", value), rejected
            rejected.append((f"{split}_edp.{name}", value))
    return None, rejected


def first_finite(idp: NNIterationDataPoint) -> tuple[str, float] | None:
    """The epoch's control signal: the first finite value of val error → val loss →
    train error → train loss, with the name it came from; None if there is none."""
    return signal_walk(idp)[0]
