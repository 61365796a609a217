"""int8 weight-only (nnx.quantize.quantize_int8) against FP32: latency and size.

The net is a FeedFwd MLP 1024 → 4096 → 1024 (ReLU), built as an NNModel and quantized with
``quantize_int8`` (torchao ``Int8WeightOnlyConfig``: per-output-channel int8 weights with
float scales, float activations), fp32 CPU, eval under ``no_grad``, at batch 1 and 64.

Every contender runs once per round, interleaved in one process (the order alternates each
round); a run is ``--calls`` forwards. Latency ratios are the median of the per-round
ratios to FP32 with their min–max (tools/bench/spread.py); size is the serialized
state_dict (``torch.save`` bytes). The outputs' relative L2 difference is checked first.
No speed-up is claimed on the CPU: the target is int8 latency ≤ 1.15× FP32, size ≤ 0.30×.

    uv run python tools/bench/quantize.py [--repeats N] [--calls N] [--threads N]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
from torch import nn

from nnx import Devices, NNModel, NNModelParams, NNParams
from nnx.quantize import quantize_int8
from tools.bench.spread import load, ratio_text

BATCHES = (1, 64)
LATENCY_TARGET, SIZE_TARGET = 1.15, 0.30


def _saved_bytes(net: nn.Module) -> int:
    buffer = io.BytesIO()
    torch.save(net.state_dict(), buffer)
    return len(buffer.getvalue())


def _forward(net: nn.Module, x: torch.Tensor, calls: int) -> float:
    start = time.perf_counter()
    with torch.no_grad():
        for _ in range(calls):
            net(x)
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--calls", type=int, default=20, help="forwards per timed run")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1: steadier on a shared machine)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    fp32 = NNModel(net_params=NNParams(input_dim=1024, output_dim=1024, hidden_dims=(4096,)),
                   params=NNModelParams(device=Devices.CPU))
    fp32.net.eval()
    int8 = quantize_int8(fp32)
    nets = {"fp32": fp32.net, "int8": int8.net}
    size_fp32, size_int8 = _saved_bytes(fp32.net), _saved_bytes(int8.net)
    print(f"{args.threads} torch thread(s); {args.repeats} interleaved rounds of {args.calls} "
          f"forwards; load before {load()}")
    print(f"size: fp32 {size_fp32 / 2**20:.2f} MiB, int8 {size_int8 / 2**20:.2f} MiB, "
          f"ratio {size_int8 / size_fp32:.3f} (target <= {SIZE_TARGET:.2f})")
    for batch in BATCHES:
        x = torch.randn(batch, 1024, generator=torch.Generator().manual_seed(batch))
        with torch.no_grad():
            ref, out = nets["fp32"](x), nets["int8"](x)
        rel = ((out - ref).norm() / ref.norm()).item()
        for net in nets.values():  # warm-up
            _forward(net, x, args.calls)
        times: dict[str, list[float]] = {name: [] for name in nets}
        order = list(nets)
        for r in range(args.repeats):
            for name in order if r % 2 == 0 else order[::-1]:
                times[name].append(_forward(nets[name], x, args.calls))
        print(f"batch {batch:>2}: fp32 {statistics.median(times['fp32']) * 1e3:.3f} ms, "
              f"int8 {statistics.median(times['int8']) * 1e3:.3f} ms, int8 / fp32 "
              f"{ratio_text(times['int8'], times['fp32'])} (target <= {LATENCY_TARGET:.2f}); "
              f"relative L2 {rel:.2e}")
    print(f"load after {load()}")


if __name__ == "__main__":
    main()
