"""A tiny patch encoder + predictor, masks and snapshots shared by the I-JEPA tests."""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from torch import nn

from nnx import Devices, Losses, NNModel, NNModelParams, NNOptimParams, NNTrainParams

N, P, D = 6, 3, 4  # patches per sample, features per patch, latent width


class Predictor(nn.Module):
    """Target positions' embeddings plus the pooled context, through one Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = nn.Parameter(torch.randn(N, D) * 0.1)
        self.out = nn.Linear(D, D)

    def forward(self, context, ctx_idx, tgt_idx):
        return self.out(self.pos[tgt_idx] + context.mean(1, keepdim=True))


class PatchNet(nn.Module):
    """model.net(patches, idx) -> latents of the kept patches; .predictor inside."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(P, D)
        self.pos = nn.Parameter(torch.randn(N, D) * 0.1)
        self.predictor = Predictor()

    def forward(self, x, idx):
        h = torch.tanh(self.proj(x) + self.pos)
        return torch.gather(h, 1, idx.unsqueeze(-1).expand(-1, -1, D))


def tiny_model(seed: int = 0, **model_params: object) -> NNModel:
    torch.manual_seed(seed)
    params = NNModelParams(device=Devices.CPU, loss=Losses.MEAN_SQUARED_ERROR,
                           **model_params)  # type: ignore[arg-type]
    return NNModel(module=PatchNet(), params=params)


def target_of(model: NNModel) -> nn.Module:
    return copy.deepcopy(model.net)


def random_masks(b: int, n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    perm = torch.stack([torch.randperm(n, generator=g) for _ in range(b)])
    return perm[:, :3], perm[:, 3:5]


class TableMasks:
    """Fixed per-row masks in loader order: the same rows get the same masks however the
    batch is split into microbatches."""

    def __init__(self, rows: int, seed: int = 3) -> None:
        self.ctx, self.tgt = random_masks(rows, N, torch.Generator().manual_seed(seed))
        self.cursor = 0

    def __call__(self, b, n, g):
        lo, hi = self.cursor, self.cursor + b
        self.cursor = hi % len(self.ctx)
        return self.ctx[lo:hi], self.tgt[lo:hi]


def patches(n_batches: int = 3, size: int = 4, seed: int = 1) -> list[tuple[torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(size, N, P, generator=g),) for _ in range(n_batches)]


def sgd(lr: float = 0.1, accumulate: int = 1) -> NNOptimParams:
    return NNOptimParams.builder().sgd(max_lr=lr).accumulate_grad(accumulate).build()


def plan(loader: list, n_epochs: int = 1, **kwargs: object) -> NNTrainParams:
    return NNTrainParams(n_epochs=n_epochs, train_loader=loader,
                         optim=kwargs.pop("optim", sgd()), seed=0, **kwargs)  # type: ignore


def weights(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
