"""One rank of the DDP tests (launched by torchrun, or by hand for the killed-rank test).

Usage: python _ddp_worker.py OUT MODE [BATCH]

Trains a FeedFwd classifier under ``distributed=DDP(backend="gloo")`` (or, for
MODE ``single``, in one process) into OUT/runs, then writes this rank's final
weights and last epoch to OUT/rank<r>.pt. Modes: ``default`` (the default step),
``objective`` (supervised_objective), ``single`` / ``single-objective`` (one process,
no DDP), ``stop`` (rank 1 asks
to stop after epoch 1), ``kill`` (rank 1 dies at the start of epoch 1).
"""

from __future__ import annotations

import os
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx import (
    Callback,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    supervised_objective,
)
from nnx.distributed import DDP


def data() -> tuple[TensorDataset, TensorDataset]:
    g = torch.Generator().manual_seed(11)
    x = torch.randn(96, 6, generator=g)
    y = (x[:, 0] + x[:, 1] - 0.5 * x[:, 2] > 0).long() + (x[:, 3] > 1).long()
    return TensorDataset(x[:64], y[:64]), TensorDataset(x[64:], y[64:])


class Stop(Callback):
    def __init__(self, rank: int) -> None:
        self.rank = rank

    def on_epoch_end(self, ctx):
        if self.rank == 1 and ctx.epoch == 1:
            ctx.should_stop = True


class Die(Callback):
    def __init__(self, rank: int) -> None:
        self.rank = rank

    def on_epoch_begin(self, ctx):
        if self.rank == 1 and ctx.epoch == 1:
            os._exit(3)


def main() -> None:
    torch.set_num_threads(1)
    out, mode = sys.argv[1], sys.argv[2]
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    rank = int(os.environ.get("RANK", "0"))
    train, val = data()
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=6, output_dim=3, hidden_dims=(16,)),
                    params=NNModelParams())
    params = NNTrainParams(
        n_epochs=3, seed=0,
        train_loader=DataLoader(train, batch_size=batch, shuffle=False),
        val_loader=DataLoader(val, batch_size=16),
        optim=NNOptimParams.builder().sgd(max_lr=0.2).build())
    callbacks = {"stop": [Stop(rank)], "kill": [Die(rank)]}.get(mode, [])
    # A dead peer surfaces after timeout_s: short for the killed-rank test, roomy otherwise.
    timeout = 8 if mode == "kill" else 60
    distributed = None if mode.startswith("single") else DDP(backend="gloo", timeout_s=timeout)
    objective = supervised_objective() if mode.endswith("objective") else None
    run = model.train(params, objective=objective, callbacks=callbacks, verbose=False,
                      root=os.path.join(out, "runs"), distributed=distributed)
    torch.save({"weights": model.net.state_dict(), "run_id": run.id,
                "epochs": [r.epoch for r in run.epoch_records()] if rank == 0 else None,
                "last_epoch": run.idps[-1].epoch},
               os.path.join(out, f"rank{rank}.pt"))


if __name__ == "__main__":
    main()
