"""Learning-rate schedules NNx ships beyond torch's own."""

from __future__ import annotations

from typing import Any

import torch
from torch.optim.lr_scheduler import LRScheduler

__all__ = ["LinearWarmupDecayLR"]


class LinearWarmupDecayLR(LRScheduler):
    """Linear warm-up to the base LR, then linear decay to ``min_lr`` at ``total_steps``.

    Step ``s`` (0-based) trains at ``base * (s + 1) / warmup_steps`` while
    ``s < warmup_steps``; afterwards the rate falls linearly from the base LR at
    ``s = warmup_steps`` to ``min_lr`` at ``s = total_steps``. With a base LR of
    0.12, ``warmup_steps=3`` and ``total_steps=8`` the first four steps train at
    0.04, 0.08, 0.12, 0.12.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        *,
        warmup_steps: int,
        total_steps: int,
        min_lr: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if warmup_steps > total_steps:
            raise ValueError(
                f"warmup_steps ({warmup_steps}) must not exceed total_steps ({total_steps})"
            )
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.min_lr = min_lr
        super().__init__(optimizer, last_epoch)

    def _rate(self, base: float, step: int) -> float:
        if step < self.warmup_steps:
            return base * (step + 1) / self.warmup_steps
        span = self.total_steps - self.warmup_steps
        done = 1.0 if span <= 0 else min(1.0, (step - self.warmup_steps) / span)
        floor = min(self.min_lr, base)
        return floor + (base - floor) * (1.0 - done)

    def get_lr(self) -> list[float]:  # type: ignore[override]
        return [self._rate(float(base), self.last_epoch) for base in self.base_lrs]

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}
