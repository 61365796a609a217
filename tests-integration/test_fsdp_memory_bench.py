"""tools/bench/fsdp_memory.py counts what each rank holds (issue 42): bytes, not time.

Its launcher runs 2 gloo ranks under torchrun (a fresh process, never a fork of this one)
for one AdamW step of a tiny TransformerNN under DDP and under FSDP; the figures must be
the exact sizes: each DDP rank holds the whole model, FSDP's local shards add up to it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tools" / "bench" / "fsdp_memory.py"

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(),
                                reason="torch.distributed is not available")


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fsdp_memory_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_ddp_ranks_hold_the_whole_model_and_fsdp_shards_add_up_to_it() -> None:
    b = bench()
    size = {"d_model": 32, "n_layers": 1}
    net = b.build(**size).net
    params = list(net.parameters())
    whole = sum(p.numel() * p.element_size() for p in params)
    # AdamW keeps two moments of each parameter's shape and a float32 step per parameter.
    steps = 4 * len(params)
    ddp, fsdp = b.launch("ddp", 2, **size), b.launch("fsdp", 2, **size)
    for rank in ddp:
        assert rank == {"parameters": whole, "gradients": whole, "optimizer": 2 * whole + steps}
    assert sum(r["parameters"] for r in fsdp) == whole
    assert sum(r["gradients"] for r in fsdp) == whole
    # The moments are sharded like their parameters; each rank keeps its own step counters.
    assert sum(r["optimizer"] for r in fsdp) == 2 * whole + 2 * steps
    # The embedding's odd row count splits unevenly: rank 1's shard is the short one.
    assert fsdp[0]["parameters"] > fsdp[1]["parameters"]
    ratio = max(sum(r.values()) for r in fsdp) / sum(ddp[0].values())
    assert 0.5 < ratio < 0.51


def test_rank_bytes_counts_a_whole_tensor_whole() -> None:
    b = bench()
    net = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(net.parameters())
    net(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    assert b.rank_bytes(net, [optimizer]) == {"parameters": 32, "gradients": 32,
                                              "optimizer": 2 * 32 + 2 * 4}


def test_the_shape_reaches_the_asked_parameter_count() -> None:
    b = bench()
    for n in (10_000, 1_000_000, 50_000_000):
        size = b.shape(n)
        assert b.parameter_count(**size) >= n
        if size["n_layers"] > 1:  # and no block more than it takes
            assert b.parameter_count(size["d_model"], size["n_layers"] - 1) < n
