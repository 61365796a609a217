"""moe_train_step_factory (spec §10): the supervised step plus the Switch
load-balancing loss of every MoELinear in the net.

The loss is L(f(x), y) + aux_weight · Σ_layers last_aux_loss, where each layer's
``last_aux_loss`` (nnx-core's :class:`nnx.MoELinear`) is the Switch Transformer's
``num_experts · Σ_e f_e · P_e`` pooled over every row (token) the layer routed in
this forward: ``f_e`` the fraction routed to expert ``e`` by their top choice,
``P_e`` the mean router probability of ``e``. Finished through ``finalize_step``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from nnx import MoELinear, NNEvaluationDataPoint, TrainStepContext
from nnx.extend import (
    NON_NEGATIVE,
    check_real,
    finalize_step,
    full_precision_only,
    imperative_step,
    train_mode,
)
from nnx.paradigms._classifier import classifier_batch, mixed_accuracy, supervised_loss

__all__ = ["moe_train_step_factory"]

_WHO = "moe_train_step_factory"


def moe_train_step_factory(
        *, aux_weight: float = 0.01) -> Callable[[TrainStepContext], NNEvaluationDataPoint]:
    """A ``train_step_fn`` training a classifier with MoELinear layers, their routers
    kept balanced by ``aux_weight`` × the summed per-layer Switch losses."""
    w = float(check_real(f"{_WHO} aux_weight", aux_weight, NON_NEGATIVE))

    @full_precision_only
    @imperative_step
    def moe_train_step(ctx: TrainStepContext) -> NNEvaluationDataPoint:
        train_mode(ctx)  # nnx's step factories train in train mode (§11)
        model = ctx.model
        x, y = classifier_batch(model, ctx.batch, _WHO)
        layers = [m for m in model.net.modules() if isinstance(m, MoELinear)]
        if not layers:
            raise ValueError(f"{_WHO}: model.net has no MoELinear layer (use Nets.MOE / "
                             "NNMoEParams, or nnx.MoELinear in your module)")
        for layer in layers:
            # A layer this forward skips must not add the previous batch's (freed) graph.
            layer.last_aux_loss = None
        output = ctx.forward((x,)).float()
        task = supervised_loss(model, output, y)
        losses = [layer.last_aux_loss for layer in layers if layer.last_aux_loss is not None]
        aux = torch.stack(losses).sum() if losses else output.new_zeros(())
        done = finalize_step(ctx, task + w * aux)
        accuracy = mixed_accuracy(model, output, y, y, 1.0)
        return NNEvaluationDataPoint(loss=done.loss, accuracy=accuracy,
                                     error=None if accuracy is None else 1.0 - accuracy,
                                     extra={"task_loss": float(task.detach()),
                                            "aux_loss": float(aux.detach())})

    moe_train_step.aux_weight = w  # type: ignore[attr-defined]
    return moe_train_step
