"""DDPM on a 2-D mixture of four Gaussians (spec §9): train, sample, count the modes.

The data are points around the four corners (±1, ±1), 0.1 apart from them on
average. ``DiffusionMLP`` learns to predict the noise that
``diffusion_train_step_factory`` adds at a random step of a 100-step linear
schedule; ``sample`` then runs the reverse process from pure noise. A model that
learned the distribution puts about a quarter of its samples near each corner,
which the script checks (each corner between 15% and 35%). The same loss as an
objective (``diffusion_objective``) hands accumulation, clipping and mixed
precision to the shared update engine; see docs/diffusion.md.

    uv run python examples/08_diffusion_2d_mixture.py
"""

from __future__ import annotations

import tempfile

import torch

from nnx import (
    Devices,
    DiffusionMLP,
    Losses,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNTrainParams,
    NoiseSchedulers,
    diffusion_train_step_factory,
    sample,
)

CORNERS = torch.tensor([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])


def mixture(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    which = torch.randint(0, len(CORNERS), (n,), generator=g)
    return CORNERS[which] + 0.1 * torch.randn(n, 2, generator=g)


def mode_shares(points: torch.Tensor) -> list[float]:
    """The share of ``points`` nearest each corner."""
    nearest = torch.cdist(points, CORNERS).argmin(dim=1)
    return [float((nearest == k).float().mean()) for k in range(len(CORNERS))]


def train_and_sample(*, seed: int = 0, n_epochs: int = 100, T: int = 100,
                     n_samples: int = 1000, root: str | None = None) -> torch.Tensor:
    """Train a DiffusionMLP on the mixture and return ``n_samples`` generated points."""
    torch.manual_seed(seed)
    model = NNModel(
        module=DiffusionMLP(input_dim=2, hidden_dims=[64, 64], time_embed_dim=16),
        params=NNModelParams(device=Devices.CPU, loss=Losses.MEAN_SQUARED_ERROR),  # unused
    )
    data = mixture(2048, seed)
    loader = [(data[i:i + 128],) for i in range(0, len(data), 128)]
    schedule = NoiseSchedulers.LINEAR(T=T, beta_min=1e-4, beta_max=0.2)
    # A constant learning rate: the noise-prediction loss is noisy from batch to batch
    # (random t and ε), so the default ReduceLROnPlateau would decay it too early.
    params = NNTrainParams(n_epochs=n_epochs, train_loader=loader, seed=seed, scheduler=None,
                           optim=NNOptimParams.builder().adam(max_lr=3e-3).build())
    with tempfile.TemporaryDirectory() as tmp:
        model.train(params, train_step_fn=diffusion_train_step_factory(schedule),
                    root=root or tmp, verbose=False)
    return sample(model, schedule, (n_samples, 2),
                  generator=torch.Generator().manual_seed(seed))


def main() -> None:
    torch.set_num_threads(1)
    samples = train_and_sample()
    shares = mode_shares(samples)
    spread = float(torch.cdist(samples, CORNERS).min(dim=1).values.median())
    print("corner      share")
    for corner, share in zip(CORNERS.tolist(), shares, strict=True):
        print(f"{corner!s:<10}  {share:6.1%}")
    print(f"median distance to the nearest corner: {spread:.3f} (data: about 0.12)")
    assert all(0.15 <= s <= 0.35 for s in shares), shares
    assert spread < 0.3, spread


if __name__ == "__main__":
    main()
