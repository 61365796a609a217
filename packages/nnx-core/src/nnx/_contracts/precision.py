"""The run's resolved precision policy: autocast dtype and the FP16 loss scaler.

``NNModelParams.precision`` is the explicit policy (FP32 / FP16 / BF16) and
applies on any device torch can autocast on. The legacy ``mixed_precision``
flag means FP16 on CUDA and full precision elsewhere (CPU, MPS).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from nnx.enums.precision import Precision
from nnx.params.model import NNModelParams

__all__ = ["ResolvedPrecision", "resolve_precision"]


@dataclass(frozen=True)
class ResolvedPrecision:
    """The effective policy for one run on one device."""

    policy: Precision
    device_type: str

    @property
    def is_reduced(self) -> bool:
        return self.policy.is_reduced

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """The forward context: autocast to the policy's dtype, or nothing for FP32."""
        if not self.is_reduced:
            yield
            return
        with torch.autocast(device_type=self.device_type, dtype=self.policy()):
            yield

    def make_scaler(self) -> torch.amp.GradScaler | None:
        """A GradScaler for FP16 (whose gradients underflow without one), else None."""
        if self.policy is not Precision.FP16:
            return None
        return torch.amp.GradScaler(self.device_type)

    def state(self) -> dict[str, str]:
        return {"policy": self.policy.name, "device_type": self.device_type}


def resolve_precision(params: NNModelParams, device: torch.device) -> ResolvedPrecision:
    if params.precision is not None:
        return ResolvedPrecision(params.precision, device.type)
    if params.mixed_precision and device.type == "cuda":
        return ResolvedPrecision(Precision.FP16, device.type)
    return ResolvedPrecision(Precision.FP32, device.type)
