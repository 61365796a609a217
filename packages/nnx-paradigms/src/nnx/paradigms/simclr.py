"""SimCLR contrastive learning (spec §10.2): ``nt_xent_loss`` and its step factory.

NT-Xent over the 2N views of N sources: every view is an anchor whose positive
is the other view of its source and whose negatives are the other 2N − 2 views;
similarity is the cosine over ``temperature``; self-pairs are masked out; the loss
is the mean over all 2N anchors (SimCLR's formulation, and pytorch-metric-learning's
``NTXentLoss`` with labels ``[0..N−1, 0..N−1]``).

The step forwards each view separately, so BatchNorm sees one view at a time
(its batch statistics never mix the two augmentations), and finishes through
``finalize_step``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from nnx import NNEvaluationDataPoint, TrainStepContext
from nnx.extend import (
    POSITIVE,
    check_real,
    finalize_step,
    full_precision_only,
    imperative_step,
    train_mode,
)
from nnx.paradigms._classifier import one_input

__all__ = ["nt_xent_loss", "simclr_train_step_factory"]

_WHO = "simclr_train_step_factory"


def _temperature(who: str, temperature: Any) -> float:
    return float(check_real(f"{who} temperature", temperature, POSITIVE))


def nt_xent_loss(z1: torch.Tensor, z2: torch.Tensor, *,
                 temperature: float = 0.5) -> torch.Tensor:
    """The NT-Xent loss of the paired embeddings ``z1[i]`` ↔ ``z2[i]`` (each (N, D))."""
    t = _temperature("nt_xent_loss", temperature)
    for name, z in (("z1", z1), ("z2", z2)):
        if not isinstance(z, torch.Tensor) or z.dim() != 2 or not z.is_floating_point():
            got = (f"{z.dtype} of shape {tuple(z.shape)}" if isinstance(z, torch.Tensor)
                   else type(z).__name__)
            raise ValueError(f"nt_xent_loss: {name} must be a floating (N, D) tensor; got {got}")
    if z1.shape != z2.shape or z1.shape[0] == 0:
        raise ValueError(f"nt_xent_loss needs z1 and z2 of one shape (N, D) with N >= 1; got "
                         f"{tuple(z1.shape)} and {tuple(z2.shape)}")
    return _nt_xent(z1, z2, t)


def _nt_xent(z1: torch.Tensor, z2: torch.Tensor, t: float) -> torch.Tensor:
    """NT-Xent of checked embeddings at a checked temperature (the step checked both
    once, not per batch)."""
    n = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    # In place on the quotient (its backward keeps no output): no (2N, 2N) mask is built.
    logits = ((z @ z.T) / t).fill_diagonal_(float("-inf"))  # a view is not its own negative
    rows = torch.arange(n, device=z.device)
    positives = torch.cat([rows + n, rows])  # view i of z1 pairs with view i of z2
    return F.cross_entropy(logits, positives)


def _views(ctx: TrainStepContext) -> tuple[torch.Tensor, torch.Tensor]:
    """The two views of a (view1, view2) or (view1, view2, label) batch; the label, if
    any, is ignored. Each view goes through the model's batch adapter as a batch of its
    own and must yield exactly one positional input."""
    batch = ctx.batch
    if not isinstance(batch, (tuple, list)) or len(batch) not in (2, 3):
        size = f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else ""
        raise ValueError(f"{_WHO} needs (view1, view2) or (view1, view2, label) batches; got "
                         f"{type(batch).__name__}{size}")
    v1, _ = one_input(ctx.model, batch[0], _WHO)
    v2, _ = one_input(ctx.model, batch[1], _WHO)
    if v1.shape != v2.shape:
        raise ValueError(f"{_WHO}: the two views differ in shape: {tuple(v1.shape)} and "
                         f"{tuple(v2.shape)}")
    return v1, v2


def simclr_train_step_factory(
        *, temperature: float = 0.5) -> Callable[[TrainStepContext], NNEvaluationDataPoint]:
    """A ``train_step_fn`` training ``model.net`` (an encoder + projection head) with
    NT-Xent on its embeddings of the two views."""
    t = _temperature(_WHO, temperature)

    @full_precision_only
    @imperative_step
    def simclr_train_step(ctx: TrainStepContext) -> NNEvaluationDataPoint:
        train_mode(ctx)  # nnx's step factories train in train mode (§11)
        v1, v2 = _views(ctx)
        # Two forwards, not one over cat(v1, v2): BatchNorm sees one view at a time.
        z1, z2 = ctx.forward((v1,)), ctx.forward((v2,))
        if z1.dim() > 2:
            z1, z2 = z1.flatten(1), z2.flatten(1)
        if z1.dim() != 2 or z1.shape != z2.shape or z1.shape[0] == 0:
            loss = nt_xent_loss(z1.float(), z2.float(), temperature=t)  # its ValueError
        else:
            loss = _nt_xent(z1.float(), z2.float(), t)
        # The contrastive loss has no error: BEST and the plateau fall back to the loss.
        return NNEvaluationDataPoint(loss=finalize_step(ctx, loss).loss)

    simclr_train_step.temperature = t  # type: ignore[attr-defined]
    return simclr_train_step
