"""diffusion_objective (spec §6.5, §9, §14.1): DDPM noise prediction on the update engine.

One normalized term, ``"noise_mse"``: the squared error summed over every element of
the microbatch, over the element count. So accumulation over uneven microbatches
gives the full-batch update, and the engine owns backward, clipping, precision.

Timesteps and noise come from the objective's own CPU generator, never the global
RNG: seeded from ``seed``, or from one draw of the global RNG at first use. The
generator is checkpointed component state (``"diffusion.objective"``, with the
schedule's kind, T, args and betas fingerprint), so a stateful resume continues the
stream and a resume with another schedule is refused before anything is restored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from nnx.diffusion.noising import add_noise, clean_input
from nnx.diffusion.schedules import NoiseSchedule
from nnx.extend import (
    ComponentSpec,
    LossTerm,
    Objective,
    ObjectiveContext,
    ObjectiveResult,
    ObjectiveStream,
)

__all__ = ["COMPONENT", "DiffusionObjective", "NoiseFn", "diffusion_objective"]

COMPONENT = "diffusion.objective"
_VERSION = 1

#: ``noise_fn(x_0, generator) -> (t, eps)``: t integer of shape (B,) in [0, T), eps like x_0.
NoiseFn = Callable[[torch.Tensor, torch.Generator], tuple[torch.Tensor, torch.Tensor]]


class DiffusionObjective(Objective):
    """The objective returned by :func:`diffusion_objective`."""

    def __init__(self, schedule: NoiseSchedule, *, seed: int | None = None,
                 noise_fn: NoiseFn | None = None) -> None:
        if not isinstance(schedule, NoiseSchedule):
            raise TypeError(f"diffusion_objective needs a NoiseSchedule "
                            f"(NoiseSchedulers.LINEAR(...) / COSINE(...)); got "
                            f"{type(schedule).__name__}")
        if noise_fn is not None and not callable(noise_fn):
            raise TypeError(f"diffusion_objective noise_fn must be callable "
                            f"(x_0, generator) -> (t, eps); got {type(noise_fn).__name__}")
        self.schedule = schedule
        self.stream = ObjectiveStream("diffusion_objective", seed)
        self.noise_fn = noise_fn

    @property
    def seed(self) -> int | None:
        return self.stream.seed

    @property
    def generator(self) -> torch.Generator:
        """The objective's CPU generator, created (and seeded) on first use."""
        return self.stream.generator

    def _draw(self, x0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        g = self.generator
        n, T = x0.shape[0], self.schedule.T
        if self.noise_fn is None:
            t = torch.randint(0, T, (n,), generator=g)
            eps = torch.randn(x0.shape, generator=g, dtype=torch.float32)
        else:
            t, eps = self.noise_fn(x0, g)
            if not isinstance(t, torch.Tensor) or t.shape != (n,) or t.is_floating_point() or (
                    t.is_complex() or t.dtype == torch.bool):
                raise ValueError(f"diffusion_objective noise_fn must return t as an integer "
                                 f"tensor of shape ({n},); got {t!r:.80}")
            if n and (int(t.min()) < 0 or int(t.max()) >= T):
                raise ValueError(f"diffusion_objective noise_fn returned timesteps outside "
                                 f"[0, {T}): min {int(t.min())}, max {int(t.max())}")
            if not isinstance(eps, torch.Tensor) or eps.shape != x0.shape:
                got = tuple(eps.shape) if isinstance(eps, torch.Tensor) else type(eps).__name__
                raise ValueError(f"diffusion_objective noise_fn must return eps shaped like "
                                 f"x_0 {tuple(x0.shape)}; got {got}")
        return t.to(x0.device, torch.long), eps.to(x0.device, x0.dtype)

    def __call__(self, ctx: ObjectiveContext) -> ObjectiveResult:
        x0 = clean_input(ctx.model, ctx.batch, "diffusion_objective")
        t, eps = self._draw(x0)
        on = self.schedule.to(x0.device)
        pred = ctx.full_precision(ctx.model.forward_raw((add_noise(on, x0, t, eps), t),
                                                        net=ctx.train_net))
        if pred.shape != eps.shape:
            raise ValueError(f"diffusion_objective: the net predicted {tuple(pred.shape)} for "
                             f"noise of shape {tuple(eps.shape)}")
        squared = (pred - eps.float()).pow(2).sum()
        count = float(eps.numel())
        mse = float(squared.detach()) / count if count else float("nan")
        return ObjectiveResult((LossTerm("noise_mse", squared, count),),
                               metrics={"noise_mse": mse})

    # -- component state (§14.1) -------------------------------------------------------
    def component_spec(self) -> ComponentSpec:
        return ComponentSpec(COMPONENT, version=_VERSION)

    def component_state(self) -> dict[str, Any]:
        described = self.schedule.describe()
        return {**described, **self.stream.state()}

    def check_component_state(self, state: Any, *, version: int) -> list[str]:
        if not isinstance(state, dict):
            return [f"{COMPONENT}: the saved state is not a mapping"]
        mine = self.schedule
        problems = []
        if state.get("T") != mine.T:
            problems.append(f"{COMPONENT}: the checkpoint was trained with T={state.get('T')}, "
                            f"this run's schedule has T={mine.T}")
        elif state.get("fingerprint") != mine.fingerprint:
            problems.append(f"{COMPONENT}: the checkpoint's schedule {state.get('kind')} "
                            f"{state.get('args')} ({state.get('fingerprint')}) differs from this "
                            f"run's {mine!r} ({mine.fingerprint}): resume with the same schedule")
        return problems + self.stream.problems(COMPONENT, state)

    def load_component_state(self, state: Any, *, version: int) -> None:
        self.stream.load(state)

    def __repr__(self) -> str:
        return f"diffusion_objective({self.schedule!r}, seed={self.seed})"


def diffusion_objective(schedule: NoiseSchedule, *, seed: int | None = None,
                        noise_fn: NoiseFn | None = None) -> DiffusionObjective:
    """DDPM noise prediction (§9) as an objective (§6.5) with its own generator."""
    return DiffusionObjective(schedule, seed=seed, noise_fn=noise_fn)
