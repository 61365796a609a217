"""Helpers shared by the tests split out of surface/test_trainer.py."""

from __future__ import annotations

import hashlib
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _nnx_core_tiny import Lion, tiny_batches
from torch import nn

from nnx import (
    Callback,
    Devices,
    Losses,
    NNEvaluationDataPoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNRun,
    NNSchedulerParams,
    NNTrainerParams,
    NNTrainerParamsBuilder,
    TrainerStepContext,
)


# -- a tiny GAN on a 1-D mixture of two Gaussians --------------------------------------------
def mixture(n_batches: int = 4, size: int = 16, *, seed: int = 0) -> list[tuple[torch.Tensor]]:
    """A fixed list of ``(real_samples,)`` batches from 0.5·N(-2, 0.3²) + 0.5·N(2, 0.3²)."""
    g = torch.Generator().manual_seed(seed)
    n = n_batches * size
    centers = torch.tensor([-2.0, 2.0])[torch.randint(0, 2, (n,), generator=g)]
    x = (centers + 0.3 * torch.randn(n, generator=g)).unsqueeze(1)
    return [(x[i:i + size],) for i in range(0, n, size)]


class GAN(nn.Module):
    """G: latent (2) → sample (1); D: sample → real/fake logit. ``forward`` is the critic."""

    latent = 2

    def __init__(self) -> None:
        super().__init__()
        self.G = nn.Sequential(nn.Linear(self.latent, 16), nn.Tanh(), nn.Linear(16, 1))
        self.D = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.D(x)


def gan_model(seed: int = 1) -> NNModel:
    torch.manual_seed(seed)  # resumed runs replace these weights; this only fixes the start
    return NNModel(module=GAN(), params=NNModelParams(device=Devices.CPU,
                                                      loss=Losses.BINARY_CROSS_ENTROPY))


def snapshot(module: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def unchanged(module: nn.Module, before: list[torch.Tensor]) -> bool:
    return all(torch.equal(p, b) for p, b in zip(module.parameters(), before, strict=True))


class GanStep:
    """The §8 recipe: a D step, then a G step, each by its own named optimizer.

    Both losses back-propagate into both halves (the fake batch is not
    detached), so each ``step()`` runs while the other half holds gradients:
    only strict ownership keeps it from moving them.
    """

    def __init__(self) -> None:
        self.checked = 0

    def __call__(self, ctx: TrainerStepContext) -> NNEvaluationDataPoint:
        net, loss_fn = ctx.model.net, ctx.model.loss_fn
        opt_g, opt_d = ctx.optimizers["G"], ctx.optimizers["D"]
        (real,) = ctx.batch
        ones, zeros = torch.ones(len(real), 1), torch.zeros(len(real), 1)
        z = torch.randn(len(real), GAN.latent)

        opt_d.zero_grad()
        d_loss = loss_fn(net.D(real), ones) + loss_fn(net.D(net.G(z)), zeros)
        d_loss.backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.G.parameters())
        g_before, d_before = snapshot(net.G), snapshot(net.D)
        opt_d.step()
        ctx.report_update("D")
        assert unchanged(net.G, g_before), "opt_D moved G"
        assert not unchanged(net.D, d_before), "opt_D did not move D"

        opt_g.zero_grad()
        g_loss = loss_fn(net.D(net.G(z)), ones)
        g_loss.backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.D.parameters())
        g_before, d_before = snapshot(net.G), snapshot(net.D)
        opt_g.step()
        ctx.report_update("G")
        assert unchanged(net.D, d_before), "opt_G moved D"
        assert not unchanged(net.G, g_before), "opt_G did not move G"
        self.checked += 1
        d, g = float(d_loss.detach()), float(g_loss.detach())
        return NNEvaluationDataPoint(loss=d + g, extra={"d_loss": d, "g_loss": g})


def adam(pattern: str, lr: float = 2e-3) -> NNOptimParams:
    return (NNOptimParams.builder().adam(max_lr=lr, betas=(0.5, 0.999), weight_decay=0.0)
            .param_groups([NNParamGroupSpec(name_pattern=pattern)]).build())


PLATEAU = NNSchedulerParams.builder().reduce_on_plateau(
    min_lr=1e-7, factor=0.5, patience=0, cooldown=0, threshold=1e-3).build()


def gan_builder(n_epochs: int) -> NNTrainerParamsBuilder:
    """The §8 recipe in the builder form (a fixed list of batches, seeded params)."""
    return (NNTrainerParams.builder()
            .n_epochs(n_epochs)
            .train_loader(mixture())
            .optimizer("G", adam("G.*"))
            .optimizer("D", adam("D.*"))
            .scheduler("G", PLATEAU)
            .scheduler("D", PLATEAU)
            .seed(0))


def weights(model: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.net.state_dict().items()}


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def records(run: NNRun) -> list[tuple[Any, ...]]:
    return [(i.epoch, i.iter_idx, i.batch_idx, i.update_count, i.lr, i.train_edp.loss,
             dict(i.train_edp.extra)) for i in run.idps]


def files(root: Path) -> dict[str, str]:
    """Every file under ``root`` (lock files aside) by its SHA-256."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and ".lock" not in p.name}


def rng() -> tuple[Any, ...]:
    state = np.random.get_state()
    return random.getstate(), torch.get_rng_state().tolist(), state[1].tolist(), state[2:]


def full(message: str) -> str:
    """A ``match=`` pattern for exactly ``message``."""
    return f"^{re.escape(message)}$"


class Probe(Callback):
    """Records what Trainer-mode callbacks see."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, Any, Any, Any]] = []
        self.optimizers: dict[str, torch.optim.Optimizer] = {}

    def _see(self, hook: str, ctx: Any) -> None:
        self.seen.append((hook, ctx.epoch, ctx.optimizer, ctx.optimizers, ctx.trainer))
        self.optimizers = dict(ctx.optimizers)

    def on_train_begin(self, ctx):
        self._see("train_begin", ctx)

    def on_epoch_end(self, ctx):
        self._see("epoch_end", ctx)

    def on_train_end(self, ctx):
        self._see("train_end", ctx)


# -- a registered optimizer factory ------------------------------------------------------------
FACTORY_CALLS: list[dict[str, Any]] = []


def lion_factory(param_groups, config):
    FACTORY_CALLS.append(dict(config))
    return Lion(param_groups, betas=tuple(config["betas"]))


def _plan(*optims: tuple[str, Any], **values: Any) -> NNTrainerParams:
    builder = NNTrainerParams.builder().n_epochs(1).train_loader(tiny_batches(2))
    for name, optim in optims:
        builder.optimizer(name, optim)
    for key, value in values.items():
        getattr(builder, key)(value)
    return builder.build()


def _group(pattern: str, lr: float = 0.1, **modifiers: Any) -> NNOptimParams:
    builder = NNOptimParams.builder().sgd(max_lr=lr).param_groups(
        [NNParamGroupSpec(name_pattern=pattern)])
    for key, value in modifiers.items():
        getattr(builder, key)(value)
    return builder.build()


TWO = (("a", _group("layers.0.*")), ("b", _group("layers.1.*")))


# == 6. scheduler timing ======================================================================
def _halving(clock: str) -> NNSchedulerParams:
    return NNSchedulerParams.builder().step(step_size=1, factor=0.5).clock(clock).build()


def _lr(optimizer: torch.optim.Optimizer) -> float:
    return float(optimizer.param_groups[0]["lr"])
