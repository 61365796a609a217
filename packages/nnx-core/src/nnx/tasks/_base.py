"""The adapter interface and the whole-loader accumulator every adapter shares."""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor, nn

from nnx.records import NNEvaluationDataPoint
from nnx.tasks._losses import family, is_torch_loss, reduction_of
from nnx.tasks.spec import TaskSpec

__all__ = ["Stats", "TaskAccumulator", "TaskAdapter", "macro_scores", "numpy_of"]

Arrays = tuple[npt.NDArray[Any], npt.NDArray[Any]]


def numpy_of(tensor: Tensor, dtype: Any = None) -> npt.NDArray[Any]:
    """A detached CPU NumPy copy (bf16 and other NumPy-less dtypes go through float64)."""
    data = tensor.detach().cpu()
    if data.dtype in (torch.bfloat16, torch.float16):
        data = data.double()
    array = data.numpy()
    return array if dtype is None else array.astype(dtype, copy=False)


def _scalar(value: Any) -> float:
    return float(value.detach()) if isinstance(value, Tensor) else float(value)


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

    # -- records -----------------------------------------------------------------
    def accumulator(self, metrics: Iterable[Any] = ()) -> TaskAccumulator:
        """A whole-loader accumulator computing the record and ``metrics`` (MetricSpecs)."""
        return TaskAccumulator(self, metrics)

    def record(self, output: Tensor, target: Tensor, loss: Any = None, *,
               validate: bool = True) -> NNEvaluationDataPoint:
        """The one-batch record the default step writes (``loss`` as given)."""
        acc = self.accumulator()
        acc.update(output, target, validate=validate)
        edp = acc.result()
        if loss is None or edp.status == "empty":
            return edp
        return dataclasses.replace(edp, loss=_scalar(loss))

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
        from nnx.metrics import check_metric_inputs

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
        task = self.adapter.task
        count = self._stats.count
        if task is not None and count == 0:
            return NNEvaluationDataPoint(kind=task.kind, count=0, status="empty")
        loss = (self._numerator / self._denominator
                if self._has_loss and self._denominator != 0 else None)
        fields = self._stats.fields() if count > 0 else {}
        metrics = dict(fields.pop("metrics", {}))
        for label, _, metric in self._metrics:
            metrics[label] = float(metric.result())
        if task is None:
            return NNEvaluationDataPoint(loss=loss, metrics=metrics, **fields)
        return NNEvaluationDataPoint(loss=loss, metrics=metrics, kind=task.kind,
                                     count=count, status="ok", **fields)


def macro_scores(tp: npt.NDArray[Any], n_true: npt.NDArray[Any], n_pred: npt.NDArray[Any],
                 labels: npt.NDArray[Any]) -> dict[str, float]:
    """Macro precision / recall / F1 over the selected ``labels`` (undefined values 0,
    scikit-learn's ``zero_division=0``; F1 = 2·tp / (n_true + n_pred))."""
    tp, n_true, n_pred = tp[labels], n_true[labels], n_pred[labels]
    if tp.size == 0:
        return {}
    tp_f = tp.astype("float64")
    precision = np.divide(tp_f, n_pred, out=np.zeros_like(tp_f), where=n_pred > 0)
    recall = np.divide(tp_f, n_true, out=np.zeros_like(tp_f), where=n_true > 0)
    both = (n_true + n_pred).astype("float64")
    f1 = np.divide(2.0 * tp_f, both, out=np.zeros_like(tp_f), where=both > 0)
    return {"precision": float(precision.mean()), "recall": float(recall.mean()),
            "f1": float(f1.mean())}
