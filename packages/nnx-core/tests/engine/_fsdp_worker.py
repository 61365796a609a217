"""One rank of the FSDP tests (launched by torchrun through test_fsdp.py).

Usage: python _fsdp_worker.py OUT MODE

The worker creates the process group itself, so NNx joins it and leaves it open: the
sharded ``model.net`` is still usable after the fit (its forward gathers the shards).
Modes: ``fit`` (2 epochs of the default step under FSDP with a ModelCheckpoint, rank 1
starting from other weights: the run id, this rank's full weights and the sharded
model's gathered output on the validation inputs), ``resume SINGLE_RUN`` (sharded
resumes: 2+1 against 3 straight, from a single-process run, from a DDP run, and to DDP),
``reshard RUN`` (a 2-rank run resumed at this world size), ``kill WHERE`` (rank 1 SIGKILLed
in the sharded save of epoch 2) and ``after-kill RUN`` (that run resumed, and 3 epochs
straight), and ``agree-fsdp`` / ``agree-ddp`` (the same two fits under FSDP or DDP:
accumulation over uneven, masked microbatches; gradient clipping with a NaN on rank 1
only, under FSDP with named units, no resharding after forward and activation
checkpointing; an objective over masked microbatches, one microbatch and two to a
window; a Trainer with a step function of its own).
Each rank writes OUT/<mode><rank>.pt.
"""

from __future__ import annotations

import gc
import os
import sys

import torch
import torch.distributed as dist
from _ddp_worker import data  # the DDP tests' data: run as a script, this directory is on sys.path
from torch.utils.data import DataLoader, TensorDataset

from nnx import (
    NNEvaluationDataPoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainerParams,
    NNTrainParams,
    TaskSpec,
    Trainer,
    supervised_objective,
)
from nnx.callbacks import Callback, ModelCheckpoint
from nnx.distributed import DDP, FSDP


def fresh_model(masked: bool = False) -> NNModel:
    torch.manual_seed(0)
    task = TaskSpec.categorical(3, ignore_index=-100) if masked else None
    return NNModel(net_params=NNParams(input_dim=6, output_dim=3, hidden_dims=(16, 8)),
                   params=NNModelParams(task=task))


def fit_params(batch: int, n_epochs: int = 2, **changes) -> NNTrainParams:
    train, val = data()
    return NNTrainParams(n_epochs=n_epochs, seed=0,
                         train_loader=DataLoader(train, batch_size=batch, shuffle=False),
                         val_loader=DataLoader(val, batch_size=16),
                         optim=NNOptimParams.builder().adamw(max_lr=0.01).build(), **changes)


def resumable_params(n_epochs: int, batch: int = 8, **changes) -> NNTrainParams:
    """Shuffled batches (the loader's generator is part of the resumed state) and AdamW
    (its moments are the optimizer state a resume must shard)."""
    train, val = data()
    loader = DataLoader(train, batch_size=batch, shuffle=True,
                        generator=torch.Generator().manual_seed(4))
    return NNTrainParams(n_epochs=n_epochs, seed=0, train_loader=loader,
                         val_loader=DataLoader(val, batch_size=16),
                         optim=NNOptimParams.builder().adamw(max_lr=0.01).build(), **changes)


def resumes(out: str, single_run: str) -> dict:
    """In one process group: 3 epochs straight under FSDP; 2, then a stateful resume of
    1; a single-process run (``single_run``, 2 epochs under OUT/single) resumed sharded
    and replicated; a DDP run resumed
    sharded; and the 2-epoch FSDP run resumed under DDP."""
    root = os.path.join(out, "runs")
    sharded = FSDP(timeout_s=60)
    straight = fresh_model()
    straight_run = straight.train(resumable_params(3), verbose=False, root=root,
                                  distributed=sharded)
    first = fresh_model().train(resumable_params(2), verbose=False, root=root,
                                distributed=sharded)
    resumed = fresh_model()
    resumed_run = resumed.train(resumable_params(1, resume_from_run_id=first.id),
                                verbose=False, root=root, distributed=sharded)
    from_single = fresh_model()
    from_single.train(resumable_params(1, resume_from_run_id=single_run), verbose=False,
                      root=os.path.join(out, "single"), distributed=sharded)
    replicated = DDP(backend="gloo", timeout_s=60)
    ddp_first = fresh_model().train(resumable_params(2), verbose=False,
                                    root=os.path.join(out, "ddp"), distributed=replicated)
    from_ddp = fresh_model()
    from_ddp.train(resumable_params(1, resume_from_run_id=ddp_first.id), verbose=False,
                   root=os.path.join(out, "ddp"), distributed=sharded)
    single_ddp = fresh_model()
    single_ddp.train(resumable_params(1, resume_from_run_id=single_run), verbose=False,
                     root=os.path.join(out, "single"), distributed=replicated, salt="replicated")
    to_ddp = fresh_model()
    to_ddp.train(resumable_params(1, resume_from_run_id=first.id), verbose=False,
                 root=root, distributed=replicated, salt="replicated")
    return {"straight": full_weights(straight), "straight_run": straight_run.id,
            "first_run": first.id, "resumed": full_weights(resumed),
            "resumed_run": resumed_run.id, "mode": resumed_run.resume_status.mode,
            "from_single": full_weights(from_single), "single_ddp": full_weights(single_ddp),
            "from_ddp": full_weights(from_ddp),
            "to_ddp": full_weights(to_ddp)}


