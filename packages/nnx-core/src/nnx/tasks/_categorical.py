"""Categorical classification: class-index targets, argmax decoding."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor, nn

from nnx.tasks._base import Arrays, Stats, TaskAdapter, macro_scores, numpy_of
from nnx.tasks._losses import (
    CATEGORICAL_LOSSES,
    TaskValidationError,
    categorical_parts,
    family,
    is_native,
    opaque_parts,
)
from nnx.tasks.spec import TaskSpec

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
        counts = torch.stack([
            torch.bincount(true[true == pred], minlength=num_classes),
            torch.bincount(true, minlength=num_classes),
            torch.bincount(pred, minlength=num_classes),
        ]).cpu().numpy()
        self._grow(counts.shape[1])
        size = counts.shape[1]
        self.tp[:size] += counts[0]
        self.n_true[:size] += counts[1]
        self.n_pred[:size] += counts[2]
        self.count += int(true.numel())

    def add(self, output: Tensor, target: Tensor) -> None:
        true, rows = self.adapter.valid_rows(output, target)
        self.add_labels(true, rows.argmax(1), rows.shape[1])

    def fields(self) -> dict[str, Any]:
        accuracy = float(self.tp.sum()) / self.count
        present = (self.n_true + self.n_pred) > 0
        return {"accuracy": accuracy, "error": 1.0 - accuracy,
                **macro_scores(self.tp, self.n_true, self.n_pred, present)}


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
        bad = (target < 0) | (target >= width)
        if self.ignore_index is not None:
            bad &= target != self.ignore_index
        if bool(bad.any()):
            value = int(target[bad].reshape(-1)[0])
            allowed = f"[0, {width})"
            if self.ignore_index is not None:
                allowed += f" or ignore_index={self.ignore_index}"
            raise TaskValidationError(
                f"categorical targets must be class indices in {allowed}; got {value}"
            )

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
