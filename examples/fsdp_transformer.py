"""A small language model trained sharded on 2 CPU processes (FSDP, docs/distributed.md).

The script launches its own 2 gloo ranks (torch.multiprocessing's spawn), so it runs as

    uv run python examples/fsdp_transformer.py

Each rank joins the process group first, then trains a 2-block TransformerNN (nnx-lm,
the causal-LM task) on counting sequences (3, 4, 5, ... wrapping round the vocabulary)
for 2 epochs under ``distributed=FSDP()``: every rank holds half of each parameter, its
gradients and its AdamW state. Because the script created the group, NNx leaves it open,
so after the fit the ranks run the sharded model's forward together (it gathers the
shards) on held-out sequences. Then this process, alone, loads the run's LAST, which
holds the whole model, and checks that it predicts exactly what the sharded model
predicted, and that it learned to count. On a real cluster the rank function is the
whole script and ``torchrun`` starts it (the launch lines are in docs/distributed.md).

Everything is written to a temporary directory, so the script runs again and again in
the same place. Needs `pip install nnx-core nnx-lm`; runs in seconds.
"""

from __future__ import annotations

import gc
import tempfile
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from nnx import (
    GenerativeNNModel,
    Nets,
    NNCheckpoint,
    NNModelParams,
    NNOptimParams,
    NNTrainParams,
    NNTransformerParams,
)
from nnx.distributed import FSDP
from nnx.lm_tasks import CausalLMTask

WORLD, VOCAB, SEQ_LEN = 2, 16, 12
NET = NNTransformerParams(vocab_size=VOCAB, d_model=32, n_heads=4, n_layers=2,
                          max_seq_len=SEQ_LEN)


def counting(rows: int, seed: int) -> torch.Tensor:
    """Sequences start, start + 1, ... modulo VOCAB, from random starts."""
    starts = torch.randint(0, VOCAB, (rows, 1), generator=torch.Generator().manual_seed(seed))
    return (starts + torch.arange(SEQ_LEN)) % VOCAB


def model() -> GenerativeNNModel:
    torch.manual_seed(0)
    return GenerativeNNModel(NET, NNModelParams(net=Nets.TRANSFORMER),
                             task=CausalLMTask(vocab_size=VOCAB))


def rank(index: int, root: str) -> None:
    """One of the WORLD processes: the fit under FSDP, then the sharded forward."""
    torch.set_num_threads(1)
    # TransformerNN's forward keeps no generation cache, so no block (a shard unit) returns
    # a view, which FSDP2 would warn about: this example fails if one ever does.
    warnings.filterwarnings("error", message=r"FSDP2-wrapped module .* returned a view")
    dist.init_process_group("gloo", init_method=Path(root, "rendezvous").as_uri(),
                            rank=index, world_size=WORLD)
    rows = counting(128, seed=1)
    # A list of batches is dealt round-robin: each rank trains on 8 of these 16.
    batches = [{"input_ids": rows[i:i + 8]} for i in range(0, len(rows), 8)]
    params = NNTrainParams(n_epochs=2, seed=0, train_loader=batches, scheduler=None,
                           optim=NNOptimParams.builder().adamw(max_lr=2e-2).build())
    sharded = model()
    run = sharded.train(params, verbose=False, root=f"{root}/runs", distributed=FSDP())
    embedding = sharded.net.embed.weight
    held, whole = embedding.to_local().shape[0], embedding.shape[0]
    with torch.no_grad():  # every rank joins: each unit's forward gathers its shards
        logits = sharded.net(counting(16, seed=2))
    if index == 0:
        print(f"rank 0 of {WORLD} held {held} of the embedding's {whole} rows")
        torch.save({"run_id": run.id, "logits": logits}, f"{root}/sharded.pt")
    # The sharded model goes before the group: one that outlives the group keeps gloo's
    # threads to interpreter exit, whose teardown of them can abort the process.
    del sharded, embedding
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def main(root: str) -> None:
    mp.spawn(rank, args=(root,), nprocs=WORLD)
    sharded = torch.load(f"{root}/sharded.pt", weights_only=True)
    last = NNCheckpoint.load(sharded["run_id"], "last", root=f"{root}/runs")
    whole = GenerativeNNModel.from_checkpoint(last)
    held_out = counting(16, seed=2)
    with torch.no_grad():
        logits = whole.net(held_out)
    assert torch.equal(logits, sharded["logits"]), "LAST predicts what the sharded model did"
    # After the first tokens of a row, the next one is the previous one plus one.
    predicted = logits[:, 2:-1].argmax(-1)
    accuracy = (predicted == (held_out[:, 2:-1] + 1) % VOCAB).float().mean().item()
    print(f"run {sharded['run_id']}: LAST ({sum(p.numel() for p in whole.net.parameters()):,} "
          f"parameters, whole) predicts what the sharded model predicted; "
          f"next-token accuracy {accuracy:.0%}")
    assert accuracy > 0.5, accuracy


if __name__ == "__main__":
    torch.set_num_threads(1)  # a net this small gains nothing from intra-op threads
    with tempfile.TemporaryDirectory() as tmp:
        main(tmp)
