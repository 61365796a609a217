"""jepa_train_step_factory (spec §6.1, §10, §14.1): the imperative I-JEPA step.

The same pieces as :func:`~nnx.paradigms.jepa_objective.jepa_objective` (layout in
:mod:`nnx.paradigms.jepa_core`), finished through ``finalize_step``: the NaN guard before
backward, ``ctx.grad_clip_norm``, one ``report_update`` per optimizer step, and its
ValueError for a scaler, a reduced precision or accumulation. The EMA target advances
after each optimizer step the batch actually took (not after a NaN-dropped batch).

Masks are drawn from the global RNG (``torch.default_generator``, the run's seeded
stream, checkpointed with the run), as nnx-diffusion's imperative step draws its noise.
The step is a component, ``"jepa.target_encoder"`` (required): the EMA weights, the
momentum, the update counter and the patch layout. It is marked full-precision-only
(an FP16/BF16 run refuses it before any run is reserved) and imperative (passing it as
``objective=`` is refused: it steps the optimizer itself).
"""

from __future__ import annotations

from typing import Any

import torch

from nnx import NNEvaluationDataPoint, TrainStepContext
from nnx.extend import (
    ComponentSpec,
    finalize_step,
    full_precision_only,
    imperative_step,
    train_mode,
)
from nnx.paradigms.jepa_core import JEPACore, MaskFn

__all__ = ["JEPATrainStep", "jepa_train_step_factory"]

COMPONENT = "jepa.target_encoder"
_VERSION = 1


class JEPATrainStep:
    """The ``train_step_fn`` returned by :func:`jepa_train_step_factory`."""

    def __init__(self, target_encoder: Any, predictor: Any, mask_fn: MaskFn, *,
                 ema_momentum: float = 0.996) -> None:
        self.core = JEPACore("jepa_train_step_factory", target_encoder, predictor, mask_fn,
                             ema_momentum)
        full_precision_only(self)
        imperative_step(self)

    @property
    def target_encoder(self) -> Any:
        return self.core.target

    @property
    def updates(self) -> int:
        return self.core.updates

    def __call__(self, ctx: TrainStepContext) -> NNEvaluationDataPoint:
        train_mode(ctx)  # nnx's step factories train in train mode (§11)
        x = JEPACore.patches(ctx.model, ctx.batch, "jepa_train_step_factory")
        self.core.bind(ctx.model.net)
        ctx_idx, tgt_idx = self.core.masks(x, torch.default_generator)
        target = self.core.target_latents(x, tgt_idx)
        context = ctx.model.forward_raw((x, ctx_idx), net=ctx.train_net)
        loss = self.core.squared_error(context, ctx_idx, tgt_idx, target) / target.numel()
        done = finalize_step(ctx, loss)
        if done.stepped:
            self.core.advance()
        return done.record(latent_mse=done.loss)

    # -- component state (§14.1) -------------------------------------------------------
    def component_spec(self) -> ComponentSpec:
        return ComponentSpec(COMPONENT, version=_VERSION)

    def component_state(self) -> dict[str, Any]:
        return self.core.state()

    def check_component_state(self, state: Any, *, version: int) -> list[str]:
        return self.core.problems(COMPONENT, state)

    def load_component_state(self, state: Any, *, version: int) -> None:
        self.core.load(state)

    def __repr__(self) -> str:
        return f"jepa_train_step_factory(ema_momentum={self.core.momentum})"


def jepa_train_step_factory(target_encoder: Any, predictor: Any, mask_fn: MaskFn, *,
                            ema_momentum: float = 0.996) -> JEPATrainStep:
    """A ``train_step_fn`` for I-JEPA pretraining against an EMA target encoder."""
    return JEPATrainStep(target_encoder, predictor, mask_fn, ema_momentum=ema_momentum)
