"""Mergeable metric accumulation (spec §21): ``StreamingMetrics`` and ``MetricSnapshot``.

Declared MetricSpecs are fed batch by batch through their registered accumulators,
which keep sufficient statistics (sums, counts, confusion counts), so memory never
grows with the number of samples. Two accumulations merge only when their sums
describe the same quantities (the merge schema); a rank metric, which needs every
score, is refused unless the caller accepts O(N) memory with ``materialize=True``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from nnx._engine.prediction import ProbabilitySpec, prediction_from_logits
from nnx._foundation.hashing import canonical_bytes
from nnx._foundation.validation import OPEN_UNIT, check_choice, check_count, check_real
from nnx.metrics import MetricSpec, check_metric_inputs
from nnx.params.task import TaskSpec

__all__ = ["SEMANTICS", "MetricMergeError", "MetricSnapshot", "StreamingMetrics",
           "UnboundedMetricError", "accumulator_is_bounded"]

#: How a model's outputs are read: exclusive classes, independent labels, or values.
SEMANTICS = ("categorical", "bernoulli", "continuous")
_INPUTS = {"categorical": frozenset({"labels", "probabilities"}),
           "bernoulli": frozenset({"labels", "probabilities"}),
           "continuous": frozenset({"continuous"})}
_METRIC_KIND = {"categorical": "categorical", "bernoulli": "multilabel",
                "continuous": "regression"}


class MetricMergeError(ValueError):
    """Two accumulations whose sums describe different quantities (the merge schema)."""


class UnboundedMetricError(ValueError):
    """A metric that stores every score, declared without ``materialize=True``."""


def accumulator_is_bounded(accumulator: Any) -> bool:
    """Bounded: it can ``merge()`` and does not declare ``stores_scores = True`` (§21)."""
    return (callable(getattr(accumulator, "merge", None))
            and getattr(accumulator, "stores_scores", False) is not True)


@dataclass(frozen=True, slots=True)
class MetricSnapshot:
    """What ``finalize()`` returns: the scored count, each available value, and the
    names of the metrics without one (nothing scored, or undefined)."""

    count: int
    values: Mapping[str, float]
    unavailable: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Source:
    """The MetricSource the registry checks declared metrics against."""

    metric_inputs: frozenset[str]
    metric_kind: str
    num_outputs: int | None
    description: str


class _Stored:
    """A stored-score metric under ``materialize=True``: every batch kept, replayed."""

    def __init__(self) -> None:
        self.batches: list[tuple[npt.NDArray[Any], npt.NDArray[Any]]] = []

    def update(self, target: Any, prediction: Any) -> None:
        self.batches.append((np.array(target, copy=True), np.array(prediction, copy=True)))

    def merge(self, other: _Stored) -> None:
        self.batches.extend(other.batches)  # the arrays are private copies, never updated


class StreamingMetrics:
    """``StreamingMetrics(metrics, semantics, labels=..., threshold=...)``: bounded,
    mergeable accumulation of declared MetricSpecs (spec §21).

    ``semantics`` is ``"categorical"``, ``"bernoulli"`` or ``"continuous"``;
    ``labels`` names the outputs (their count is ``num_outputs``); ``threshold`` is
    the bernoulli decision threshold (default 0.5); ``ignore_index`` a categorical
    target that is not scored. Every argument is checked here, before any update.
    """

    def __init__(self, metrics: Iterable[MetricSpec], semantics: str, *,
                 labels: Iterable[Any] | None = None, threshold: float | None = None,
                 ignore_index: int | None = None, num_outputs: int | None = None,
                 materialize: bool = False) -> None:
        check_choice("StreamingMetrics semantics", semantics, SEMANTICS)
        names = None if labels is None else tuple(labels)
        if names is not None and num_outputs is not None and len(names) != num_outputs:
            raise ValueError(f"labels has {len(names)} entries but num_outputs={num_outputs}")
        width = len(names) if names is not None else (
            None if num_outputs is None else check_count("num_outputs", num_outputs))
        if semantics == "bernoulli":
            threshold = float(check_real("StreamingMetrics threshold",
                                         0.5 if threshold is None else threshold, OPEN_UNIT))
        elif threshold is not None:
            raise ValueError(f"threshold applies to bernoulli semantics, not {semantics}")
        if ignore_index is not None and (semantics != "categorical" or isinstance(
                ignore_index, bool) or not isinstance(ignore_index, int)):
            raise ValueError("ignore_index is an integer of categorical semantics; got "
                             f"{ignore_index!r} for {semantics}")
        if not isinstance(materialize, bool):
            raise TypeError(f"materialize must be a bool; got {materialize!r}")
        specs = tuple(metrics)
        source = _Source(_INPUTS[semantics], _METRIC_KIND[semantics], width,
                         f"{semantics} semantics")
        resolved = check_metric_inputs(specs, source)  # registered, named once, servable
        accumulators: list[Any] = []
        for spec, registration in resolved:
            acc: Any = registration.factory(spec.config)
            if not accumulator_is_bounded(acc):
                if not materialize:
                    raise UnboundedMetricError(
                        f"metric {spec.label!r} ({spec.id}@v{spec.version}) stores every score "
                        "(no merge(), or stores_scores = True), so its memory grows with N; "
                        "pass materialize=True to store the scores and replay them")
                acc = _Stored()
            accumulators.append(acc)
        self.semantics, self.labels, self.threshold = semantics, names, threshold
        self.ignore_index, self.materialize = ignore_index, materialize
        self._declared_width = width
        self._width = width
        self._resolved = resolved
        self._accs = accumulators
        self._count = 0

    @classmethod
    def for_task(cls, metrics: Iterable[MetricSpec], task: TaskSpec, *,
                 labels: Iterable[Any] | None = None,
                 materialize: bool = False) -> StreamingMetrics:
        """The accumulation a declared task implies (its semantics, width, threshold and
        ignore_index)."""
        if not isinstance(task, TaskSpec):
            raise TypeError(f"for_task expects a TaskSpec; got {type(task).__name__}")
        semantics = {"categorical": "categorical", "multilabel": "bernoulli",
                     "regression": "continuous"}[task.kind]
        return cls(metrics, semantics, labels=labels, threshold=task.threshold,
                   ignore_index=task.ignore_index, num_outputs=task.num_outputs,
                   materialize=materialize)

    # -- the schema ----------------------------------------------------------------
    @property
    def num_outputs(self) -> int | None:
        """Declared, or learned from the first update (None until then)."""
        return self._width

    def _schema(self) -> tuple[Any, ...]:
        metrics = tuple((s.label, s.id, s.version, canonical_bytes(dict(s.config)))
                        for s, _ in self._resolved)
        return (metrics, self.semantics, self.labels, self.ignore_index,
                self.threshold if self.semantics == "bernoulli" else None)

    # -- feeding -------------------------------------------------------------------
    def update(self, target: Any, probabilities: Any = None, labels: Any = None,
               values: Any = None, valid: Any = None) -> None:
        """Add one batch: its targets with the predictions the metrics read.

        Masked entries (``valid=False``, a NaN target, a categorical target equal to
        ``ignore_index``) are not scored. Everything is checked before anything changes.
        """
        t = _array(target, "target")
        probs = None if probabilities is None else _array(probabilities, "probabilities")
        decided = None if labels is None else _array(labels, "labels")
        vals = None if values is None else _array(values, "values")
        keep = self._mask(t, valid)
        batch, width = self._batch(t, probs, decided, vals, keep)
        if width is not None and self._width is not None and width != self._width:
            raise ValueError(f"this batch has {width} outputs along axis 1; the accumulation "
                             f"has {self._width}")
        for spec, registration in self._resolved:
            if registration.input not in batch:
                raise ValueError(f"metric {spec.label!r} needs {registration.input} inputs; "
                                 f"pass {_ARGUMENT[registration.input]}= to update()")
        # Checked: now change state.
        if width is not None:
            self._width = width
        scored = batch.pop("count")
        self._count += int(scored)
        if scored:
            for (_, registration), acc in zip(self._resolved, self._accs, strict=True):
                acc.update(batch["target"], batch[registration.input])

    def update_logits(self, target: Any, logits: Any, valid: Any = None) -> None:
        """Add one batch from raw outputs, derived as evaluate() derives them."""
        raw = torch.as_tensor(logits) if not isinstance(logits, torch.Tensor) else logits
        if self.semantics == "continuous":
            self.update(target, values=raw, valid=valid)
            return
        spec = ProbabilitySpec(self.semantics, threshold=self.threshold)
        result = prediction_from_logits(raw, spec)
        self.update(target, probabilities=result.probabilities, labels=result.decoded,
                    valid=valid)

    def _mask(self, t: npt.NDArray[Any], valid: Any) -> npt.NDArray[np.bool_]:
        if t.ndim == 0:
            raise ValueError("target must have a sample axis (axis 0)")
        keep = ~np.isnan(t) if t.dtype.kind == "f" else np.ones(t.shape, dtype=bool)
        if self.semantics == "categorical" and t.ndim == 2:
            keep = keep.all(axis=1)  # a one-hot / soft row holding a NaN is masked
        if self.semantics == "categorical" and self.ignore_index is not None and t.ndim == 1:
            keep &= t != self.ignore_index
        if valid is not None:
            v = _array(valid, "valid")
            if v.dtype != np.bool_:
                raise ValueError(f"valid must be a boolean mask; got dtype {v.dtype}")
            rows = len(keep)
            if v.shape != keep.shape and v.shape != (rows,):
                raise ValueError(f"valid has shape {v.shape}; expected {keep.shape} or "
                                 f"({rows},)")
            keep = keep & (v if v.shape == keep.shape else v.reshape(
                (-1,) + (1,) * (keep.ndim - 1)))
        return keep

    def _batch(self, t: npt.NDArray[Any], probs: Any, decided: Any, vals: Any,
               keep: npt.NDArray[np.bool_]) -> tuple[dict[str, Any], int | None]:
        rows = t.shape[0]
        for name, array in (("probabilities", probs), ("labels", decided), ("values", vals)):
            if array is not None and (array.ndim == 0 or array.shape[0] != rows):
                raise ValueError(f"{name} must have one row per target row ({rows}); got "
                                 f"shape {array.shape}")
        if self.semantics == "categorical":
            return self._categorical(t, probs, decided, keep)
        if self.semantics == "bernoulli":
            if probs is not None and decided is None:
                assert self.threshold is not None
                decided = (probs >= self.threshold).astype(np.int64)
            for name, array in (("probabilities", probs), ("labels", decided)):
                if array is not None and array.shape != t.shape:
                    raise ValueError(f"{name} has shape {array.shape}; the targets {t.shape}")
            out: dict[str, Any] = {"target": t[keep], "count": int(keep.sum())}
            if probs is not None:
                out["probabilities"] = probs[keep]
            if decided is not None:
                out["labels"] = decided[keep]
            return out, (t.shape[1] if t.ndim > 1 else 1)
        if vals is None or vals.shape != t.shape:
            raise ValueError("continuous semantics need values= of the targets' shape "
                             f"{t.shape}")
        return ({"target": t[keep], "continuous": vals[keep], "count": int(keep.sum())},
                t.shape[1] if t.ndim > 1 else 1)

    def _categorical(self, t: npt.NDArray[Any], probs: Any, decided: Any,
                     keep: npt.NDArray[np.bool_]) -> tuple[dict[str, Any], int | None]:
        width = None
        if probs is not None:
            if probs.ndim != 2 or probs.shape[1] < 2:
                raise ValueError(f"categorical probabilities are (N, C) with C >= 2; got "
                                 f"shape {probs.shape}")
            width = probs.shape[1]
            if decided is None:
                decided = probs.argmax(axis=1)
        if t.ndim == 2:  # one-hot / soft rows: the scored class is the row's argmax
            if width is not None and t.shape[1] != width:
                raise ValueError(f"target rows have {t.shape[1]} classes; probabilities "
                                 f"{width}")
            width = t.shape[1]
            t = np.where(keep[:, None], t, 0).argmax(axis=1)
        elif t.ndim != 1:
            raise ValueError(f"categorical targets are (N,) indices or (N, C) rows; got "
                             f"shape {t.shape}")
        elif t.dtype.kind == "f":
            t = np.where(keep, t, 0)
        if decided is not None and decided.shape != (t.shape[0],):
            raise ValueError(f"labels must be (N,) class indices; got shape {decided.shape}")
        true = t.astype(np.int64)[keep]
        bound = width if width is not None else self._width
        if bound is not None and true.size and (true.min() < 0 or true.max() >= bound):
            raise ValueError(f"a categorical target is outside [0, {bound})"
                             + ("" if self.ignore_index is None
                                else f" and is not ignore_index={self.ignore_index}"))
        out: dict[str, Any] = {"target": true, "count": int(true.size)}
        if probs is not None:
            out["probabilities"] = probs[keep]
        if decided is not None:
            out["labels"] = decided.astype(np.int64)[keep]
        return out, width

    # -- combining and reading -------------------------------------------------------
    def merge(self, other: StreamingMetrics) -> StreamingMetrics:
        """A new accumulation over both inputs' samples; neither input is changed."""
        if not isinstance(other, StreamingMetrics):
            raise TypeError(f"merge takes a StreamingMetrics; got {type(other).__name__}")
        mine, theirs = self._schema(), other._schema()
        reasons = [what for what, a, b in zip(
            ("metrics (names, ids, versions, configs)", "semantics", "task labels",
             "ignore_index", "decision threshold"), mine, theirs, strict=True) if a != b]
        if (self._width is not None and other._width is not None
                and self._width != other._width):
            reasons.append(f"output count ({self._width} vs {other._width})")
        if reasons:
            raise MetricMergeError("these accumulations sum different quantities; they "
                                   f"differ in {', '.join(reasons)}")
        merged = self._empty()
        for source in (self, other):
            merged._absorb(source)
        return merged

    def _empty(self) -> StreamingMetrics:
        return StreamingMetrics((s for s, _ in self._resolved), self.semantics,
                                labels=self.labels, threshold=self.threshold,
                                ignore_index=self.ignore_index,
                                num_outputs=None if self.labels else self._declared_width,
                                materialize=self.materialize)

    def _absorb(self, other: StreamingMetrics) -> None:
        for acc, theirs in zip(self._accs, other._accs, strict=True):
            acc.merge(theirs)  # adds a copy of theirs in place
        self._count += other._count
        if self._width is None:
            self._width = other._width

    def finalize(self) -> MetricSnapshot:
        """Each metric's value over everything seen; repeatable, changes nothing."""
        values: dict[str, float] = {}
        unavailable: list[str] = []
        for (spec, registration), acc in zip(self._resolved, self._accs, strict=True):
            value = math.nan
            if self._count:
                fresh: Any = registration.factory(spec.config)  # read a copy: never this one
                if isinstance(acc, _Stored):
                    for target, prediction in acc.batches:
                        fresh.update(target, prediction)
                else:
                    fresh.merge(acc)
                value = float(fresh.result())
            if math.isnan(value):
                unavailable.append(spec.label)
            else:
                values[spec.label] = value
        return MetricSnapshot(self._count, MappingProxyType(values), tuple(unavailable))


_ARGUMENT = {"labels": "labels (or probabilities)", "probabilities": "probabilities",
             "continuous": "values"}


def _array(value: Any, name: str) -> npt.NDArray[Any]:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype in (torch.bfloat16, torch.float16):
            value = value.double()
        value = value.numpy()
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric; got dtype {array.dtype}")
    return array
