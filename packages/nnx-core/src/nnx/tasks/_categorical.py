"""Categorical classification: class-index targets, argmax decoding."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor, nn

from nnx._foundation.records import NNEvaluationDataPoint, deferred_record
from nnx.params.task import TaskSpec
from nnx.tasks._base import (
    _NO_NUMPY,
    Arrays,
    Stats,
    TaskAdapter,
    TrainingBatch,
    host_arrays,
    numpy_of,
)
from nnx.tasks._labels import CONFUSION_LIMIT, BatchLabels, PendingLabels, PendingQueue
from nnx.tasks._losses import (
    CATEGORICAL_LOSSES,
    TaskValidationError,
    categorical_mean,
    categorical_numerator,
    categorical_parts,
    family,
    is_native,
    opaque_parts,
)
from nnx.tasks._macro import macro_scores

__all__ = ["CategoricalAdapter"]


class _ClassCounts(Stats):
    def __init__(self, adapter: CategoricalAdapter) -> None:
        self.adapter = adapter
        self.count = 0
        self.tp: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.n_true = self.tp.copy()
        self.n_pred = self.tp.copy()

    def _grow(self, size: int) -> None:
        if size > self.tp.size:
            pad = size - self.tp.size
            self.tp, self.n_true, self.n_pred = (
                np.concatenate([a, np.zeros(pad, dtype=np.int64)])
                for a in (self.tp, self.n_true, self.n_pred)
            )

    def add_labels(self, true: Tensor, pred: Tensor, num_classes: int) -> None:
        true_np, pred_np = host_arrays(true, pred)
        self.add_host(true_np, pred_np, num_classes)

    def add_host(self, true: npt.NDArray[Any], pred: npt.NDArray[Any], num_classes: int) -> None:
        """Count host arrays of class indices (valid positions only)."""
        tp = np.bincount(true[true == pred], minlength=num_classes)
        n_true = np.bincount(true, minlength=num_classes)
        n_pred = np.bincount(pred, minlength=num_classes)
        if self.count == 0 and self.tp.size == 0 and tp.size == n_true.size == n_pred.size:
            self.tp, self.n_true, self.n_pred = tp, n_true, n_pred  # a fresh batch record
        else:
            self._grow(max(tp.size, n_true.size, n_pred.size))
            self.tp[:tp.size] += tp
            self.n_true[:n_true.size] += n_true
            self.n_pred[:n_pred.size] += n_pred
        self.count += int(true.size)

    def add(self, output: Tensor, target: Tensor) -> None:
        true, rows = self.adapter.valid_rows(output, target)
        self.add_labels(true, rows.argmax(1), rows.shape[1])

    def fields(self) -> dict[str, Any]:
        accuracy = int(self.tp.sum()) / self.count
        present = (self.n_true + self.n_pred) > 0
        return {"accuracy": accuracy, "error": 1.0 - accuracy,
                **macro_scores(self.tp, self.n_true, self.n_pred, present)}


class _CategoricalBatch(TrainingBatch):
    """A class-index training batch whose labels are already on the host."""

    __slots__ = ("categorical", "labels")

    def __init__(self, adapter: CategoricalAdapter, output: Tensor, target: Tensor,
                 numerator: Tensor, labels: BatchLabels, weight: float, total: float,
                 summed: bool, normalized: bool, value: float | None) -> None:
        super().__init__(adapter, output, target, numerator, weight=weight, total=total,
                         summed=summed, normalized=normalized, value=value)
        self.categorical = adapter
        self.labels = labels

    def record(self, loss: float | None) -> NNEvaluationDataPoint:
        labels, adapter = self.labels, self.categorical
        if labels.count and labels.confusion is not None:
            # The scores are computed when first read: at the epoch's commit (records.py).
            task = adapter.task
            if task is None:
                return deferred_record(labels, loss=loss)
            return deferred_record(labels, loss=loss, kind=task.kind, count=labels.count,
                                   status="ok")
        stats = _ClassCounts(adapter)
        if labels.true is not None and labels.pred is not None:
            stats.add_host(labels.true, labels.pred, labels.width)
        return adapter.stats_record(stats, loss)


class _DeferredBatch(TrainingBatch):
    """A normalized CPU batch whose loss is known and whose labels are counted when
    its weight or its record's scores are first read (nnx.tasks._labels)."""

    __slots__ = ("categorical", "pending")

    def __init__(self, adapter: CategoricalAdapter, output: Tensor, target: Tensor,
                 numerator: Tensor, pending: PendingLabels, value: float) -> None:
        # Not TrainingBatch.__init__: the weight is unknown until the labels are counted,
        # but a finite mean loss already says some target is valid.
        self.adapter = self.categorical = adapter
        self.output, self.target, self.numerator = output, target, numerator
        self._weight = self._total = None
        self.summed, self.normalized, self.has_targets = False, True, True
        self.value, self.pending = value, pending

    def _count(self) -> None:
        self._weight = float(self.pending.labels.count)
        self._total = self.value * self._weight

    def record(self, loss: float | None) -> NNEvaluationDataPoint:
        task = self.categorical.task
        if task is None:
            return deferred_record(self.pending, loss=loss)
        return deferred_record(self.pending, loss=loss, kind=task.kind, status="ok")


