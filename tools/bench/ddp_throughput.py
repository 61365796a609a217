"""Throughput of DDP on this machine: 2 gloo ranks against 1 process, same global batch.

    uv run python tools/bench/ddp_throughput.py

Trains the FeedFwd MLP on 20k×64 rows for 3 epochs (one thread per process):
once in one process with batch 256, and under torchrun with 2 ranks of batch
128 each (the same 256-row global batch, so the same updates). Prints samples
per second of the training epochs (the first epoch, which pays imports and
warm-up, is left out) and the ratio.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROWS, FEATURES, CLASSES, EPOCHS, GLOBAL_BATCH = 20_000, 64, 4, 3, 256


def worker(out: str, world: int) -> None:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from nnx import Callback, NNModel, NNModelParams, NNOptimParams, NNParams, NNTrainParams
    from nnx.distributed import DDP

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(ROWS, FEATURES, generator=g)
    y = torch.randint(0, CLASSES, (ROWS,), generator=g)
    stamps: list[float] = []

    class Clock(Callback):
        def on_epoch_begin(self, ctx: object) -> None:
            stamps.append(time.perf_counter())

        def on_train_end(self, ctx: object) -> None:
            stamps.append(time.perf_counter())

    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=FEATURES, output_dim=CLASSES,
                                        hidden_dims=(256, 256)), params=NNModelParams())
    params = NNTrainParams(n_epochs=EPOCHS, seed=0, save_phase_checkpoints=False,
                           train_loader=DataLoader(TensorDataset(x, y),
                                                   batch_size=GLOBAL_BATCH // world),
                           optim=NNOptimParams.builder().adam(max_lr=1e-3).build())
    model.train(params, callbacks=[Clock()], verbose=False, root=os.path.join(out, "runs"),
                distributed=DDP(backend="gloo") if world > 1 else None)
    rank = int(os.environ.get("RANK", "0"))
    if rank == 0:
        seconds = stamps[-1] - stamps[1]  # epochs 1..n-1: past imports and warm-up
        Path(out, "result.json").write_text(json.dumps(
            {"samples_per_s": ROWS * (EPOCHS - 1) / seconds}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(world: int) -> float:
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        script = [__file__, "--worker", out, str(world)]
        if world == 1:
            cmd = [sys.executable, *script]
        else:
            cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={world}",
                   "--master_addr=127.0.0.1", f"--master_port={_free_port()}", *script]
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        result: float = json.loads(Path(out, "result.json").read_text())["samples_per_s"]
        return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]))
        return
    one, two = [], []
    for _ in range(3):  # interleaved, so both see the same machine load
        one.append(measure(1))
        two.append(measure(2))
    one.sort()
    two.sort()
    print(f"1 process : {one[1]:8.0f} samples/s (median of 3)")
    print(f"2 ranks   : {two[1]:8.0f} samples/s (median of 3)")
    print(f"ratio     : {two[1] / one[1]:.2f}x")


if __name__ == "__main__":
    main()
