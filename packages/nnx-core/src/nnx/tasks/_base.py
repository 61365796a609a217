"""The adapter interface and the whole-loader accumulator every adapter shares."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor, nn

from nnx._foundation.records import NNEvaluationDataPoint
from nnx.metrics import check_metric_inputs
from nnx.params.task import TaskSpec
from nnx.tasks._losses import family, is_torch_loss, reduction_of
from nnx.tasks.row_ids import batch_row_ids

__all__ = ["Stats", "TaskAccumulator", "TaskAdapter", "TrainingBatch", "host_arrays",
           "numpy_of"]

Arrays = tuple[npt.NDArray[Any], npt.NDArray[Any]]


_NO_NUMPY = (torch.bfloat16, torch.float16)


def numpy_of(tensor: Tensor, dtype: Any = None) -> npt.NDArray[Any]:
    """A detached CPU NumPy copy (bf16 and other NumPy-less dtypes go through float64)."""
    data = tensor.detach().cpu()
    if data.dtype in _NO_NUMPY:
        data = data.double()
    array = data.numpy()
    return array if dtype is None else array.astype(dtype, copy=False)


def host_arrays(*tensors: Tensor) -> list[npt.NDArray[Any]]:
    """Host NumPy copies of ``tensors``, flattened, with one device-to-host transfer.

    CPU tensors are viewed without a copy. Tensors on another device are packed
    into one float64 buffer, copied once (one synchronization), and split again;
    integer and boolean values come back as int64 (exact below 2**53).
    """
    if all(t.is_cpu for t in tensors):
        return [numpy_of(t.reshape(-1)) if t.dtype in _NO_NUMPY else t.detach().reshape(-1).numpy()
                for t in tensors]
    flat = torch.cat([t.detach().reshape(-1).to(torch.float64) for t in tensors]).cpu().numpy()
    out: list[npt.NDArray[Any]] = []
    start = 0
    for t in tensors:
        part = flat[start:start + t.numel()]
        start += t.numel()
        out.append(part if t.is_floating_point() else part.astype(np.int64))
    return out


def _scalar(value: Any) -> float:
    return float(value.detach()) if isinstance(value, Tensor) else float(value)


class TrainingBatch:
    """One training microbatch as the default step sees it (spec §6.3).

    Made by :meth:`TaskAdapter.training_batch` after the batch was validated.
    ``numerator`` is what to back-propagate: the summed loss over valid targets,
    or that sum divided by ``weight`` when ``normalized`` (a window of this one
    microbatch). ``weight`` is the normalization weight (0 when every target is
    masked), ``total`` the summed loss's value and ``value`` the batch's loss as
    recorded (``total``, or ``total / weight`` unless ``summed``; NaN without a
    valid target). ``has_targets`` is ``weight > 0``, known without ``weight``.
    :meth:`record` is the record :meth:`TaskAdapter.record` writes.

    An adapter may leave ``weight`` and ``total`` to be counted when first read
    (:meth:`_count`), for a normalized batch whose ``value`` is already known.
    """

    __slots__ = ("_total", "_weight", "adapter", "has_targets", "normalized", "numerator",
                 "output", "summed", "target", "value")

    def __init__(self, adapter: TaskAdapter, output: Tensor, target: Tensor, numerator: Tensor,
                 *, weight: float, total: float, summed: bool, normalized: bool = False,
                 value: float | None = None) -> None:
        self.adapter = adapter
        self.output, self.target = output, target
        self.numerator = numerator
        self._weight: float | None = weight
        self._total: float | None = total
        self.summed, self.normalized = summed, normalized
        self.has_targets = weight > 0
        if value is None:
            value = (total if summed else total / weight) if weight > 0 else math.nan
        self.value = value

    @property
    def weight(self) -> float:
        return self._counted()[0]

    @property
    def total(self) -> float:
        return self._counted()[1]

    def _counted(self) -> tuple[float, float]:
        if self._weight is None or self._total is None:
            self._count()
        assert self._weight is not None and self._total is not None
        return self._weight, self._total

    def _count(self) -> None:
        """Set ``_weight`` and ``_total`` (only an adapter that deferred them has to)."""
        raise AssertionError("this batch's weight was counted when it was made")

    def record(self, loss: float | None) -> NNEvaluationDataPoint:
        return self.adapter.record(self.output, self.target, loss=loss, validate=False)


class Stats(ABC):
    """Running sums behind a kind's record fields."""

    count: int = 0

    @abstractmethod
    def add(self, output: Tensor, target: Tensor) -> None: ...

    @abstractmethod
    def fields(self) -> dict[str, Any]:
        """Record fields (``accuracy``, ``error`` …, ``metrics``) for ``count > 0``."""


