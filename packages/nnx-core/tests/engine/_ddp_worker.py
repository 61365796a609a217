"""One rank of the DDP tests (launched by torchrun, or by hand for the killed-rank test).

Usage: python _ddp_worker.py OUT MODE [BATCH]

Trains a FeedFwd classifier under ``distributed=DDP(backend="gloo")`` (or, for
MODE ``single``, in one process) into OUT/runs, then writes this rank's final
weights and last epoch to OUT/rank<r>.pt. Modes: ``default`` (the default step),
``objective`` (supervised_objective), ``single`` / ``single-objective`` (one process,
no DDP), ``masked`` / ``single-masked`` (targets ignored unevenly), ``stop`` (rank 1 asks
to stop after epoch 1), ``kill`` (rank 1 dies at the start of epoch 1), and
``split SINGLE_RUN_ID`` (resumes across world sizes: see :func:`split`).
"""

from __future__ import annotations

import gc
import os
import sys

import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

from nnx import (
    Callback,
    MetricSpec,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    TaskSpec,
    supervised_objective,
)
from nnx.distributed import DDP


def data(masked: bool = False) -> tuple[TensorDataset, TensorDataset]:
    g = torch.Generator().manual_seed(11)
    x = torch.randn(96, 6, generator=g)
    y = (x[:, 0] + x[:, 1] - 0.5 * x[:, 2] > 0).long() + (x[:, 3] > 1).long()
    if masked:  # ignored targets, unevenly spread over batches and ranks
        y = torch.where(x[:, 4] > 0.3, torch.full_like(y, -100), y)
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


def fresh_model(task: TaskSpec | None = None) -> NNModel:
    torch.manual_seed(0)
    return NNModel(net_params=NNParams(input_dim=6, output_dim=3, hidden_dims=(16,)),
                   params=NNModelParams(task=task))


def shuffled_params(n_epochs: int, **changes) -> NNTrainParams:
    train, val = data()
    loader = DataLoader(train, batch_size=8, shuffle=True,
                        generator=torch.Generator().manual_seed(4))
    return NNTrainParams(n_epochs=n_epochs, seed=0, train_loader=loader,
                         val_loader=DataLoader(val, batch_size=16),
                         optim=NNOptimParams.builder().sgd(max_lr=0.2).build(), **changes)


def split(out: str, single_run: str) -> None:
    """In one process group (created here, so NNx joins it): 3 epochs straight; 2 epochs
    then a stateful resume of 1; and a resume of a single-process run."""
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    ddp = DDP(timeout_s=60)
    whole = fresh_model()
    whole.train(shuffled_params(3), verbose=False, root=os.path.join(out, "whole"),
                distributed=ddp)
    first = fresh_model().train(shuffled_params(2), verbose=False,
                                root=os.path.join(out, "split"), distributed=ddp)
    resumed = fresh_model()
    second = resumed.train(shuffled_params(1, resume_from_run_id=first.id), verbose=False,
                           root=os.path.join(out, "split"), distributed=ddp)
    from_single = fresh_model()
    from_single.train(shuffled_params(1, resume_from_run_id=single_run), verbose=False,
                      root=os.path.join(out, "single"), distributed=ddp)
    assert dist.is_initialized()  # NNx left the group it joined alone
    # Meet before tearing down, as NNx's own close() does: a rank that destroys its end
    # while the peer is still in its last collective aborts the peer at exit.
    dist.barrier()
    dist.destroy_process_group()
    torch.save({"whole": whole.net.state_dict(), "resumed": resumed.net.state_dict(),
                "second": second.id, "mode": second.resume_status.mode,
                "from_single": from_single.net.state_dict()},
               os.path.join(out, f"split{rank}.pt"))


def main() -> None:
    torch.set_num_threads(1)
    out, mode = sys.argv[1], sys.argv[2]
    if mode == "split":
        split(out, sys.argv[3])
        return
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    rank = int(os.environ.get("RANK", "0"))
    masked = mode.endswith("masked")
    train, val = data(masked)
    model = fresh_model(TaskSpec.categorical(3, ignore_index=-100) if masked else None)
    params = NNTrainParams(
        n_epochs=3, seed=0, metrics=(MetricSpec("f1"), MetricSpec("nll")),
        train_loader=DataLoader(train, batch_size=batch, shuffle=False),
        val_loader=DataLoader(val, batch_size=16),
        optim=NNOptimParams.builder().sgd(max_lr=0.2).build())
    callbacks = {"stop": [Stop(rank)], "kill": [Die(rank)]}.get(mode, [])
    # A dead peer surfaces after timeout_s: short for the killed-rank test, roomy otherwise.
    timeout = 8 if mode == "kill" else 60
    distributed = None if mode.startswith("single") else DDP(backend="gloo", timeout_s=timeout)
    objective = supervised_objective() if mode.endswith("objective") else None
    run = model.train(params, objective=objective, callbacks=callbacks, verbose=None,
                      root=os.path.join(out, "runs"), distributed=distributed)
    # No DDP wrapper outlives the fit: one left in a reference cycle would take its gloo
    # work to interpreter finalization, whose teardown aborts the process.
    wrappers = sum(isinstance(o, DistributedDataParallel) for o in gc.get_objects())
    torch.save({"weights": model.net.state_dict(), "run_id": run.id, "wrappers": wrappers,
                "epochs": [r.epoch for r in run.epoch_records()] if rank == 0 else None,
                "last_epoch": run.idps[-1].epoch},
               os.path.join(out, f"rank{rank}.pt"))


if __name__ == "__main__":
    main()
