"""nnx.lr_finder (nnx-viz, spec §13.1): pick a max_lr before a long run, offline, in seconds.

A small classifier on a synthetic task is swept from 1e-5 to 10 over 100 batches; the
sweep stops early once the smoothed loss diverges. The script prints the suggested
max_lr (the steepest descent of the smoothed loss), writes the sweep's figure as HTML
into a fresh temporary directory, checks that the sweep left the net, its modes, the
loader's generator and the RNG streams as they were, and then trains for real with
a one-cycle schedule whose peak is the suggestion.

    uv run python examples/lr_finder.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from nnx import lr_finder


def task(n: int) -> TensorDataset:
    """Three classes, each the argmax of a fixed linear map of 8 features."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    return TensorDataset(x, (x @ torch.randn(8, 3, generator=g)).argmax(1))


def main() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 3))
    net.eval()  # the caller's mode: the sweep trains in train mode and puts this back
    loader = DataLoader(task(2048), batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(1))
    weights = {k: v.clone() for k, v in net.state_dict().items()}
    shuffle, rng = loader.generator.get_state(), torch.get_rng_state()

    result = lr_finder(net, loader, loss_fn=F.cross_entropy, start_lr=1e-5, end_lr=10.0,
                       num_iter=100)
    print(f"swept {len(result.lrs)} rates from {result.lrs[0]:.1e} to {result.lrs[-1]:.1e}"
          f"{' (stopped early: the loss diverged)' if result.diverged else ''}")
    print(f"suggested max_lr: {result.suggested_lr:.2e}")
    out = Path(tempfile.mkdtemp()) / "lr_finder.html"
    result.figure.write_html(out, include_plotlyjs=True)  # self-contained: no network
    print(f"figure: {out}")

    assert all(torch.equal(v, net.state_dict()[k]) for k, v in weights.items())
    assert not net.training
    assert torch.equal(loader.generator.get_state(), shuffle)
    assert torch.equal(torch.get_rng_state(), rng)
    print("the sweep left the net, its modes, the loader and the RNG streams as they were")

    net.train()
    optimizer = torch.optim.SGD(net.parameters(), lr=result.suggested_lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=result.suggested_lr,
                                                   total_steps=3 * len(loader))
    for _ in range(3):
        for x, y in loader:
            optimizer.zero_grad()
            F.cross_entropy(net(x), y).backward()
            optimizer.step()
            schedule.step()
    net.eval()
    x, y = loader.dataset.tensors
    with torch.no_grad():
        accuracy = (net(x).argmax(1) == y).float().mean().item()
    print(f"3 one-cycle epochs at max_lr={result.suggested_lr:.2e}: train accuracy "
          f"{accuracy:.3f}")


if __name__ == "__main__":
    main()
