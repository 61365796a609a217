"""Multilabel classification: 0/1 targets shaped like the output, NaN masked."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor, nn

from nnx.params.task import TaskSpec
from nnx.tasks._base import Arrays, Stats, TaskAdapter, numpy_of
from nnx.tasks._losses import (
    MULTILABEL_LOSSES,
    TaskValidationError,
    elementwise_parts,
    family,
    is_native,
    opaque_parts,
)
from nnx.tasks._macro import macro_scores

__all__ = ["MultilabelAdapter"]


class _LabelCounts(Stats):
    """Per-label confusion counts, element and subset (row) correctness."""

    def __init__(self, adapter: MultilabelAdapter) -> None:
        self.adapter = adapter
        self.count = 0
        self.labels = 0
        self.tp: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.n_true = self.tp.copy()
        self.n_pred = self.tp.copy()
        self.n_valid = self.tp.copy()
        self.correct = 0
        self.rows = 0
        self.rows_correct = 0

    def add(self, output: Tensor, target: Tensor) -> None:
        pred, true, valid = self.adapter.cells(output, target)  # each (N, L, R)
        labels = pred.shape[1]
        if self.labels == 0:
            self.labels = labels
            self.tp, self.n_true, self.n_pred, self.n_valid = (
                np.zeros(labels, dtype=np.int64) for _ in range(4))
        elif labels != self.labels:
            raise TaskValidationError(
                f"the output has {labels} labels but earlier batches had {self.labels}"
            )
        hit = pred == true
        per_label = torch.stack([
            (true & pred & valid).sum((0, 2)), (true & valid).sum((0, 2)),
            (pred & valid).sum((0, 2)), valid.sum((0, 2)),
        ])
        row_valid = valid.flatten(1).any(1)
        row_correct = (hit | ~valid).flatten(1).all(1) & row_valid
        totals = torch.stack([(hit & valid).sum(), row_valid.sum(), row_correct.sum()])
        counts, sums = per_label.cpu().numpy(), totals.cpu().numpy()
        self.tp += counts[0]
        self.n_true += counts[1]
        self.n_pred += counts[2]
        self.n_valid += counts[3]
        self.correct += int(sums[0])
        self.rows += int(sums[1])
        self.rows_correct += int(sums[2])
        self.count += int(counts[3].sum())

    def fields(self) -> dict[str, Any]:
        subset = self.rows_correct / self.rows
        out: dict[str, Any] = {
            "accuracy": subset, "error": 1.0 - subset,
            **macro_scores(self.tp, self.n_true, self.n_pred, self.n_valid > 0),
        }
        if self.adapter.task is not None:
            out["metrics"] = {"subset_accuracy": subset,
                              "element_accuracy": self.correct / self.count}
        return out


class MultilabelAdapter(TaskAdapter):
    """Independent 0/1 labels; a label is on when sigmoid(logit) >= threshold.

    Without a task (the default for BCEWithLogitsLoss) the threshold is 0.5
    (logit >= 0), any output shape is accepted and targets may be soft
    probabilities in [0, 1] (scored as on when >= 0.5).
    """

    metric_kind = "multilabel"

    def __init__(self, task: TaskSpec | None, loss_fn: nn.Module) -> None:
        super().__init__(task, loss_fn)
        threshold = 0.5 if task is None or task.threshold is None else task.threshold
        self.threshold = float(threshold)
        #: The decision rule on logits: sigmoid(x) >= t  <=>  x >= log(t / (1 - t)).
        self.logit_threshold = math.log(self.threshold / (1.0 - self.threshold))

    @property
    def metric_inputs(self) -> frozenset[str]:
        if family(self.loss_fn) in MULTILABEL_LOSSES:
            return frozenset({"labels", "probabilities"})
        return frozenset({"labels"})

    def check_loss(self, loss_fn: nn.Module) -> None:
        if not self._check_family(loss_fn, MULTILABEL_LOSSES, "BCEWithLogitsLoss"):
            return
        pos_weight = getattr(loss_fn, "pos_weight", None)
        if (self.task is not None and isinstance(pos_weight, Tensor)
                and pos_weight.numel() not in (1, self.task.num_outputs)):
            raise ValueError(
                f"BCEWithLogitsLoss has {pos_weight.numel()} pos_weight entries but the task "
                f"has {self.task.num_outputs} labels"
            )

    def validate(self, output: Tensor, target: Tensor) -> None:
        if not isinstance(output, Tensor) or not isinstance(target, Tensor):
            raise TaskValidationError("output and target must be tensors")
        if not output.is_floating_point():
            raise TaskValidationError(f"a multilabel output must be floating logits; got "
                                      f"{output.dtype}")
        if self.task is not None and (output.ndim < 2
                                      or output.shape[1] != self.task.num_outputs):
            raise TaskValidationError(
                f"the output must have the task's {self.task.num_outputs} labels on axis "
                f"1; got shape {tuple(output.shape)}"
            )
        if target.shape != output.shape:
            raise TaskValidationError(
                f"multilabel targets must be shaped like the output {tuple(output.shape)}; "
                f"got {tuple(target.shape)}"
            )
        if target.is_complex():
            raise TaskValidationError(f"multilabel targets must be 0/1; got {target.dtype}")
        if target.dtype == torch.bool:
            return
        valid = ~torch.isnan(target) if target.is_floating_point() else torch.ones_like(
            target, dtype=torch.bool)
        if self.task is None:
            bad = valid & ((target < 0) | (target > 1))
            allowed = "values in [0, 1]"
        else:
            bad = valid & (target != 0) & (target != 1)
            allowed = "0/1 (NaN masks a label)"
        if bool(bad.any()):
            value = target[bad].reshape(-1)[0].item()
            raise TaskValidationError(f"multilabel targets must be {allowed}; got {value}")

    @staticmethod
    def _valid(target: Tensor) -> Tensor:
        if target.is_floating_point():
            return ~torch.isnan(target)
        return torch.ones_like(target, dtype=torch.bool)

    def loss_parts(self, output: Tensor, target: Tensor,
                   loss_fn: nn.Module) -> tuple[Tensor, Tensor]:
        valid = self._valid(target)
        if is_native(loss_fn) and family(loss_fn) in MULTILABEL_LOSSES:
            return elementwise_parts(output, target, valid, loss_fn)
        if not bool(valid.all()):
            raise TaskValidationError(
                f"{type(loss_fn).__name__} scores complete batches only; masked (NaN) "
                f"targets need an element-wise loss (BCEWithLogitsLoss)"
            )
        return opaque_parts(output, target, loss_fn, target.numel())

    def decode(self, output: Tensor) -> Tensor:
        return (output >= self.logit_threshold).long()

    def probabilities(self, output: Tensor) -> Tensor:
        return torch.sigmoid(output.to(torch.promote_types(output.dtype, torch.float32)))

    def cells(self, output: Tensor, target: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(decoded, true, valid) boolean tensors shaped (N, labels, rest)."""
        rows = output.shape[0] if output.ndim else 1
        shape = (rows, output.shape[1] if output.ndim >= 2 else 1, -1)
        valid = self._valid(target)
        true = torch.where(valid, target, torch.zeros_like(target)) >= 0.5
        pred = output >= self.logit_threshold
        return pred.reshape(shape), true.reshape(shape), valid.reshape(shape)

    def new_stats(self) -> Stats:
        return _LabelCounts(self)

    def _flat_valid(self, output: Tensor, target: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        valid = self._valid(target).reshape(-1)
        return output.reshape(-1)[valid], target.reshape(-1)[valid], valid

    def metric_input(self, input: str, output: Tensor, target: Tensor) -> Arrays:
        out, tgt, _ = self._flat_valid(output, target)
        if input == "probabilities":
            return numpy_of(tgt, np.float64), numpy_of(self.probabilities(out), np.float64)
        true = (tgt >= 0.5).long()
        return numpy_of(true, np.int64), numpy_of(self.decode(out), np.int64)

    def extra_metric_inputs(self, output: Tensor, target: Tensor) -> Arrays:
        return self.metric_input("labels", output, target)
