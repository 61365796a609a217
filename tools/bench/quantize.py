"""int8 weight-only (nnx.quantize.quantize_int8) against FP32: latency and size.

The net is a FeedFwd MLP 1024 → 4096 → 1024 (ReLU), built as an NNModel and quantized with
``quantize_int8`` (torchao ``Int8WeightOnlyConfig``: per-output-channel int8 weights with
float scales, float activations), fp32 CPU, eval under ``no_grad``, at batch 1 and 64.

Two ways to run each net: eager, and compiled for serving the way docs/quantize.md says
(``torch._inductor.config.freezing = True``, then
``torch.compile(net, mode="max-autotune-no-cudagraphs")``, called under ``no_grad``:
with frozen weights inductor lowers the int8 weight-only linear to its int8 GEMM template
instead of converting the whole weight to float on every call, which is what torchao's
eager path does). Every contender runs once per round, interleaved in one process (the
order rotates each round); a run is ``--calls`` forwards. Latency ratios are the median
of the per-round ratios to FP32 run the same way (eager to eager, compiled to compiled)
with their min–max (tools/bench/spread.py); size is the serialized state_dict
(``torch.save`` bytes). The outputs' relative L2 difference is checked first. No speed-up
is claimed on the CPU: the target is int8 latency ≤ 1.15× FP32, size ≤ 0.30×.

    uv run python tools/bench/quantize.py [--repeats N] [--calls N] [--threads N] [--eager-only]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from collections.abc import Callable
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


def _forward(net: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, calls: int) -> float:
    start = time.perf_counter()
    with torch.no_grad():
        for _ in range(calls):
            net(x)
    return (time.perf_counter() - start) / calls


def _served(net: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """``net`` compiled for CPU serving as docs/quantize.md shows (weights frozen: the
    process sets inductor's ``freezing``, which per-call ``options=`` do not reach)."""
    import torch._inductor.config

    torch._inductor.config.freezing = True
    compiled: Callable[[torch.Tensor], torch.Tensor] = torch.compile(
        net, mode="max-autotune-no-cudagraphs", dynamic=False)
    return compiled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--calls", type=int, default=20, help="forwards per timed run")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1: steadier on a shared machine)")
    parser.add_argument("--eager-only", action="store_true",
                        help="skip the compiled contenders (compiling takes ~10 s per net)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    fp32 = NNModel(net_params=NNParams(input_dim=1024, output_dim=1024, hidden_dims=(4096,)),
                   params=NNModelParams(device=Devices.CPU))
    fp32.net.eval()
    int8 = quantize_int8(fp32)
    eager = {"fp32": fp32.net, "int8": int8.net}
    size_fp32, size_int8 = _saved_bytes(fp32.net), _saved_bytes(int8.net)
    print(f"{args.threads} torch thread(s); {args.repeats} interleaved rounds of {args.calls} "
          f"forwards; load before {load()}")
    print(f"size: fp32 {size_fp32 / 2**20:.2f} MiB, int8 {size_int8 / 2**20:.2f} MiB, "
          f"ratio {size_int8 / size_fp32:.3f} (target <= {SIZE_TARGET:.2f})")
    for batch in BATCHES:
        x = torch.randn(batch, 1024, generator=torch.Generator().manual_seed(batch))
        nets: dict[str, Callable[[torch.Tensor], torch.Tensor]] = dict(eager)
        if not args.eager_only:  # one compile per batch size (static shapes)
            nets.update({f"{name} compiled": _served(net) for name, net in eager.items()})
        with torch.no_grad():
            ref = nets["fp32"](x)
            rel = {name: ((net(x) - ref).norm() / ref.norm()).item()
                   for name, net in nets.items() if name.startswith("int8")}
        for net in nets.values():  # warm-up (and the compiles)
            _forward(net, x, args.calls)
        times: dict[str, list[float]] = {name: [] for name in nets}
        order = list(nets)
        for r in range(args.repeats):
            for name in order[r % len(order):] + order[:r % len(order)]:
                times[name].append(_forward(nets[name], x, args.calls))
        for way in ("", " compiled"):
            if f"int8{way}" not in times:
                continue
            num, den = times[f"int8{way}"], times[f"fp32{way}"]
            print(f"batch {batch:>2}{way or ' eager'}: fp32 {statistics.median(den) * 1e3:.3f} "
                  f"ms, int8 {statistics.median(num) * 1e3:.3f} ms, int8 / fp32 "
                  f"{ratio_text(num, den)} (target <= {LATENCY_TARGET:.2f}); relative L2 "
                  f"{rel[f'int8{way}']:.2e}")
    print(f"load after {load()}")


if __name__ == "__main__":
    main()
