"""Devices: ``Devices.CPU()`` → ``torch.device("cpu")``; ``AUTO`` picks the best present."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# torch is imported on first use, not at import: ``nnx runs show`` renders a run's typed
# configuration (these members) and must run without torch (docs/architecture.md).


class Devices(enum.Enum):
    AUTO = "auto"
    CPU = "cpu"
    CUDA = "cuda"
    MPS = "mps"

    def __call__(self) -> torch.device:
        import torch

        if self is Devices.AUTO:
            if torch.cuda.is_available():
                return torch.device("cuda")
            mps = getattr(torch.backends, "mps", None)
            if mps is not None and mps.is_available():
                return torch.device("mps")
            return torch.device("cpu")
        if self is Devices.CUDA and not torch.cuda.is_available():
            raise RuntimeError("Devices.CUDA was requested but torch sees no CUDA device")
        return torch.device(self.value)
