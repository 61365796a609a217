"""The benchmark workloads: seeded synthetic data and the NNx model each contender trains.

The plain loop and Lightning train ``make_model().net``: the same module class
with the same initial weights (the model is built under the same seed).
"""

from __future__ import annotations

import torch
from torch import Tensor

from nnx import Devices, Losses, Nets, NNModel, NNModelParams, NNParams
from nnx.params.conv import NNConvParams
from tools.bench.harness import Workload

ROWS, VAL_ROWS, FEATURES, CLASSES = 20_000, 5_000, 64, 10


def _tabular(seed: int = 0) -> tuple[Tensor, Tensor]:
    """Rows labelled by a noisy random linear teacher (learnable, not separable)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(ROWS + VAL_ROWS, FEATURES, generator=g)
    teacher = torch.randn(FEATURES, CLASSES, generator=g)
    noise = 2.0 * torch.randn(ROWS + VAL_ROWS, CLASSES, generator=g)
    return x, (x @ teacher + noise).argmax(1)


def _images(seed: int = 0) -> tuple[Tensor, Tensor]:
    """8×8 single-channel images: one random template per class plus noise."""
    g = torch.Generator().manual_seed(seed)
    templates = torch.randn(CLASSES, 1, 8, 8, generator=g)
    y = torch.randint(0, CLASSES, (ROWS,), generator=g)
    return templates[y] + 1.5 * torch.randn(ROWS, 1, 8, 8, generator=g), y


def _mlp() -> NNModel:
    torch.manual_seed(0)
    return NNModel(net_params=NNParams(input_dim=FEATURES, output_dim=CLASSES,
                                       hidden_dims=(128, 128)),
                   params=NNModelParams(device=Devices.CPU, loss=Losses.CROSS_ENTROPY))


def _conv() -> NNModel:
    torch.manual_seed(0)
    return NNModel(net_params=NNConvParams(input_dim=64, output_dim=CLASSES,
                                           conv_channels=(16, 32), hidden_dims=(64,)),
                   params=NNModelParams(net=Nets.CONV, device=Devices.CPU,
                                        loss=Losses.CROSS_ENTROPY))


def mlp() -> Workload:
    x, y = _tabular()
    return Workload(key="mlp", title="FeedFwd MLP",
                    description="FeedFwd 64 → 128 → 128 → 10 on 20,000 × 64 rows, batch 256, "
                                "5 epochs, Adam, no validation",
                    x_train=x[:ROWS], y_train=y[:ROWS], make_model=_mlp)


def mlp_val() -> Workload:
    x, y = _tabular()
    return Workload(key="mlp_val", title="FeedFwd MLP with validation",
                    description="The MLP workload plus a 5,000-row validation pass and the "
                                "best checkpoint each epoch",
                    x_train=x[:ROWS], y_train=y[:ROWS], x_val=x[ROWS:], y_val=y[ROWS:],
                    make_model=_mlp)


def conv() -> Workload:
    x, y = _images()
    return Workload(key="conv", title="ConvNN on 8×8 images",
                    description="Conv 16 → conv 32 (3×3, max-pool 2) → 64 → 10 on 20,000 "
                                "8×8 images, batch 256, 5 epochs, Adam, no validation",
                    x_train=x, y_train=y, make_model=_conv)
