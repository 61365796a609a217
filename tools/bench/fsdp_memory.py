"""Per-rank memory of the training state: DDP against FSDP, at world sizes 2 and 4.

    uv run python tools/bench/fsdp_memory.py                   # a ~1M-parameter net: seconds
    uv run python tools/bench/fsdp_memory.py --params 50000000 # the issue's >= 50M figure

Trains a TransformerNN (nnx-lm, the causal-LM task) on gloo ranks on the CPU, launched by
torchrun, once under ``DDP(...)`` and once under ``FSDP()``, for exactly one optimizer
step: an update listener reads each rank's training state right after AdamW's first step
(the gradients are still there; the window's zero_grad comes after), the moment all
three below coexist, so their peak, and stops the fit.
It counts the bytes this rank holds of

* the parameters,
* their gradients,
* the optimizer state (AdamW's two moments and its per-parameter step counters),

from the tensors' local sizes: a sharded (DTensor) tensor counts its ``to_local()``
shard, a whole one counts whole. Bytes are exact and do not depend on the machine's load,
so there are no repeats. The FSDP / DDP ratio compares the largest FSDP rank with a DDP
rank (every DDP rank holds the same). Not counted: activations, DDP's gradient buckets (a
second gradient-sized buffer per DDP rank, so DDP's real footprint is larger than shown)
and FSDP's transient all-gathered unit in forward and backward.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

KINDS = ("ddp", "fsdp")
CATEGORIES = ("parameters", "gradients", "optimizer")
# Odd, so the embedding's rows split unevenly over the ranks: FSDP's last shard is the
# short one, and its local size is what that rank holds.
VOCAB = 1001
SEQ_LEN, ROWS_PER_RANK = 32, 2


def local_bytes(tensor: torch.Tensor) -> int:
    """The bytes of ``tensor`` this process holds: a DTensor's local shard, else all of it."""
    to_local = getattr(tensor, "to_local", None)
    local = to_local() if callable(to_local) else tensor
    return int(local.numel()) * int(local.element_size())


def rank_bytes(net: nn.Module, optimizers: Iterable[torch.optim.Optimizer]
               ) -> dict[str, int]:
    """This rank's bytes of ``net``'s parameters, their gradients and the ``optimizers``'
    state (every tensor it keeps per parameter)."""
    params = list(net.parameters())
    return {
        "parameters": sum(local_bytes(p) for p in params),
        "gradients": sum(local_bytes(p.grad) for p in params if p.grad is not None),
        "optimizer": sum(local_bytes(value) for opt in optimizers
                         for state in opt.state.values() for value in state.values()
                         if isinstance(value, torch.Tensor)),
    }


def shape(n_params: int) -> dict[str, int]:
    """A TransformerNN's ``d_model`` and ``n_layers`` with at least ``n_params``
    parameters: wider nets for larger counts, then as many blocks as it takes."""
    d_model = 512 if n_params >= 20_000_000 else 256 if n_params >= 4_000_000 else (
        128 if n_params >= 500_000 else 32)
    base, one = parameter_count(d_model, 1), parameter_count(d_model, 2)
    per_block = one - base
    n_layers = max(1, 1 + math.ceil((n_params - base) / per_block))
    return {"d_model": d_model, "n_layers": n_layers}


def _net_params(d_model: int, n_layers: int) -> Any:
    from nnx import NNTransformerParams

    return NNTransformerParams(vocab_size=VOCAB, d_model=d_model, n_heads=4,
                               n_layers=n_layers, max_seq_len=SEQ_LEN)


def parameter_count(d_model: int, n_layers: int) -> int:
    """The net's parameter count (tied embeddings once), built on the meta device: a
    50M-parameter net is counted without allocating it."""
    from nnx.lm import TransformerNN

    with torch.device("meta"):
        net = TransformerNN(_net_params(d_model, n_layers))
    return sum(p.numel() for p in net.parameters())