#: The native class-index losses by class: "cross_entropy", "nll" or None (any other).
_NATIVE: dict[type, str | None] = {}


def _class_weight(loss_fn: nn.Module) -> Any:
    """The loss's class weights (its registered buffer, without Module.__getattr__)."""
    buffers = loss_fn._buffers
    return buffers["weight"] if "weight" in buffers else getattr(loss_fn, "weight", None)


def _native_categorical(loss_fn: nn.Module) -> str | None:
    kind = _NATIVE.get(type(loss_fn), "?")
    if kind == "?":
        name = family(loss_fn) if is_native(loss_fn) else None
        kind = _NATIVE[type(loss_fn)] = name if name in CATEGORICAL_LOSSES else None
    return kind


class CategoricalAdapter(TaskAdapter):
    """Class indices in [0, C) (or ``ignore_index``); argmax over axis 1.

    Without a task (the default for CrossEntropyLoss / NLLLoss) the width comes
    from the output, ``ignore_index`` from the loss, cross-entropy may take
    class-probability targets, and records carry the legacy fields only.
    """

    metric_kind = "categorical"

    def __init__(self, task: TaskSpec | None, loss_fn: nn.Module) -> None:
        super().__init__(task, loss_fn)
        if task is not None:
            self.ignore_index: int | None = task.ignore_index
        else:
            self.ignore_index = getattr(loss_fn, "ignore_index", None)
        self._checked: tuple[Any, ...] | None = None  # the last well-formed batch's layout
        self._pending = PendingQueue(self._labels)

    @property
    def metric_inputs(self) -> frozenset[str]:
        if family(self.loss_fn) in CATEGORICAL_LOSSES:
            return frozenset({"labels", "probabilities"})
        return frozenset({"labels"})

    def check_loss(self, loss_fn: nn.Module) -> None:
        names = "CrossEntropyLoss or NLLLoss"
        if not self._check_family(loss_fn, CATEGORICAL_LOSSES, names) or self.task is None:
            return
        width = self.task.num_outputs
        loss_ignore = getattr(loss_fn, "ignore_index", None)
        name = type(loss_fn).__name__
        if self.ignore_index is not None and loss_ignore != self.ignore_index:
            raise ValueError(
                f"TaskSpec.ignore_index is {self.ignore_index} but {name}.ignore_index is "
                f"{loss_ignore}; build the loss with ignore_index={self.ignore_index}"
            )
        if self.ignore_index is None and isinstance(loss_ignore, int) and 0 <= loss_ignore < width:
            raise ValueError(
                f"{name}.ignore_index={loss_ignore} is a class of this task; declare it with "
                f"TaskSpec.categorical({width}, ignore_index={loss_ignore}) or use another "
                f"ignore_index"
            )
        weight = getattr(loss_fn, "weight", None)
        if isinstance(weight, Tensor) and weight.numel() != width:
            raise ValueError(
                f"{name} has {weight.numel()} class weights but the task has {width} classes"
            )

    def _soft(self, output: Tensor, target: Tensor) -> bool:
        return (self.task is None and target.is_floating_point()
                and isinstance(self.loss_fn, nn.CrossEntropyLoss)
                and target.shape == output.shape)

    def validate(self, output: Tensor, target: Tensor) -> None:
        if not isinstance(output, Tensor) or not isinstance(target, Tensor):
            raise TaskValidationError("output and target must be tensors")
        if not output.is_floating_point() or output.ndim < 2:
            raise TaskValidationError(
                f"a categorical output must be floating logits shaped (N, C, ...); got "
                f"{output.dtype} {tuple(output.shape)}"
            )
        width = output.shape[1]
        if self.task is not None and width != self.task.num_outputs:
            raise TaskValidationError(
                f"the output has {width} classes on axis 1 but the task declares "
                f"{self.task.num_outputs}"
            )
        if self._soft(output, target):
            return
        if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
            raise TaskValidationError(
                f"categorical targets must be integer class indices; got {target.dtype}"
            )
        expected = (output.shape[0], *output.shape[2:])
        if tuple(target.shape) != expected:
            raise TaskValidationError(
                f"categorical targets must be shaped {expected} for an output shaped "
                f"{tuple(output.shape)}; got {tuple(target.shape)}"
            )
        (true,) = host_arrays(target)
        self._check_range(self._valid_host(true), width)

    def _valid_host(self, true: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """The non-ignored entries of a host target array."""
        if self.ignore_index is None:
            return true
        keep = true != self.ignore_index
        return true if keep.all() else true[keep]

    def _check_range(self, valid: npt.NDArray[Any], width: int) -> None:
        if valid.size == 0 or (valid.min() >= 0 and valid.max() < width):
            return
        value = int(valid[(valid < 0) | (valid >= width)][0])
        allowed = f"[0, {width})"
        if self.ignore_index is not None:
            allowed += f" or ignore_index={self.ignore_index}"
        raise TaskValidationError(
            f"categorical targets must be class indices in {allowed}; got {value}"
        )

    def training_batch(self, output: Tensor, target: Tensor, loss_fn: nn.Module, *,
                       normalize: bool = False) -> TrainingBatch:
        """Class-index targets with a native CE / NLL loss without class weights: the
        labels come to the host once (the value check and the record) and the loss value
        once (the NaN guard); anything else takes the general path. A normalized
        one-microbatch window without label smoothing back-propagates torch's own mean."""
        kind = _native_categorical(loss_fn)
        loss_ignore = int(getattr(loss_fn, "ignore_index", -100))
        if (kind is None or _class_weight(loss_fn) is not None
                or self.ignore_index not in (None, loss_ignore)
                or not self._class_index_batch(output, target)):
            return super().training_batch(output, target, loss_fn, normalize=normalize)
        summed = loss_fn.reduction == "sum"
        if (normalize and not summed and (kind == "nll" or loss_fn.label_smoothing == 0.0)
                and self._deferrable(output, target, loss_ignore)):
            deferred = self._deferred_batch(output, target, loss_fn, loss_ignore)
            if deferred is not None:
                return deferred
        labels = self._labels(output, target, output.shape[1])  # refuses a bad value
        count = labels.count  # the loss's valid targets: check_loss keeps them the adapter's
        weight = float(count > 0) if summed else float(count)
        normalized = normalize and not summed and count > 0
        detached = output.detach()
        if normalized and (kind == "nll" or loss_fn.label_smoothing == 0.0):
            numerator = categorical_mean(output, target, loss_fn, loss_ignore)
            value = numerator.item()
            return _CategoricalBatch(self, detached, target, numerator, labels, weight,
                                     value * weight, False, True, value)
        numerator = categorical_numerator(output, target, loss_fn, loss_ignore)
        total = numerator.item()
        return _CategoricalBatch(self, detached, target,
                                 numerator / weight if normalized else numerator, labels,
                                 weight, total, summed, normalized, None)

    def _deferrable(self, output: Tensor, target: Tensor, loss_ignore: int) -> bool:
        """A CPU batch whose labels can wait: torch itself refuses a class index out of
        range, and ignores exactly what the adapter ignores."""
        ignore = self.ignore_index
        return (output.is_cpu and target.is_cpu and output.dtype not in _NO_NUMPY
                and output.shape[1] <= CONFUSION_LIMIT and ignore == loss_ignore
                and not 0 <= loss_ignore < output.shape[1])

    def _deferred_batch(self, output: Tensor, target: Tensor, loss_fn: nn.Module,
                        loss_ignore: int) -> TrainingBatch | None:
        """torch's mean loss, the labels kept for later; None when the mean is not finite
        (no valid target, or a NaN: the caller counts the labels now)."""
        try:
            numerator = categorical_mean(output, target, loss_fn, loss_ignore)
        except (IndexError, RuntimeError):
            self._labels(output, target, output.shape[1])  # the TaskValidationError
            raise
        value = numerator.item()
        if not math.isfinite(value):
            return None
        detached = output.detach()
        pending = self._pending.defer(detached, target, with_count=self.task is not None)
        return _DeferredBatch(self, detached, target, numerator, pending, value)

    def _labels(self, output: Tensor, target: Tensor, width: int) -> BatchLabels:
        """The batch's valid labels on the host; a target outside [0, C) (and not
        ``ignore_index``) raises TaskValidationError."""
        if output.is_cpu and target.is_cpu and output.dtype not in _NO_NUMPY:
            # Views, no copies; NumPy's argmax takes the same first maximum as torch's.
            true = target.numpy() if target.ndim == 1 and not target.requires_grad else (
                host_arrays(target)[0])
            pred = output.detach().numpy().argmax(1)
            if pred.ndim != 1:  # (N, C, d…) outputs
                pred = pred.reshape(-1)
        else:
            true, pred = host_arrays(target, output.detach().argmax(1))
        ignore = self.ignore_index
        confusion = width <= CONFUSION_LIMIT
        if confusion and (ignore is None or not 0 <= ignore < width):
            # One bincount: every code lands in [0, C²) exactly when every target is a
            # class; an ignored or negative target makes a negative code (ValueError).
            codes = true * width if true.dtype == np.int64 else np.multiply(
                true, width, dtype=np.int64)  # a narrower integer type could overflow
            codes += pred
            try:
                counts = np.bincount(codes, minlength=width * width)
            except ValueError:
                pass
            else:
                if counts.size == width * width:
                    return BatchLabels(width, true.size, confusion=counts)
        if ignore is not None:
            keep = true != ignore
            if not keep.all():
                true, pred = true[keep], pred[keep]
        self._check_range(true, width)
        if confusion:
            counts = np.bincount(true.astype(np.int64) * width + pred, minlength=width * width)
            return BatchLabels(width, true.size, confusion=counts)
        return BatchLabels(width, int(true.size), true=true, pred=pred)

    def _class_index_batch(self, output: Tensor, target: Tensor) -> bool:
        """True for a well-formed class-index batch; False for class-probability targets.
        Anything malformed raises the full validation's error. The dtypes and shapes of
        the last well-formed batch are remembered: the next batch like it needs no
        structural check (its values are still checked)."""
        if isinstance(output, Tensor) and isinstance(target, Tensor):
            signature = (output.dtype, output.shape, target.dtype, target.shape)
            if signature == self._checked:
                return True
            if (output.is_floating_point() and output.ndim >= 2
                    and (self.task is None or output.shape[1] == self.task.num_outputs)
                    and not target.is_floating_point() and not target.is_complex()
                    and target.dtype != torch.bool
                    and target.shape == (output.shape[0], *output.shape[2:])):
                self._checked = signature
                return True
        self.validate(output, target)  # raises unless class-probability targets
        return False

    def loss_parts(self, output: Tensor, target: Tensor,
                   loss_fn: nn.Module) -> tuple[Tensor, Tensor]:
        if is_native(loss_fn) and family(loss_fn) in CATEGORICAL_LOSSES:
            ignore: Any = getattr(loss_fn, "ignore_index", -100)
            return categorical_parts(output, target, loss_fn, int(ignore))
        if self._soft(output, target):
            count = target.numel() // target.shape[1]
        else:
            count = int(self._valid(target).sum())
        return opaque_parts(output, target, loss_fn, count)

    def _valid(self, target: Tensor) -> Tensor:
        if self.ignore_index is None:
            return torch.ones_like(target, dtype=torch.bool)
        return target != self.ignore_index

    def decode(self, output: Tensor) -> Tensor:
        return output.argmax(1)

    def probabilities(self, output: Tensor) -> Tensor:
        dtype = torch.promote_types(output.dtype, torch.float32)
        return torch.softmax(output, dim=1, dtype=dtype)

    def valid_rows(self, output: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
        """(true class of each valid position, its (C,) logits row)."""
        width = output.shape[1]
        rows = output.movedim(1, -1).reshape(-1, width)
        if self._soft(output, target):
            return target.movedim(1, -1).reshape(-1, width).argmax(1), rows
        true = target.reshape(-1).long()
        if self.ignore_index is None:
            return true, rows
        valid = true != self.ignore_index
        return true[valid], rows[valid]

    def new_stats(self) -> Stats:
        return _ClassCounts(self)

    def metric_input(self, input: str, output: Tensor, target: Tensor) -> Arrays:
        true, rows = self.valid_rows(output.detach(), target.detach())
        if input == "probabilities":
            return numpy_of(true, np.int64), numpy_of(self.probabilities(rows), np.float64)
        return numpy_of(true, np.int64), numpy_of(rows.argmax(1), np.int64)

    def extra_metric_inputs(self, output: Tensor, target: Tensor) -> Arrays:
        return self.metric_input("labels", output, target)