def reshard(out: str, source: str) -> dict:
    """The 2-rank FSDP run ``source`` resumed for 1 epoch at this world size."""
    model = fresh_model()
    run = model.train(resumable_params(1, resume_from_run_id=source), verbose=False,
                      root=os.path.join(out, "runs"), distributed=FSDP(timeout_s=60),
                      salt="resharded")
    return {"run": run.id, "mode": run.resume_status.mode, "weights": full_weights(model)}


class StopInEpoch2(Callback):
    """Stops the fit right after its 6th update, inside epoch 2 (4 updates an epoch)."""

    def on_train_begin(self, ctx) -> None:
        ctx.update_listeners.append(self.listen)

    def listen(self, ctx) -> None:
        if ctx.committed_updates == 6:
            ctx.stop_at_update = True


def killed(out: str, where: str) -> dict:
    """A 3-epoch FSDP fit whose rank 1 is SIGKILLed in the sharded save of epoch 2:
    ``where`` is ``state`` (reading its optimizer shard, before DCP writes a file) or
    ``files`` (after DCP wrote every rank's file and the metadata, before rank 0 has their
    digests)."""
    import signal

    from nnx._engine import fsdp

    if dist.get_rank() == 1:
        name = {"state": "get_optimizer_state_dict", "files": "digests"}[where]
        original, calls = getattr(fsdp, name), []

        def dying(*args, **kwargs):
            calls.append(1)
            if len(calls) == 2:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(*args, **kwargs)

        setattr(fsdp, name, dying)
    fresh_model().train(resumable_params(3), verbose=False, root=os.path.join(out, "runs"),
                        distributed=FSDP(timeout_s=30))
    return {}


def after_kill(out: str, run_id: str) -> dict:
    """The killed run resumed statefully from its LAST for the 2 epochs it lost, and the
    3 epochs straight, both sharded."""
    root = os.path.join(out, "runs")
    resumed = fresh_model()
    run = resumed.train(resumable_params(2, resume_from_run_id=run_id), verbose=False,
                        root=root, distributed=FSDP(timeout_s=60))
    straight = fresh_model()
    straight.train(resumable_params(3), verbose=False, root=os.path.join(out, "straight"),
                   distributed=FSDP(timeout_s=60))
    return {"mode": run.resume_status.mode, "resumed": full_weights(resumed),
            "straight": full_weights(straight)}


def accumulation_params(batch: int, accumulate: int) -> NNTrainParams:
    """56 samples: each rank's 28 in microbatches of 8, 8, 8, 4, two to a window; the
    union of a window over both ranks is one 32- (then 24-) sample batch of one process.
    Samples 48-55 (the last window's closing microbatch on both ranks) are all masked."""
    train, val = data(masked=True)
    x, y = train[:56]
    y = y.clone()
    y[48:] = -100
    subset = TensorDataset(x, y)
    optim = NNOptimParams.builder().sgd(max_lr=0.2).accumulate_grad(accumulate).build()
    return NNTrainParams(n_epochs=2, seed=0, optim=optim,
                         train_loader=DataLoader(subset, batch_size=batch, shuffle=False),
                         val_loader=DataLoader(val, batch_size=16))


def clip_params() -> NNTrainParams:
    """A NaN in sample 17, which only rank 1 draws (no shuffling: rank r takes r, r+2, ...),
    in its second microbatch: the window's first one already left gradients behind."""
    train, val = data()
    x, y = train[:]
    x = x.clone()
    x[17, 0] = float("nan")
    optim = NNOptimParams.builder().sgd(max_lr=0.5).grad_clip(0.05).accumulate_grad(2).build()
    return NNTrainParams(n_epochs=2, seed=0,
                         train_loader=DataLoader(TensorDataset(x, y), batch_size=8),
                         val_loader=DataLoader(val, batch_size=16), optim=optim)


