"""Regression (floating targets shaped like the output) and the loss-only default."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from nnx.tasks._base import Arrays, Stats, TaskAdapter, numpy_of
from nnx.tasks._losses import (
    REGRESSION_LOSSES,
    TaskValidationError,
    elementwise_parts,
    family,
    is_native,
    opaque_parts,
)

__all__ = ["LossOnlyAdapter", "RegressionAdapter"]

_NAMES = "MSELoss, L1Loss, SmoothL1Loss or HuberLoss"


class _ErrorSums(Stats):
    def __init__(self, adapter: RegressionAdapter) -> None:
        self.adapter = adapter
        self.count = 0
        self.squared = 0.0
        self.absolute = 0.0

    def add(self, output: Tensor, target: Tensor) -> None:
        out, tgt = self.adapter.valid_values(output, target)
        diff = out.double() - tgt.double()
        sums = torch.stack([diff.square().sum(), diff.abs().sum()]).cpu().tolist()
        self.squared += sums[0]
        self.absolute += sums[1]
        self.count += int(tgt.numel())

    def fields(self) -> dict[str, Any]:
        return {"metrics": {"mse": self.squared / self.count,
                            "mae": self.absolute / self.count}}


class RegressionAdapter(TaskAdapter):
    """Floating targets shaped like the output ((N,) only for an (N, 1) output); NaN
    masks a target. Records carry mse / mae and no classification fields."""

    metric_kind = "regression"

    @property
    def metric_inputs(self) -> frozenset[str]:
        return frozenset({"continuous"})

    def check_loss(self, loss_fn: nn.Module) -> None:
        self._check_family(loss_fn, REGRESSION_LOSSES, _NAMES)

    def validate(self, output: Tensor, target: Tensor) -> None:
        if not isinstance(output, Tensor) or not isinstance(target, Tensor):
            raise TaskValidationError("output and target must be tensors")
        width = self.num_outputs
        if not output.is_floating_point() or output.ndim < 2 or output.shape[1] != width:
            raise TaskValidationError(
                f"a regression output must be floating and shaped (N, {width}, ...) for the "
                f"task's {width} targets; got {output.dtype} {tuple(output.shape)}"
            )
        if not target.is_floating_point():
            raise TaskValidationError(
                f"regression targets must be floating; got {target.dtype}"
            )
        column = target.ndim == 1 and tuple(output.shape) == (target.shape[0], 1)
        if target.shape != output.shape and not column:
            raise TaskValidationError(
                f"regression targets must be shaped like the output {tuple(output.shape)} "
                f"(an (N,) target only for an (N, 1) output; nothing broadcasts); got "
                f"{tuple(target.shape)}"
            )

    @staticmethod
    def shaped(output: Tensor, target: Tensor) -> Tensor:
        """``target`` with ``output``'s shape (an (N,) target of an (N, 1) output)."""
        return target.reshape(output.shape) if target.shape != output.shape else target

    def loss_parts(self, output: Tensor, target: Tensor,
                   loss_fn: nn.Module) -> tuple[Tensor, Tensor]:
        target = self.shaped(output, target)
        valid = ~torch.isnan(target)
        if is_native(loss_fn) and family(loss_fn) in REGRESSION_LOSSES:
            return elementwise_parts(output, target, valid, loss_fn)
        if not bool(valid.all()):
            raise TaskValidationError(
                f"{type(loss_fn).__name__} scores complete batches only; masked (NaN) "
                f"targets need an element-wise loss ({_NAMES})"
            )
        return opaque_parts(output, target, loss_fn, target.numel())

    def decode(self, output: Tensor) -> Tensor:
        return output

    def valid_values(self, output: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
        """(output values, target values) at valid positions, flattened."""
        target = self.shaped(output, target).reshape(-1)
        valid = ~torch.isnan(target)
        return output.reshape(-1)[valid], target[valid]

    def new_stats(self) -> Stats:
        return _ErrorSums(self)

    def metric_input(self, input: str, output: Tensor, target: Tensor) -> Arrays:
        out, tgt = self.valid_values(output, target)
        return numpy_of(tgt, np.float64), numpy_of(out, np.float64)

    def extra_metric_inputs(self, output: Tensor, target: Tensor) -> Arrays:
        return self.metric_input("continuous", output, target)


class _NoStats(Stats):
    def __init__(self) -> None:
        self.count = 0

    def add(self, output: Tensor, target: Tensor) -> None:
        return None

    def fields(self) -> dict[str, Any]:  # pragma: no cover - count stays 0
        return {}


class LossOnlyAdapter(TaskAdapter):
    """The default for a model without a task whose loss is neither cross-entropy,
    NLL nor BCE-with-logits: its records carry the loss only.

    The loss is called unchanged. Predictions are the argmax over axis 1 of a
    multi-column output (the legacy classification reading) and the values
    otherwise; a regression loss also feeds continuous metrics.
    """

    @property
    def metric_inputs(self) -> frozenset[str]:
        if family(self.loss_fn) in REGRESSION_LOSSES:
            return frozenset({"continuous"})
        return frozenset()

    def __init__(self, task: None, loss_fn: nn.Module) -> None:
        super().__init__(task, loss_fn)
        if family(loss_fn) in REGRESSION_LOSSES:
            self.metric_kind = "regression"

    def check_loss(self, loss_fn: nn.Module) -> None:
        if isinstance(loss_fn, nn.Module):
            self._check_module(loss_fn)
        elif not callable(loss_fn):
            raise ValueError(f"a loss must be an nn.Module; got {type(loss_fn).__name__}")

    def validate(self, output: Tensor, target: Tensor) -> None:
        if not isinstance(output, Tensor) or not isinstance(target, Tensor):
            raise TaskValidationError("output and target must be tensors")
        if family(self.loss_fn) in REGRESSION_LOSSES and target.shape != output.shape and not (
                target.is_floating_point() or target.is_complex()):
            # Class labels fed to a regression loss: torch would broadcast them against
            # the output (a warning), then fail on the shape or silently compare every
            # row with every label. Integer targets of the output's shape promote fine.
            name = type(self.loss_fn).__name__
            raise TaskValidationError(
                f"{name} (a regression loss; the model declares no task) got {target.dtype} "
                f"labels of shape {tuple(target.shape)} for an output of shape "
                f"{tuple(output.shape)}: for regression pass float targets of the output's "
                f"shape {tuple(output.shape)} (and declare TaskSpec.regression("
                f"{output.shape[-1] if output.ndim > 1 else 1})); for class labels train "
                f"with Losses.CROSS_ENTROPY")

    def loss_parts(self, output: Tensor, target: Tensor,
                   loss_fn: nn.Module) -> tuple[Tensor, Tensor]:
        elementwise = family(loss_fn) in REGRESSION_LOSSES and target.shape == output.shape
        count = target.numel() if elementwise else (target.shape[0] if target.ndim else 1)
        return opaque_parts(output, target, loss_fn, count)

    def decode(self, output: Tensor) -> Tensor:
        if output.ndim >= 2 and output.shape[1] >= 2:
            return output.argmax(1)
        return output

    def new_stats(self) -> Stats:
        return _NoStats()

    def metric_input(self, input: str, output: Tensor, target: Tensor) -> Arrays:
        if output.numel() != target.numel():
            raise TaskValidationError(
                f"continuous metrics need one output per target; got output "
                f"{tuple(output.shape)} and target {tuple(target.shape)}"
            )
        tgt = target.reshape(-1)
        valid = ~torch.isnan(tgt) if tgt.is_floating_point() else torch.ones_like(
            tgt, dtype=torch.bool)
        return numpy_of(tgt[valid], np.float64), numpy_of(output.reshape(-1)[valid], np.float64)

    def extra_metric_inputs(self, output: Tensor, target: Tensor) -> Arrays:
        return numpy_of(target.reshape(-1)), numpy_of(self.decode(output.detach()).reshape(-1))
