"""jepa_objective (spec §6.5, §14.1): I-JEPA latent prediction on the shared update engine.

One normalized term, ``"latent_mse"`` (layout in :mod:`nnx.paradigms.jepa_core`), so
accumulation over uneven microbatches gives the full-batch update and the engine owns
backward, clipping and precision. The EMA target advances only in :meth:`after_update`:
once per committed optimizer update, never per microbatch or after a skipped window.

Masks come from the objective's own CPU generator, never the global RNG: seeded from
``seed``, or from one draw of the global RNG at first use (as nnx-diffusion's objective
does). Component ``"jepa.objective"`` holds the spec (momentum, patch layout, the
predictor's path inside model.net), the EMA target, its update counter and the
generator, so a stateful resume continues exactly and a resume with another momentum or
patch layout is refused before anything is restored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from nnx.extend import (
    ComponentSpec,
    LossTerm,
    Objective,
    ObjectiveContext,
    ObjectiveResult,
    ObjectiveStream,
    UpdateEvent,
)
from nnx.paradigms.jepa_core import JEPACore, MaskFn

__all__ = ["JEPAObjective", "jepa_objective"]

COMPONENT = "jepa.objective"
_VERSION = 1


class JEPAObjective(Objective):
    """The objective returned by :func:`jepa_objective`."""

    def __init__(self, target_encoder: Any, predictor: Any, mask_fn: MaskFn, *,
                 ema_momentum: float = 0.996, seed: int | None = None) -> None:
        self.core = JEPACore("jepa_objective", target_encoder, predictor, mask_fn,
                             ema_momentum)
        self.stream = ObjectiveStream("jepa_objective", seed)

    @property
    def target_encoder(self) -> Any:
        return self.core.target

    @property
    def ema_momentum(self) -> float:
        return self.core.momentum

    @property
    def updates(self) -> int:
        """How many times the EMA target has advanced (committed updates)."""
        return self.core.updates

    @property
    def seed(self) -> int | None:
        return self.stream.seed

    @property
    def generator(self) -> torch.Generator:
        """The objective's CPU generator for masks, created (and seeded) on first use."""
        return self.stream.generator

    def check_run(self, model: Any, *, optimizers: Mapping[str | None, Any],
                  callbacks: Sequence[Any]) -> None:
        self.core.bind(model.net)

    def __call__(self, ctx: ObjectiveContext) -> ObjectiveResult:
        x = JEPACore.patches(ctx.model, ctx.batch, "jepa_objective")
        self.core.bind(ctx.model.net)  # a no-op after check_run
        ctx_idx, tgt_idx = self.core.masks(x, self.generator)
        target = self.core.target_latents(x, tgt_idx)
        context = ctx.full_precision(ctx.model.forward_raw((x, ctx_idx), net=ctx.train_net))
        squared = self.core.squared_error(context, ctx_idx, tgt_idx, target)
        count = float(target.numel())
        return ObjectiveResult((LossTerm("latent_mse", squared, count),),
                               metrics={"latent_mse": float(squared.detach()) / count})

    def after_update(self, events: Sequence[UpdateEvent]) -> None:
        self.core.advance()

    # -- component state (§14.1) -------------------------------------------------------
    def component_spec(self) -> ComponentSpec:
        return ComponentSpec(COMPONENT, version=_VERSION)

    def component_state(self) -> dict[str, Any]:
        return {**self.core.state(), **self.stream.state()}

    def check_component_state(self, state: Any, *, version: int) -> list[str]:
        return self.core.problems(COMPONENT, state) + self.stream.problems(COMPONENT, state)

    def load_component_state(self, state: Any, *, version: int) -> None:
        self.core.load(state)
        self.stream.load(state)

    def __repr__(self) -> str:
        return f"jepa_objective(ema_momentum={self.core.momentum}, seed={self.seed})"


def jepa_objective(target_encoder: Any, predictor: Any, mask_fn: MaskFn, *,
                   ema_momentum: float = 0.996, seed: int | None = None) -> JEPAObjective:
    """I-JEPA (masked-patch → latent prediction against an EMA target) as an objective."""
    return JEPAObjective(target_encoder, predictor, mask_fn, ema_momentum=ema_momentum,
                         seed=seed)
