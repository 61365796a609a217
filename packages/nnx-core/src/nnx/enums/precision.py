"""Precision policies for NNModelParams.precision (FP32 / FP16 / BF16)."""

from __future__ import annotations

import enum

import torch


class Precision(enum.Enum):
    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"

    def __call__(self) -> torch.dtype:
        return {Precision.FP32: torch.float32, Precision.FP16: torch.float16,
                Precision.BF16: torch.bfloat16}[self]

    @property
    def is_reduced(self) -> bool:
        return self is not Precision.FP32
