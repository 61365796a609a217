"""ObjectiveStream: an objective's own random stream, checkpointed as its component state.

An objective that draws (diffusion timesteps and noise, I-JEPA masks) draws
from its own CPU generator rather than the global RNG, so a preview or a
callback that uses the global RNG never shifts it (spec §9, §6.5). The
generator is seeded from ``seed``, or, when none is given, from one draw of the
global RNG at first use: a seeded run then seeds the stream, and constructing
the objective draws nothing. Its state rides in the objective's component state
(§14.1), so a stateful resume continues the stream exactly.
"""

from __future__ import annotations

from typing import Any

import torch

from nnx._foundation.validation import check_seed

__all__ = ["ObjectiveStream"]


class ObjectiveStream:
    """A lazily seeded CPU ``torch.Generator`` with a checkpointable state."""

    def __init__(self, what: str, seed: int | None = None) -> None:
        self.seed = None if seed is None else check_seed(f"{what} seed", seed)
        self._generator: torch.Generator | None = None

    @property
    def generator(self) -> torch.Generator:
        """The generator, created (and seeded) on first use."""
        if self._generator is None:
            seed = self.seed
            if seed is None:  # one draw of the global RNG: a seeded run seeds the stream
                seed = int(torch.randint(0, 2**62, (1,)).item())
            self._generator = torch.Generator().manual_seed(seed)
        return self._generator

    def state(self) -> dict[str, Any]:
        """``{"seed": ..., "generator": <state tensor> | None}`` (None: never drawn)."""
        return {"seed": self.seed,
                "generator": None if self._generator is None else self._generator.get_state()}

    def problems(self, component: str, state: Any) -> list[str]:
        """What makes ``state`` (a saved :meth:`state`) unloadable, for a component check."""
        generator = state.get("generator") if isinstance(state, dict) else None
        if generator is not None and not isinstance(generator, torch.Tensor):
            return [f"{component}: the saved generator state is not a tensor"]
        return []

    def load(self, state: Any) -> None:
        """Continue the saved stream (a never-drawn one starts afresh at first use)."""
        saved = state.get("generator")
        if saved is None:
            self._generator = None
            return
        restored = torch.Generator()
        restored.set_state(saved)
        self._generator = restored