def trainer_params() -> NNTrainerParams:
    train, val = data()
    return NNTrainerParams(n_epochs=2, seed=0,
                           train_loader=DataLoader(train, batch_size=8, shuffle=False),
                           val_loader=DataLoader(val, batch_size=16),
                           optims={"all": NNOptimParams.builder().adamw(max_lr=0.01).build()})


def trainer_step(ctx) -> NNEvaluationDataPoint:
    """A Trainer step of its own, through the training forward (sharded or wrapped)."""
    inputs, target = ctx.model.split_batch(ctx.batch)
    loss = torch.nn.functional.cross_entropy(ctx.forward(inputs), target)
    optimizer = ctx.optimizers["all"]
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    ctx.report_update("all")
    return NNEvaluationDataPoint(loss=float(loss.detach()))


def full_weights(model: NNModel) -> dict[str, torch.Tensor]:
    """Every parameter whole, on every rank (a sharded one is gathered)."""
    out = {}
    for name, p in model.net.named_parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        out[name] = full.detach().clone()
    return out


def run_mode(out: str, mode: str, rank: int) -> dict:
    """The fits of ``mode``; what the test reads back (tensors and ids only)."""
    result: dict = {}
    if mode == "fit":
        model = fresh_model()
        if rank == 1:  # other initial weights here: the fit starts from rank 0's everywhere
            with torch.no_grad():
                for p in model.net.parameters():
                    p.add_(1.0)
        run = model.train(fit_params(8), verbose=None, root=os.path.join(out, "runs"),
                          distributed=FSDP(timeout_s=60),
                          callbacks=[ModelCheckpoint(format="safetensors")])
        _, val = data()
        with torch.no_grad():  # every rank joins the sharded forward
            output = model.net(val[:][0])
        stopped = fresh_model().train(  # a mid-epoch stop: its final LAST is not rewritten
            fit_params(8, 3), verbose=False, root=os.path.join(out, "stopped"),
            distributed=FSDP(timeout_s=60), callbacks=[StopInEpoch2()])
        result = {"run_id": run.id, "weights": full_weights(model), "output": output,
                  "stopped": stopped.id,
                  "sharded": type(model.net).__name__,
                  "local": {n: tuple(p.to_local().shape) for n, p in
                            model.net.named_parameters()}}
    elif mode == "resume":
        result = resumes(out, sys.argv[3])
    elif mode == "reshard":
        result = reshard(out, sys.argv[3])
    elif mode == "kill":
        killed(out, sys.argv[3])
    elif mode == "after-kill":
        result = after_kill(out, sys.argv[3])
    else:
        spec = FSDP(timeout_s=60) if mode == "agree-fsdp" else DDP(backend="gloo", timeout_s=60)
        root = os.path.join(out, mode)
        accumulated = fresh_model(masked=True)
        accumulated.train(accumulation_params(8, 2), verbose=False, root=root,
                          distributed=spec)
        if mode == "agree-fsdp":  # the other knobs change memory and traffic, not numbers
            spec = FSDP(units=("layers.0", "layers.2"), reshard_after_forward=False,
                        activation_checkpointing=True, timeout_s=60)
        clipped = fresh_model()
        run = clipped.train(clip_params(), verbose=False, root=root, distributed=spec)
        objective = fresh_model(masked=True)  # masked unevenly: the ranks' denominators differ
        objective.train(accumulation_params(8, 1), objective=supervised_objective(),
                        verbose=False, root=root, distributed=spec)
        accumulating = fresh_model(masked=True)  # and two microbatches to a window
        accumulating.train(accumulation_params(8, 2), objective=supervised_objective(),
                           verbose=False, root=root, distributed=spec, salt="objective")
        trained = fresh_model()
        Trainer(trained).train(trainer_params(), trainer_step_fn=trainer_step, verbose=False,
                               root=root, distributed=spec)
        result = {"accumulated": full_weights(accumulated), "clipped": full_weights(clipped),
                  "clipped_run": run.id, "trainer": full_weights(trained),
                  "objective": full_weights(objective),
                  "accumulating": full_weights(accumulating)}
    return result


def main() -> None:
    torch.set_num_threads(1)
    out, mode = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    result = run_mode(out, mode, rank)
    # The sharded models (and their hooks' reference cycles) go while the group is alive:
    # one that outlives it holds gloo's threads and work to interpreter finalization,
    # whose teardown of them aborts the process now and then ("terminate called without
    # an active exception"), as NNx's own close() collects before it destroys a group.
    gc.collect()
    dist.barrier()  # as NNx's own close(): meet before tearing the group down
    dist.destroy_process_group()
    torch.save(result, os.path.join(out, f"{mode}{rank}.pt"))


if __name__ == "__main__":
    main()
