"""diffusion_train_step_factory (spec §9.3, §6.1): the imperative DDPM step.

For each batch: t ~ Uniform{0, …, T−1} and ε ~ N(0, I) from the global RNG (the
run's seeded stream, checkpointed with the run), x_t = √ᾱ_t x_0 + √(1 − ᾱ_t) ε, and
the MSE between ``net(x_t, t)`` and ε, finished through ``finalize_step``: the NaN
guard before backward, ``ctx.grad_clip_norm``, one ``report_update`` per optimizer
step, and its ValueError for a scaler, a reduced precision or accumulation. The step
is marked full-precision-only (an FP16/BF16 run refuses it before any run is
reserved) and imperative (passing it as ``objective=`` is refused: it steps the
optimizer itself). ``diffusion_objective`` is its counterpart on the update engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from nnx import NNEvaluationDataPoint, TrainStepContext
from nnx.diffusion.noising import add_noise, clean_input
from nnx.diffusion.schedules import NoiseSchedule
from nnx.extend import finalize_step, full_precision_only, imperative_step, train_mode

__all__ = ["diffusion_train_step_factory"]


def diffusion_train_step_factory(
        schedule: NoiseSchedule) -> Callable[[TrainStepContext], NNEvaluationDataPoint]:
    """A ``train_step_fn`` training ``model.net(x_t, t)`` to predict the noise."""
    if not isinstance(schedule, NoiseSchedule):
        raise TypeError(f"diffusion_train_step_factory needs a NoiseSchedule "
                        f"(NoiseSchedulers.LINEAR(...) / COSINE(...)); got "
                        f"{type(schedule).__name__}")

    @full_precision_only
    @imperative_step
    def diffusion_train_step(ctx: TrainStepContext) -> NNEvaluationDataPoint:
        train_mode(ctx)  # nnx's step factories train in train mode (§11)
        x0 = clean_input(ctx.model, ctx.batch, "diffusion_train_step_factory")
        on = schedule.to(x0.device)
        t = torch.randint(0, on.T, (x0.shape[0],), device=x0.device)
        eps = torch.randn_like(x0)
        pred: Any = ctx.model.forward_raw((add_noise(on, x0, t, eps), t), net=ctx.train_net)
        loss = F.mse_loss(pred, eps)
        return finalize_step(ctx, loss).record()  # loss and error: the noise MSE

    diffusion_train_step.schedule = schedule  # type: ignore[attr-defined]
    return diffusion_train_step