class TaskAdapter(ABC):
    """What the loop, evaluate() and predict() ask of a task (spec §6.3).

    ``task`` is the declared :class:`TaskSpec` (None for the implicit default);
    ``loss_fn`` the loss the adapter was built for. ``metric_inputs`` lists the
    metric inputs (``labels`` / ``probabilities`` / ``continuous``) the model
    can provide and ``metric_kind`` how labels are decoded.
    """

    #: The task kind written into records (None: a default adapter's legacy records).
    kind: str | None = None
    #: How labels and probabilities are produced: categorical, multilabel, regression.
    metric_kind: str | None = None

    def __init__(self, task: TaskSpec | None, loss_fn: nn.Module) -> None:
        self.task = task
        self.loss_fn = loss_fn
        if task is not None:
            self.kind = task.kind

    # -- descriptions -------------------------------------------------------------
    @property
    def num_outputs(self) -> int | None:
        """The declared output width (None without a task)."""
        return None if self.task is None else self.task.num_outputs

    @property
    def metric_inputs(self) -> frozenset[str]:
        return frozenset()

    @property
    def description(self) -> str:
        what = (f"a {self.task.kind} task of width {self.task.num_outputs}"
                if self.task is not None else "a model without a task")
        return f"{what} trained with {type(self.loss_fn).__name__}"

    def reduction(self, loss_fn: nn.Module) -> str:
        """``"sum"`` when ``loss_fn`` sums (its numerators add up), else ``"mean"``."""
        return "sum" if reduction_of(loss_fn) == "sum" else "mean"

    # -- the Task protocol (nnx.tasks.protocol): the built-in tasks' answers ------
    def objective(self) -> Any | None:
        """None: the default supervised step owns the update."""
        return None

    def eval_step(self) -> Any | None:
        """None: validation runs ``NNModel.evaluate``."""
        return None

    def metric_specs(self) -> tuple[Any, ...]:
        """No task-native named metrics: records carry the kind's fields (§6.3)."""
        return ()

    def sample_ids(self, data: Any, rows: int) -> Any | None:
        """The ids identified inputs give their rows (graph seed rows, §3.1); else None:
        ``predict_proba`` numbers rows by iteration position."""
        return batch_row_ids(data)

    def refuse_default(self, path: str) -> None:
        """The built-in tasks run every default path: accept by returning."""
        return None

    # -- the contract ------------------------------------------------------------
    @abstractmethod
    def check_loss(self, loss_fn: nn.Module) -> None:
        """Raise ``ValueError`` if ``loss_fn`` does not suit this task."""

    @abstractmethod
    def validate(self, output: Tensor, target: Tensor) -> None:
        """Raise :class:`TaskValidationError` for a wrong shape, dtype or value."""

    @abstractmethod
    def loss_parts(self, output: Tensor, target: Tensor,
                   loss_fn: nn.Module) -> tuple[Tensor, Tensor]:
        """(differentiable summed loss over valid targets, its normalization weight)."""

    @abstractmethod
    def decode(self, output: Tensor) -> Tensor:
        """Predictions: class indices, 0/1 indicators or the values themselves."""

    def probabilities(self, output: Tensor) -> Tensor:
        """Class probabilities (categorical) or element-wise sigmoid (multilabel)."""
        raise ValueError(f"{self.description} has no probabilities")

    @abstractmethod
    def extra_metric_inputs(self, output: Tensor, target: Tensor) -> Arrays:
        """``(y_true, y_pred)`` NumPy arrays over valid targets for user extra_metrics."""

    @abstractmethod
    def metric_input(self, input: str, output: Tensor, target: Tensor) -> Arrays:
        """``(target, prediction)`` of valid samples for a declared metric's input."""

    @abstractmethod
    def new_stats(self) -> Stats:
        """Fresh running sums for this kind's record fields."""

    def training_batch(self, output: Tensor, target: Tensor, loss_fn: nn.Module, *,
                       normalize: bool = False) -> TrainingBatch:
        """Validate one training microbatch and split its loss (the default step's view).

        The numerator and weight are :meth:`loss_parts`'; with ``normalize`` (a
        window of this one microbatch) a mean-reduced numerator comes divided by
        its weight, as a mean loss would. An adapter may compute all this, and
        the batch's record, with fewer library calls and host synchronizations.
        """
        self.validate(output, target)
        numerator, denominator = self.loss_parts(output, target, loss_fn)
        weight, total = float(denominator), numerator.item()
        summed = self.reduction(loss_fn) == "sum"
        normalized = normalize and not summed and weight > 0
        return TrainingBatch(self, output.detach(), target,
                             numerator / weight if normalized else numerator,
                             weight=weight, total=total, summed=summed, normalized=normalized)

    # -- records -----------------------------------------------------------------
    def accumulator(self, metrics: Iterable[Any] = ()) -> TaskAccumulator:
        """A whole-loader accumulator computing the record and ``metrics`` (MetricSpecs)."""
        return TaskAccumulator(self, metrics)

    def record(self, output: Tensor, target: Tensor, loss: Any = None, *,
               validate: bool = True) -> NNEvaluationDataPoint:
        """The one-batch record the default step writes (``loss`` as given)."""
        if validate:
            self.validate(output, target)
        stats = self.new_stats()
        with torch.no_grad():
            stats.add(output.detach(), target.detach())
        return self.stats_record(stats, None if loss is None else _scalar(loss))

    def stats_record(self, stats: Stats, loss: float | None,
                     metrics: Mapping[str, float] | None = None) -> NNEvaluationDataPoint:
        """The record of ``stats`` with ``loss`` and declared ``metrics`` (empty when a task
        saw no valid target: no loss, no metrics)."""
        count = stats.count
        if self.task is not None and count == 0:
            return NNEvaluationDataPoint(kind=self.task.kind, count=0, status="empty")
        return self.fields_record(count, stats.fields() if count > 0 else {}, loss, metrics)

    def fields_record(self, count: int, fields: dict[str, Any], loss: float | None,
                      metrics: Mapping[str, float] | None = None) -> NNEvaluationDataPoint:
        """The record of ``count`` valid targets whose :meth:`Stats.fields` are ``fields``."""
        task = self.task
        if task is not None and count == 0:
            return NNEvaluationDataPoint(kind=task.kind, count=0, status="empty")
        values = dict(fields.pop("metrics", {}))
        if metrics:
            values.update(metrics)
        if task is None:
            return NNEvaluationDataPoint(loss=loss, metrics=values, **fields)
        return NNEvaluationDataPoint(loss=loss, metrics=values, kind=task.kind, count=count,
                                     status="ok", **fields)

    # -- shared checks -----------------------------------------------------------
    def _check_module(self, loss_fn: Any) -> None:
        if not isinstance(loss_fn, nn.Module):
            raise ValueError(f"a loss must be an nn.Module; got {type(loss_fn).__name__}")
        if family(loss_fn) is not None and reduction_of(loss_fn) not in ("mean", "sum"):
            raise ValueError(
                f"{type(loss_fn).__name__}(reduction={reduction_of(loss_fn)!r}) gives no scalar "
                f"loss to train on; use reduction='mean' or 'sum'"
            )

    def _check_family(self, loss_fn: nn.Module, allowed: tuple[str, ...], names: str) -> bool:
        """Refuse a torch loss outside ``allowed``; True if ``loss_fn`` is in it."""
        self._check_module(loss_fn)
        if family(loss_fn) in allowed:
            return True
        if family(loss_fn) is not None or is_torch_loss(loss_fn):
            what = f"a {self.task.kind} task" if self.task is not None else "this model"
            raise ValueError(
                f"{type(loss_fn).__name__} does not suit {what}: use {names}"
            )
        return False  # a custom module: called unchanged, owns its normalization


