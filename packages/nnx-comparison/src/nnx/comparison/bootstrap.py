"""Bootstrap(seed): a percentile interval of the mean delta over replicate pairs.

The unit resampled is the replicate pair, so the interval describes seed variability over
these replicates; it is not a significance claim. Its own NumPy Generator draws the
resamples: one seed gives one interval, and no global RNG is read or advanced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnx.extend import OPEN_UNIT, check_count, check_real, check_seed

__all__ = ["METHOD", "Bootstrap", "Interval"]

METHOD = "percentile"


@dataclass(frozen=True, slots=True)
class Interval:
    """The interval and how it was drawn."""

    low: float
    high: float
    level: float
    seed: int
    resamples: int
    method: str = METHOD

    def state(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "level": self.level, "seed": self.seed,
                "resamples": self.resamples, "method": self.method}


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """Resample the replicate pairs ``resamples`` times with ``seed``; a two-sided
    ``level`` percentile interval of their mean delta."""

    seed: int
    resamples: int = 2000
    level: float = 0.95

    def __post_init__(self) -> None:
        object.__setattr__(self, "seed", check_seed("Bootstrap.seed", self.seed))
        object.__setattr__(self, "resamples",
                           check_count("Bootstrap.resamples", self.resamples))
        object.__setattr__(self, "level", check_real("Bootstrap.level", self.level, OPEN_UNIT))

    def interval(self, deltas: Sequence[float]) -> Interval | None:
        """The interval over ``deltas`` (one per replicate pair); None for fewer than 2."""
        values = np.asarray(deltas, dtype=np.float64)
        if values.size < 2:
            return None
        rng = np.random.default_rng(self.seed)
        picks = rng.integers(0, values.size, size=(self.resamples, values.size))
        means = values[picks].mean(axis=1)
        tail = (1.0 - self.level) / 2.0
        low, high = np.quantile(means, [tail, 1.0 - tail])
        return Interval(float(low), float(high), self.level, self.seed, self.resamples)

    def state(self) -> dict[str, Any]:
        return {"seed": self.seed, "resamples": self.resamples, "level": self.level,
                "method": METHOD}

    @classmethod
    def from_state(cls, state: Any) -> Bootstrap:
        if not isinstance(state, Mapping) or set(state) != {"seed", "resamples", "level",
                                                            "method"}:
            raise ValueError(f"a bootstrap record has seed, resamples, level and method; "
                             f"got {state!r}")
        if state["method"] != METHOD:
            raise ValueError(f"bootstrap method must be {METHOD!r}; got {state['method']!r}")
        return cls(state["seed"], state["resamples"], state["level"])
