"""Precision policies: explicit FP32 / FP16 / BF16, and the legacy flag (spec §2, §6.1)."""

from __future__ import annotations

import torch

from nnx import NNModelParams, Precision
from nnx._contracts.precision import resolve_precision

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def test_resolution_rules():
    assert resolve_precision(NNModelParams(), CPU).policy is Precision.FP32
    # The legacy flag means FP16 on CUDA and full precision elsewhere.
    assert resolve_precision(NNModelParams(mixed_precision=True), CPU).policy is Precision.FP32
    assert resolve_precision(NNModelParams(mixed_precision=True), CUDA).policy is Precision.FP16
    explicit = resolve_precision(NNModelParams(precision=Precision.BF16), CPU)
    assert explicit.policy is Precision.BF16 and explicit.is_reduced


def test_autocast_and_scaler_follow_the_policy():
    layer = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    bf16 = resolve_precision(NNModelParams(precision=Precision.BF16), CPU)
    with bf16.autocast():
        assert layer(x).dtype is torch.bfloat16
    fp32 = resolve_precision(NNModelParams(), CPU)
    with fp32.autocast():
        assert layer(x).dtype is torch.float32
    assert bf16.make_scaler() is None and fp32.make_scaler() is None
    fp16 = resolve_precision(NNModelParams(precision=Precision.FP16), CPU)
    assert isinstance(fp16.make_scaler(), torch.amp.GradScaler)
    assert fp16.state() == {"policy": "FP16", "device_type": "cpu"}
