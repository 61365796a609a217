"""One short fit in a fresh process: whole_fit.py's "20 epochs × 9 steps" case.

A regression MLP (64 → 128 → 128 → 1, MSE, Adam 1e-3) on 9 batches of 256 rows, a
512-row validation pass, 20 epochs; the validation loss improves every epoch, so every
epoch saves LAST and BEST. Contenders:

- ``plain``: the hand-written loop (torch only), LAST each epoch and BEST when the
  validation loss improves, each with durable_save.careful_save;
- ``nnx``: ``NNModel.train`` (the background commit, the default);
- ``nnx-sync``: the same with ``async_commit=False``;
- ``original``: ``NNModel.train`` with only the spec's arguments, for a Python whose
  environment has another NNx installed (the original NNx 0.4.1).

    python tools/bench/short_fit_job.py CONTENDER ROOT

prints one JSON line: ``fit_s`` (from building the model to ``train()``'s return).
whole_fit.py times the whole process around it. ``NNX_BENCH_FLUSH_MS`` set: every
``os.fsync`` / ``os.fdatasync`` first sleeps that many milliseconds (releasing the
interpreter's lock, as a real flush does): a disk whose flushes are slow, simulated.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import torch

EPOCHS, STEPS, BATCH, VAL_ROWS, FEATURES = 20, 9, 256, 512, 64


def data() -> tuple[Any, Any]:
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(0)
    rows = STEPS * BATCH
    x = torch.randn(rows + VAL_ROWS, FEATURES, generator=g)
    y = x @ torch.randn(FEATURES, 1, generator=g) + 0.1 * torch.randn(len(x), 1, generator=g)
    train = DataLoader(TensorDataset(x[:rows], y[:rows]), batch_size=BATCH, shuffle=True,
                       generator=torch.Generator().manual_seed(0))
    return train, DataLoader(TensorDataset(x[rows:], y[rows:]), batch_size=VAL_ROWS)


def plain_fit(root: Path) -> float:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from torch import nn

    from tools.bench.durable_save import careful_save

    train, val = data()
    start = time.perf_counter()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                        nn.Linear(128, 1))
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    directory = root / "plain"
    directory.mkdir(parents=True)
    best, history = math.inf, []
    for epoch in range(EPOCHS):
        net.train()
        for x, y in train:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(net(x), y)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
        net.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for x, y in val:
                total += float(nn.functional.mse_loss(net(x), y, reduction="sum"))
                count += len(y)
        state = {"epoch": epoch, "model": net.state_dict(), "optimizer": optimizer.state_dict()}
        careful_save(state, directory / "last.pt")
        if total / count < best:
            best = total / count
            careful_save(state, directory / "best.pt")
    return time.perf_counter() - start


def nnx_fit(root: Path, **runtime: Any) -> float:
    from nnx import (
        Devices,
        Losses,
        NNModel,
        NNModelParams,
        NNOptimParams,
        NNParams,
        NNTrainParams,
    )

    train, val = data()
    start = time.perf_counter()
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=FEATURES, output_dim=1, hidden_dims=(128, 128)),
                    params=NNModelParams(device=Devices.CPU, loss=Losses.MEAN_SQUARED_ERROR))
    params = NNTrainParams(n_epochs=EPOCHS, train_loader=train, val_loader=val, seed=0,
                           scheduler=None, save_phase_checkpoints=False,
                           optim=NNOptimParams.builder().adam(max_lr=1e-3).build(), **runtime)
    model.train(params, root=str(root / "runs"), verbose=False)
    return time.perf_counter() - start


def slow_flushes(milliseconds: float) -> None:
    """Every flush waits ``milliseconds`` first (a slow disk, simulated)."""
    import os

    def slowed(flush: Any) -> Any:
        def call(fd: int) -> None:
            time.sleep(milliseconds / 1e3)
            flush(fd)

        return call

    for name in ("fsync", "fdatasync"):
        if hasattr(os, name):
            setattr(os, name, slowed(getattr(os, name)))


def main() -> None:
    import os

    contender, root = sys.argv[1], Path(sys.argv[2])
    torch.set_num_threads(1)
    if os.environ.get("NNX_BENCH_FLUSH_MS"):
        slow_flushes(float(os.environ["NNX_BENCH_FLUSH_MS"]))
    if contender == "plain":
        seconds = plain_fit(root)
    elif contender == "nnx-sync":
        seconds = nnx_fit(root, async_commit=False)
    elif contender in ("nnx", "original"):
        seconds = nnx_fit(root)
    else:
        raise SystemExit(f"unknown contender {contender!r}")
    print(json.dumps({"fit_s": seconds}))


if __name__ == "__main__":
    main()
