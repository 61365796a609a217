"""GraphSAGE train step: nnx-graph's ``GraphSageNN`` against a plain PyG model.

A Cora-sized random graph (2708 nodes, 1433 features, 10556 directed edges, 7
classes, 140 training nodes), two mean-SAGE layers 1433 → 16 → 7, full batch, Adam
on fp32 CPU. A step is zero_grad, forward over the whole graph, cross-entropy on the
training nodes, backward and the optimizer step:

* **plain** — ``SAGEConv(1433, 16)``, ReLU, ``SAGEConv(16, 7)`` from
  torch_geometric.nn, forward ``(x, edge_index)`` (the reference, 1.00×);
* **nnx** — ``Nets.GRAPH_SAGE(NNParams(input_dim=1433, output_dim=7,
  hidden_dims=(16,)))`` on the same weights, forward ``GraphInputs`` (the seed-row
  slicing NNGraphDataset's batches take), loss on its seed rows.

Both run once per round, interleaved (the order alternates), in one process; a run
is ``--steps`` steps after one warm-up step. The ratio is the median of the
per-round ratios nnx / plain with their min–max; the target is ≤ 1.0.

    uv run python tools/bench/graph_step.py [--repeats N] [--steps N] [--threads N]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.nn import SAGEConv

from nnx import Nets, NNParams
from nnx.graph import GraphInputs
from tools.bench.spread import load, ratio_text

NODES, FEATURES, EDGES, CLASSES, HIDDEN, TRAIN = 2708, 1433, 10556, 7, 16, 140


class PlainSage(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = SAGEConv(FEATURES, HIDDEN), SAGEConv(HIDDEN, CLASSES)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)
        return out


def _graph() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(NODES, FEATURES, generator=g) < 0.0127).float()  # Cora-like sparsity
    edge_index = torch.randint(0, NODES, (2, EDGES), generator=g)
    y = torch.randint(0, CLASSES, (NODES,), generator=g)
    train = torch.randperm(NODES, generator=g)[:TRAIN].sort().values
    return x, edge_index, y, train


def _steps() -> tuple[Callable[[], float], Callable[[], float], float]:
    """(plain step, nnx step, max |logit difference| of the two nets at start)."""
    x, edge_index, y, train = _graph()
    torch.manual_seed(0)
    plain = PlainSage()
    net = Nets.GRAPH_SAGE(params=NNParams(input_dim=FEATURES, output_dim=CLASSES,
                                          hidden_dims=(HIDDEN,)))
    with torch.no_grad():
        convs: Any = cast(Any, net).convs
        for dst, src in zip(convs, (plain.conv1, plain.conv2), strict=True):
            dst.load_state_dict(src.state_dict())
    inputs = GraphInputs(x, edge_index, train, torch.arange(NODES))
    with torch.no_grad():
        diff = float((net(inputs) - plain(x, edge_index)[train]).abs().max())
    opt_plain = torch.optim.Adam(plain.parameters(), lr=1e-2)
    opt_nnx = torch.optim.Adam(net.parameters(), lr=1e-2)
    target = y[train]

    def plain_step() -> float:
        opt_plain.zero_grad(set_to_none=True)
        loss = F.cross_entropy(plain(x, edge_index)[train], target)
        torch.autograd.backward(loss)
        opt_plain.step()
        return float(loss)

    def nnx_step() -> float:
        opt_nnx.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(inputs), target)
        torch.autograd.backward(loss)
        opt_nnx.step()
        return float(loss)

    return plain_step, nnx_step, diff


def _time(step: Callable[[], float], n: int) -> float:
    step()  # warm-up
    start = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="rounds (default 7)")
    parser.add_argument("--steps", type=int, default=20, help="steps per run (default 20)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    plain_step, nnx_step, diff = _steps()
    plain_s, nnx_s = [], []
    for r in range(args.repeats):
        if r % 2:
            nnx_s.append(_time(nnx_step, args.steps))
            plain_s.append(_time(plain_step, args.steps))
        else:
            plain_s.append(_time(plain_step, args.steps))
            nnx_s.append(_time(nnx_step, args.steps))
    print(f"graph_step: {NODES} nodes, {FEATURES} features, {EDGES} edges, SAGE "
          f"{FEATURES}→{HIDDEN}→{CLASSES}; threads {args.threads}; max |logit diff| at "
          f"start {diff:.2e}")
    print(f"plain {1e3 * min(plain_s):.2f} ms/step (best), nnx {1e3 * min(nnx_s):.2f}")
    print(f"nnx / plain: {ratio_text(nnx_s, plain_s)}  (target ≤ 1.0)  load {load()}")


if __name__ == "__main__":
    main()