def build(d_model: int, n_layers: int) -> Any:
    """The causal LM the bench trains (seeded: every launch builds the same weights)."""
    from nnx import GenerativeNNModel, Nets, NNModelParams
    from nnx.lm_tasks import CausalLMTask

    torch.manual_seed(0)
    return GenerativeNNModel(_net_params(d_model, n_layers),
                             NNModelParams(net=Nets.TRANSFORMER),
                             task=CausalLMTask(vocab_size=VOCAB))


def worker(out: str, kind: str, d_model: int, n_layers: int) -> None:
    """One rank (under torchrun): one AdamW step, then this rank's bytes to OUT."""
    from nnx import Callback, NNOptimParams, NNTrainParams
    from nnx.distributed import DDP, FSDP

    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    measured: dict[str, int] = {}

    class AfterFirstStep(Callback):
        def on_train_begin(self, ctx: Any) -> None:
            def listen(c: Any) -> None:
                optimizers = list(c.optimizers.values()) if c.optimizers else [c.optimizer]
                measured.update(rank_bytes(c.model.net, optimizers))
                c.stop_at_update = True  # one step is all the figure needs

            ctx.update_listeners.append(listen)

    g = torch.Generator().manual_seed(0)
    batches = [{"input_ids": torch.randint(0, VOCAB, (ROWS_PER_RANK, SEQ_LEN), generator=g)}
               for _ in range(world)]  # one batch per rank
    params = NNTrainParams(n_epochs=1, seed=0, train_loader=batches, scheduler=None,
                           optim=NNOptimParams.builder().adamw(max_lr=1e-3).build())
    spec = FSDP(timeout_s=600) if kind == "fsdp" else DDP(backend="gloo", timeout_s=600)
    build(d_model, n_layers).train(params, callbacks=[AfterFirstStep()], verbose=False,
                                   root=os.path.join(out, "runs"), distributed=spec)
    if not measured:
        raise RuntimeError("the fit took no optimizer step")
    Path(out, f"{kind}{rank}.json").write_text(json.dumps(measured))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(kind: str, world: int, d_model: int, n_layers: int) -> list[dict[str, int]]:
    """Every rank's bytes after one step under ``kind`` with ``world`` gloo ranks."""
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        for _ in range(3):  # _free_port() closes its socket: another process may take it
            cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={world}",
                   "--master_addr=127.0.0.1", f"--master_port={_free_port()}", __file__,
                   "--worker", out, kind, str(d_model), str(n_layers)]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if done.returncode == 0 or "address already in use" not in done.stderr.lower():
                break
        if done.returncode != 0:
            raise RuntimeError(f"{kind} at world size {world} failed:\n{done.stderr[-4000:]}")
        return [json.loads(Path(out, f"{kind}{r}.json").read_text()) for r in range(world)]


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f}"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        out, kind, d_model, n_layers = sys.argv[2:6]
        worker(out, kind, int(d_model), int(n_layers))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--params", type=int, default=1_000_000,
                        help="at least this many parameters (default 1M, a quick run)")
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--json", type=Path, help="also write every rank's bytes here")
    args = parser.parse_args()
    size = shape(args.params)
    n = parameter_count(size["d_model"], size["n_layers"])
    print(f"TransformerNN d_model={size['d_model']} n_layers={size['n_layers']}: "
          f"{n:,} parameters (float32), AdamW; bytes per rank after one step, in MiB")
    print("| world | how | parameters | gradients | AdamW state | total | FSDP / DDP |")
    print("|---|---|---|---|---|---|---|")
    results: dict[str, Any] = {"parameters": n, **size, "worlds": {}}
    for world in args.worlds:
        ranks = {kind: launch(kind, world, **size) for kind in KINDS}
        results["worlds"][str(world)] = ranks
        totals = {kind: max(sum(r.values()) for r in ranks[kind]) for kind in KINDS}
        for kind in KINDS:
            largest = max(ranks[kind], key=lambda r: sum(r.values()))
            ratio = f"{totals['fsdp'] / totals['ddp']:.3f}" if kind == "fsdp" else ""
            print(f"| {world} | {kind.upper()} | "
                  + " | ".join(_mib(largest[c]) for c in CATEGORIES)
                  + f" | {_mib(totals[kind])} | {ratio} |")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
