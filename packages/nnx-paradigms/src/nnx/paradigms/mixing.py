"""Mixup and CutMix (spec §10.3): batch mixing as classifier step factories.

Per batch, from the run's global torch RNG (seeded by the run and checkpointed
with it, so a resume draws what the uninterrupted run would), always on the CPU
generator whatever the device: λ ~ Beta(α, α), then a permutation of the batch's
rows, then (CutMix) the box's centre. Mixup blends whole inputs,
x' = λ·x + (1 − λ)·x[perm]; CutMix pastes the box of x[perm] into x and sets λ
to the share of the image left unpasted (the box is clipped at the border, as
in the paper's and timm's ``rand_bbox``). The loss is
λ·L(f(x'), y) + (1 − λ)·L(f(x'), y[perm]) with the student's own loss (the NLL
adaptation included), finished through ``finalize_step``; the record's accuracy
is the λ-weighted top-1 correctness and its error 1 − accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from nnx import NNEvaluationDataPoint, TrainStepContext
from nnx.extend import (
    POSITIVE,
    check_real,
    finalize_step,
    full_precision_only,
    imperative_step,
    train_mode,
)
from nnx.paradigms._classifier import classifier_batch, mixed_accuracy, supervised_loss

__all__ = ["cutmix_box", "cutmix_train_step_factory", "mixup_train_step_factory"]

StepFn = Callable[[TrainStepContext], NNEvaluationDataPoint]


def _draw_lambda(alpha: float) -> float:
    """λ ~ Beta(α, α) from the global CPU generator."""
    concentration = torch.tensor(alpha, dtype=torch.float64)
    return float(torch.distributions.Beta(concentration, concentration).sample())


def _permutation(n: int, device: torch.device) -> torch.Tensor:
    return torch.randperm(n).to(device)  # drawn on the CPU generator, then moved


def cutmix_box(lam: float, height: int, width: int) -> tuple[int, int, int, int]:
    """``(y1, y2, x1, x2)``: a box of about (1 − λ) of the image's area, centred at a
    uniformly drawn pixel and clipped to the image (the global CPU generator)."""
    cut = math.sqrt(1.0 - lam)
    cut_h, cut_w = int(height * cut), int(width * cut)
    cx = int(torch.randint(width, ()))
    cy = int(torch.randint(height, ()))
    x1, x2 = max(cx - cut_w // 2, 0), min(cx + cut_w // 2, width)
    y1, y2 = max(cy - cut_h // 2, 0), min(cy + cut_h // 2, height)
    return y1, y2, x1, x2


def _mixed_step(ctx: TrainStepContext, mixed: torch.Tensor, y: torch.Tensor,
                perm: torch.Tensor, lam: float) -> NNEvaluationDataPoint:
    model = ctx.model
    output = ctx.forward((mixed,)).float()
    y_b = y[perm]
    loss = lam * supervised_loss(model, output, y) + (1.0 - lam) * supervised_loss(
        model, output, y_b)
    done = finalize_step(ctx, loss)
    accuracy = mixed_accuracy(model, output, y, y_b, lam)
    return NNEvaluationDataPoint(loss=done.loss, accuracy=accuracy,
                                 error=None if accuracy is None else 1.0 - accuracy,
                                 extra={"lambda": lam})


def _floating(x: torch.Tensor, who: str) -> None:
    if not x.is_floating_point():
        raise ValueError(f"{who} mixes inputs and needs a floating input tensor; got {x.dtype}")


def mixup_train_step_factory(*, alpha: float = 0.4) -> StepFn:
    """A ``train_step_fn`` training on Mixup batches (any input shape (B, ...))."""
    who = "mixup_train_step_factory"
    a = float(check_real(f"{who} alpha", alpha, POSITIVE))

    @full_precision_only
    @imperative_step
    def mixup_train_step(ctx: TrainStepContext) -> NNEvaluationDataPoint:
        train_mode(ctx)  # nnx's step factories train in train mode (§11)
        x, y = classifier_batch(ctx.model, ctx.batch, who)
        _floating(x, who)
        lam = _draw_lambda(a)
        perm = _permutation(x.shape[0], x.device)
        mixed = lam * x + (1.0 - lam) * x[perm]
        return _mixed_step(ctx, mixed, y, perm, lam)

    mixup_train_step.alpha = a  # type: ignore[attr-defined]
    return mixup_train_step


def cutmix_train_step_factory(*, alpha: float = 1.0) -> StepFn:
    """A ``train_step_fn`` training on CutMix batches of 4-D (B, C, H, W) images."""
    who = "cutmix_train_step_factory"
    a = float(check_real(f"{who} alpha", alpha, POSITIVE))

    @full_precision_only
    @imperative_step
    def cutmix_train_step(ctx: TrainStepContext) -> NNEvaluationDataPoint:
        train_mode(ctx)  # nnx's step factories train in train mode (§11)
        x, y = classifier_batch(ctx.model, ctx.batch, who)
        if x.dim() != 4:  # refused before anything is drawn: the cut needs H and W
            raise ValueError(f"{who} needs 4-D (B, C, H, W) image input; got shape "
                             f"{tuple(x.shape)}")
        _floating(x, who)
        height, width = x.shape[2], x.shape[3]
        drawn = _draw_lambda(a)
        perm = _permutation(x.shape[0], x.device)
        y1, y2, x1, x2 = cutmix_box(drawn, height, width)
        mixed = x.clone()
        mixed[:, :, y1:y2, x1:x2] = x[perm, :, y1:y2, x1:x2]
        lam = 1.0 - (y2 - y1) * (x2 - x1) / (height * width)  # the share actually kept
        return _mixed_step(ctx, mixed, y, perm, lam)

    cutmix_train_step.alpha = a  # type: ignore[attr-defined]
    return cutmix_train_step