class TaskAccumulator:
    """Accumulates a whole loader (or epoch) into one record.

    Record fields and declared metrics are computed over every valid sample;
    the loss is the sum of the given numerators over the sum of denominators.
    """

    def __init__(self, adapter: TaskAdapter, metrics: Iterable[Any] = ()) -> None:
        self.adapter = adapter
        self._stats = adapter.new_stats()
        self._metrics = [
            (spec.label, registration.input, registration.factory(spec.config))
            for spec, registration in check_metric_inputs(tuple(metrics), adapter)
        ]
        self._numerator = 0.0
        self._denominator = 0.0
        self._has_loss = False

    @property
    def count(self) -> int:
        """Valid targets seen so far."""
        return self._stats.count

    def update(self, output: Tensor, target: Tensor, loss_numerator: Any = None,
               loss_denominator: Any = None, *, validate: bool = True) -> None:
        """Add one batch (``validate=False`` when the caller already validated it)."""
        if (loss_numerator is None) != (loss_denominator is None):
            raise ValueError(
                "pass loss_numerator and loss_denominator together (the denominator of "
                "a summed loss is 1)"
            )
        if validate:
            self.adapter.validate(output, target)
        with torch.no_grad():
            output, target = output.detach(), target.detach()
            self._stats.add(output, target)
            inputs: dict[str, Arrays] = {}
            for _, kind, metric in self._metrics:
                if kind not in inputs:
                    inputs[kind] = self.adapter.metric_input(kind, output, target)
                y_true, y_pred = inputs[kind]
                if y_true.size:
                    metric.update(y_true, y_pred)
        if loss_numerator is not None:
            self._numerator += _scalar(loss_numerator)
            self._denominator += _scalar(loss_denominator)
            self._has_loss = True

    def result(self) -> NNEvaluationDataPoint:
        """The record of everything seen (status "empty" when every target was masked)."""
        if self.adapter.task is not None and self._stats.count == 0:
            return self.adapter.stats_record(self._stats, None)
        loss = (self._numerator / self._denominator
                if self._has_loss and self._denominator != 0 else None)
        metrics = {label: float(metric.result()) for label, _, metric in self._metrics}
        return self.adapter.stats_record(self._stats, loss, metrics)
