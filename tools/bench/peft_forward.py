"""Adapter forward overhead: LoRA, DoRA and merged LoRA against the bare nn.Linear.

Contenders, all on the same ``nn.Linear(1024, 1024)`` weights and the same input
``x`` of shape (4096, 1024), fp32 on CPU, in eval mode under ``torch.no_grad``:

* **linear** — the bare ``nn.Linear`` (the reference, 1.00×);
* **lora** — ``LoRALinear`` (r=8, trained-looking nonzero A and B); on an input
  this large its inference forward is one matmul with W + (alpha/r)·B·A;
* **dora** — ``DoRALinear`` (r=8, the same A and B, a non-trivial magnitude);
  under ``no_grad`` its forward is one matmul with the composed weight W';
* **merged** — the LoRA wrapper after ``merge()``: forward is the base alone;
* **lora-grad**, **dora-grad** — for information, no target: the same forwards with
  grad enabled (the differentiable paths training takes: W x + B(A x), and for DoRA
  that rescaled per row).

Every contender runs once per repeat, interleaved, in one process (the order
rotates each repeat); a run is ``--calls`` forwards. Figures are medians over
repeats and each ratio is the median of the per-repeat ratios to the linear.

    uv run python tools/bench/peft_forward.py [--repeats N] [--calls N] [--threads N]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from nnx.peft.dora import DoRALinear
from nnx.peft.lora import LoRALinear

DIM, ROWS, RANK, ALPHA = 1024, 4096, 8, 16.0
#: The issue's targets (ratio to the bare Linear).
TARGETS: dict[str, float | None] = {"linear": 1.00, "lora": 1.10, "dora": 1.30,
                                    "merged": 1.00, "lora-grad": None, "dora-grad": None}


def _contenders() -> tuple[dict[str, nn.Module], dict[str, float]]:
    """The four modules, and each adapter's max |difference| to its other formulation."""
    torch.manual_seed(0)
    linear = nn.Linear(DIM, DIM).eval()
    lora = LoRALinear(copy.deepcopy(linear), r=RANK, alpha=ALPHA)
    dora = DoRALinear(copy.deepcopy(linear), r=RANK, alpha=ALPHA)
    with torch.no_grad():
        lora.lora_B.weight.normal_(std=0.02)
        dora.lora_A.weight.copy_(lora.lora_A.weight)
        dora.lora_B.weight.copy_(lora.lora_B.weight)
        dora.magnitude.mul_(torch.empty_like(dora.magnitude).uniform_(0.9, 1.1))
    merged = copy.deepcopy(lora)
    merged.merge()
    x = torch.randn(16, DIM)
    big = torch.randn(ROWS, DIM)  # large enough for LoRA's composed inference path
    lora_grad, dora_grad = _with_grad(lora, big), _with_grad(dora, x)
    with torch.no_grad():
        checks = {
            "merged vs lora": (merged(x) - lora(x)).abs().max().item(),
            "lora no_grad vs grad path": (lora(big) - lora_grad).abs().max().item(),
            "dora no_grad vs grad path": (dora(x) - dora_grad).abs().max().item(),
        }
    return {"linear": linear, "lora": lora, "dora": dora, "merged": merged}, checks


def _with_grad(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The module's forward with grad enabled (DoRA's differentiable path), detached."""
    with torch.enable_grad():
        out: torch.Tensor = module(x)
    return out.detach()


def measure(repeats: int, calls: int) -> dict[str, list[float]]:
    modules, _ = _contenders()
    x = torch.randn(ROWS, DIM, generator=torch.Generator().manual_seed(1))

    def forwards(module: nn.Module) -> Callable[[], None]:
        def run() -> None:
            with torch.no_grad():
                for _ in range(calls):
                    module(x)
        return run

    runs = {name: forwards(module) for name, module in modules.items()}

    def with_grad(module: nn.Module) -> Callable[[], None]:
        def run() -> None:
            for _ in range(calls):
                _with_grad(module, x)
        return run

    runs["lora-grad"] = with_grad(modules["lora"])
    runs["dora-grad"] = with_grad(modules["dora"])
    for run in runs.values():  # warm-up
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            runs[name]()
            times[name].append((time.perf_counter() - start) / calls)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=3, help="forwards per timed run")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1: steadier on a shared machine)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    _, checks = _contenders()
    times = measure(args.repeats, args.calls)
    print(f"nn.Linear({DIM}, {DIM}) on x ({ROWS}, {DIM}), fp32 CPU, eval, no_grad; r={RANK}; "
          f"{args.repeats} interleaved repeats of {args.calls} forwards, "
          f"{args.threads} thread(s)")
    print(f"{'contender':<9}  {'median ms':>9}  {'ratio':>7}  {'target':>7}")
    for name, series in times.items():
        ratio = statistics.median(t / b for t, b in zip(series, times["linear"], strict=True))
        target = TARGETS[name]
        if target is None:
            goal, mark = "—", ""
        else:
            goal = f"{'<=' if target > 1 else '='}{target:.2f}x"
            mark = "ok" if ratio <= target + (0.02 if target == 1.0 else 0.0) else "MISSED"
        print(f"{name:<9}  {statistics.median(series) * 1e3:>9.2f}  {ratio:>6.3f}x  "
              f"{goal:>7}  {mark}")
    for what, diff in checks.items():
        print(f"max |{what}| = {diff:.2e}")


if __name__ == "__main__":
    main()
