"""The LR sweep's curve arithmetic (spec §13.1), plain Python and NumPy.

* :func:`lr_schedule` — ``num_iter`` learning rates spaced evenly in log space from
  ``start_lr`` to ``end_lr`` (both included), Smith's exponential sweep;
* :class:`Smoother` — the bias-corrected exponential moving average of the raw losses
  and the divergence rule: the sweep stops once the smoothed loss rises more than
  ``(diverge_threshold - 1) * |lowest|`` above the lowest smoothed loss so far;
* :func:`steepest_descent` — the suggested LR: where the smoothed loss falls fastest
  per unit of ``log(lr)``, looked for only up to the lowest smoothed loss (past it the
  curve is rising, and a fast fall after a spike is no descent to train at) and past
  the sweep's first tenth (the EMA's warm-up).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["Smoother", "lr_schedule", "steepest_descent"]


def lr_schedule(start_lr: float, end_lr: float, num_iter: int) -> list[float]:
    """``num_iter`` (>= 2) rates, geometric from ``start_lr`` to ``end_lr``."""
    ratio = end_lr / start_lr
    return [start_lr * ratio ** (i / (num_iter - 1)) for i in range(num_iter)]


class Smoother:
    """The EMA of the losses seen so far (weight ``beta`` on the past, bias-corrected so
    the first values are not pulled towards 0) and the lowest smoothed value."""

    def __init__(self, beta: float, diverge_threshold: float) -> None:
        self.beta = beta
        self.diverge_threshold = diverge_threshold
        self._average = 0.0
        self._count = 0
        self.lowest = math.inf

    def add(self, loss: float) -> float:
        """The smoothed loss after ``loss``."""
        self._count += 1
        self._average = self.beta * self._average + (1.0 - self.beta) * loss
        smoothed = self._average / (1.0 - self.beta ** self._count)
        self.lowest = min(self.lowest, smoothed)
        return smoothed

    def diverged(self, smoothed: float) -> bool:
        """Whether ``smoothed`` is past the §13.1 bound over the lowest so far."""
        return smoothed - self.lowest > (self.diverge_threshold - 1.0) * abs(self.lowest)


def steepest_descent(lrs: Sequence[float], smoothed: Sequence[float]) -> float:
    """The LR at the most negative slope of ``smoothed`` over ``log(lr)`` among the points
    from the first tenth's end up to the lowest smoothed loss.

    The first tenth of the sweep is left out (the usual 10 of 100 batches): the EMA has
    seen few losses there, so one noisy batch reads as a steep slope. When fewer than two
    points remain (the loss never fell past the first tenth), the LR of the lowest point
    is named: there is no descent to measure, and it is the least bad rate seen.
    """
    values = np.asarray(smoothed, dtype=np.float64)
    lowest = int(np.argmin(values))
    first = min(len(values) // 10, lowest)
    if lowest - first < 1:
        return float(lrs[lowest])
    logs = np.log(np.asarray(lrs[first: lowest + 1], dtype=np.float64))
    slopes = np.gradient(values[first: lowest + 1], logs)
    return float(lrs[first + int(np.argmin(slopes))])
