"""What one epoch commit costs: a LAST resume point against a plain ``torch.save``.

A resume point is the training-state sidecar (plus its compatibility copy),
the checkpoint and the manifest, each flushed to stable storage, with the
directory flushed after the renames. The baseline is what a hand-written loop
typically does: one ``torch.save`` of the same weights and optimizer state,
no flush. Both run interleaved in one process; the report is the median of
each and their ratio.

    uv run python tools/bench/commit_cost.py
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from nnx._foundation.seeding import capture_rng_state
from nnx._persistence.checkpoint import NNCheckpoint


def state_for(width: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    net = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                        nn.Linear(width, 10))
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    net(torch.randn(4, 64)).sum().backward()
    opt.step()  # populate Adam's moments
    return net, opt


def one_commit(directory: Path, net: nn.Module, opt: torch.optim.Optimizer, epoch: int) -> None:
    checkpoint = NNCheckpoint(tag="last", epoch=epoch, run_id="bench", state_dict=net.state_dict(),
                              model={}, train={})
    checkpoint.save(directory / "last.pt", training_state={
        "epoch": epoch, "optimizer": opt.state_dict(), "rng": capture_rng_state()},
        position={"completed_epoch": epoch})


def plain_save(directory: Path, net: nn.Module, opt: torch.optim.Optimizer, epoch: int) -> None:
    torch.save({"epoch": epoch, "model": net.state_dict(), "optimizer": opt.state_dict()},
               directory / "plain.pt")


def measure(width: int, repeats: int = 15) -> dict[str, float]:
    net, opt = state_for(width)
    params = sum(p.numel() for p in net.parameters())
    nnx_times, plain_times = [], []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for epoch in range(repeats):
            start = time.perf_counter()
            one_commit(directory, net, opt, epoch)
            nnx_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            plain_save(directory, net, opt, epoch)
            plain_times.append(time.perf_counter() - start)
    nnx_ms = statistics.median(nnx_times) * 1e3
    plain_ms = statistics.median(plain_times) * 1e3
    return {"params": params, "nnx_ms": nnx_ms, "plain_ms": plain_ms, "ratio": nnx_ms / plain_ms}


def main() -> None:
    torch.set_num_threads(1)
    print(f"{'params':>10}  {'resume point':>12}  {'torch.save':>10}  {'ratio':>6}")
    for width in (128, 512, 2048):
        row = measure(width)
        print(f"{row['params']:>10,}  {row['nnx_ms']:>10.2f}ms  {row['plain_ms']:>8.2f}ms  "
              f"{row['ratio']:>6.2f}")


if __name__ == "__main__":
    main()
