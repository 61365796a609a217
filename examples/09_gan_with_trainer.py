"""A tiny GAN on a 1-D mixture of two Gaussians, trained with nnx.Trainer (spec §8).

One ``nn.Module`` holds the generator ``G`` and the critic ``D``; two named
Adam optimizers each own only their half (strict param groups, §8.1), and the
``trainer_step_fn`` owns every update: a D step, then a G step. The run is
written to a temporary directory and printed.

    uv run python examples/09_gan_with_trainer.py
"""

from __future__ import annotations

import tempfile

import torch
from torch import nn

from nnx import (
    Devices,
    Losses,
    NNEvaluationDataPoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNSchedulerParams,
    NNTrainerParams,
    Trainer,
    TrainerStepContext,
)

LATENT = 2
MODES = (-2.0, 2.0)


class GAN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.G = nn.Sequential(nn.Linear(LATENT, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                               nn.Linear(32, 1))
        self.D = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.D(x)  # the critic's real/fake logit


def mixture(n_batches: int = 8, size: int = 64, seed: int = 0) -> list[tuple[torch.Tensor]]:
    """A fixed list of ``(real_samples,)`` batches from 0.5·N(-2, 0.25²) + 0.5·N(2, 0.25²)."""
    g = torch.Generator().manual_seed(seed)
    n = n_batches * size
    centers = torch.tensor(MODES)[torch.randint(0, 2, (n,), generator=g)]
    x = (centers + 0.25 * torch.randn(n, generator=g)).unsqueeze(1)
    return [(x[i:i + size],) for i in range(0, n, size)]


def gan_step(ctx: TrainerStepContext) -> NNEvaluationDataPoint:
    net, bce = ctx.model.net, ctx.model.loss_fn
    opt_g, opt_d = ctx.optimizers["G"], ctx.optimizers["D"]
    (real,) = ctx.batch
    ones, zeros = torch.ones(len(real), 1), torch.zeros(len(real), 1)
    z = torch.randn(len(real), LATENT)

    opt_d.zero_grad()  # D: real → 1, fake → 0
    d_loss = bce(net.D(real), ones) + bce(net.D(net.G(z).detach()), zeros)
    d_loss.backward()
    opt_d.step()
    ctx.report_update("D")

    opt_g.zero_grad()  # G: make D call its samples real
    g_loss = bce(net.D(net.G(z)), ones)
    g_loss.backward()
    opt_g.step()  # steps G only, although D holds gradients too
    ctx.report_update("G")

    d, g = float(d_loss.detach()), float(g_loss.detach())
    return NNEvaluationDataPoint(loss=d + g, extra={"d_loss": d, "g_loss": g})


def main() -> None:
    torch.manual_seed(0)
    model = NNModel(module=GAN(), params=NNModelParams(device=Devices.CPU,
                                                       loss=Losses.BINARY_CROSS_ENTROPY))

    def adam(pattern: str) -> NNOptimParams:
        return (NNOptimParams.builder().adam(max_lr=1e-2, betas=(0.5, 0.999), weight_decay=0.0)
                .param_groups([NNParamGroupSpec(name_pattern=pattern)]).build())

    plateau = NNSchedulerParams.builder().reduce_on_plateau(
        min_lr=1e-5, factor=0.5, patience=2, cooldown=1, threshold=1e-3).build()
    params = (NNTrainerParams.builder()
              .n_epochs(10)
              .train_loader(mixture())
              .optimizer("G", adam("G.*"))
              .optimizer("D", adam("D.*"))
              .scheduler("G", plateau)
              .scheduler("D", plateau)
              .seed(0)
              .build())

    with tempfile.TemporaryDirectory() as root:
        run = Trainer(model).train(params, trainer_step_fn=gan_step, verbose=False, root=root)
        print(run)

    with torch.no_grad():
        samples = model.net.G(torch.randn(4000, LATENT)).squeeze(1)
    near = ", ".join(f"{float(((samples - m).abs() < 0.75).float().mean()):.0%} near {m:+g}"
                     for m in MODES)
    print(f"\n4000 generated samples: {near} (the data's two modes)")


if __name__ == "__main__":
    main()
