"""A variational autoencoder trained through a custom train_step_fn (spec §6, §6.1).

The default supervised step computes ``loss_fn(net(X), Y)``; an autoencoder
has no ``Y``, so the hook owns the whole step: zero_grad, forward, the
reconstruction + KL loss, backward, ``optimizer.step()`` and
``ctx.report_update()`` for the update it took. Everything else (epochs,
checkpoints, the history, BEST on the reported ``error``) is NNx's loop, as
for any run. The data are 8-dimensional points near a 2-D plane, so a 2-D
latent code can reconstruct them; the script prints the reconstruction and KL
terms it recorded in each record's ``extra`` and checks that the
reconstruction improved.

    uv run python examples/05_custom_train_step_autoencoder.py
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from nnx import (
    Devices,
    Losses,
    NNEvaluationDataPoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNTrainParams,
    TrainStepContext,
)

LATENT = 2


class VAE(nn.Module):
    def __init__(self, dim: int = 8, hidden: int = 32) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(),
                                     nn.Linear(hidden, 2 * LATENT))
        self.decoder = nn.Sequential(nn.Linear(LATENT, hidden), nn.ReLU(), nn.Linear(hidden, dim))

    def unpack_batch(self, batch: Sequence[torch.Tensor]
                     ) -> tuple[tuple[torch.Tensor, ...], torch.Tensor | None]:
        return (batch[0],), None  # (inputs, target): an autoencoder has no target

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mu, logvar = self.encoder(x).chunk(2, dim=-1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()  # the reparameterization trick
        return self.decoder(z), mu, logvar


def plane_points(n_batches: int = 8, size: int = 32) -> list[tuple[torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    basis = torch.randn(LATENT, 8, generator=g)
    codes = torch.randn(n_batches * size, LATENT, generator=g)
    x = codes @ basis + 0.05 * torch.randn(n_batches * size, 8, generator=g)
    return [(x[i:i + size],) for i in range(0, len(x), size)]


def vae_step(ctx: TrainStepContext) -> NNEvaluationDataPoint:
    ctx.model.net.zero_grad()  # the hook owns the full step (§6.1)
    X, _ = ctx.model.net.unpack_batch(ctx.batch)
    X = tuple(x.to(ctx.model.device) for x in X)
    recon, mu, logvar = ctx.model.net(*X)
    recon_loss = F.mse_loss(recon, X[0])
    kl = -0.5 * torch.mean(torch.sum(1 + logvar - mu**2 - logvar.exp(), dim=-1))
    loss = recon_loss + 0.1 * kl
    loss.backward()
    ctx.optimizer.step()
    ctx.report_update()  # this step took the update itself: tell the scheduler clocks
    loss_val = float(loss.detach())
    return NNEvaluationDataPoint(
        loss=loss_val,
        error=loss_val,  # the loss as "error" keeps BEST tracking meaningful
        extra={"recon": float(recon_loss.detach()), "kl": float(kl.detach())},
    )


def main() -> None:
    torch.manual_seed(0)
    # The loss enum is unused by this step; NNModelParams still records one.
    model = NNModel(module=VAE(), params=NNModelParams(device=Devices.CPU,
                                                       loss=Losses.MEAN_SQUARED_ERROR))
    params = NNTrainParams(n_epochs=8, train_loader=plane_points(),
                           optim=NNOptimParams.builder().adam(max_lr=1e-2).build(), seed=0)
    with tempfile.TemporaryDirectory() as root:
        run = model.train(params, train_step_fn=vae_step, verbose=False, root=root)
        recon: dict[int, list[float]] = {}
        for idp in run.idps:
            assert idp.train_edp is not None
            recon.setdefault(idp.epoch, []).append(idp.train_edp.extra["recon"])
        print("epoch  mean recon  last kl")
        for record in run.epoch_records():
            assert record.train_edp is not None
            mean = sum(recon[record.epoch]) / len(recon[record.epoch])
            print(f"{record.epoch:>5}  {mean:>10.4f}  {record.train_edp.extra['kl']:>7.3f}")
        best = run.best_checkpoint()
        print(f"BEST is epoch {best.epoch if best else '-'} (lowest reported error)")

    first, last = recon[0], recon[max(recon)]
    assert sum(last) / len(last) < 0.5 * sum(first) / len(first), (first, last)
    with torch.no_grad():
        x = plane_points(1)[0][0]
        mu, _ = model.net.encoder(x).chunk(2, dim=-1)
        error = float(F.mse_loss(model.net.decoder(mu), x))
    print(f"reconstruction MSE of a batch through the mean code: {error:.4f} "
          f"(the data's variance is {float(x.var()):.2f})")


if __name__ == "__main__":
    main()
