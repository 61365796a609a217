"""Adapter forward overhead: LoRA, DoRA and merged LoRA against the bare nn.Linear.

Two shapes, fp32 on CPU, in eval mode under ``torch.no_grad``:

* **square** — ``nn.Linear(1024, 1024)`` on x of shape (4096, 1024), the shape
  docs/performance.md has always reported (many rows: inference composes W');
* **wide** — ``nn.Linear(4096, 1024)`` on a batch of 64 rows (issue 31: few
  rows, where building W' every forward cost DoRA 1.7–2.0× the Linear).

Contenders, all on the same base weights and the same input:

* **linear** — the bare ``nn.Linear`` (the reference, 1.00×);
* **lora** — ``LoRALinear`` (r=8, trained-looking nonzero A and B);
* **dora** — ``DoRALinear`` (r=8, the same A and B, a non-trivial magnitude):
  the row norm of W + (alpha/r)·B·A comes from its cache (the weights do not
  change between forwards), then the cheaper of ``s ⊙ (W x + B(A x))`` and one
  matmul with W';
* **dora-nocache** — the same layer with its norm cache dropped before every
  forward (what each eval forward cost before the cache), for information;
* **merged** — the LoRA wrapper after ``merge()``: forward is the base alone;
* **lora-grad**, **dora-grad** — for information, no target: the same forwards
  with grad enabled (the differentiable paths training takes; DoRA recomputes
  its norm there every forward).

Every contender runs once per round, interleaved, in one process (the order
rotates each round); a run is ``--calls`` forwards (the wide shape runs 16× as
many, its forward being ~16× cheaper). Figures are medians over rounds; each
ratio is the median of the per-round ratios to the linear, with their min–max.

    uv run python tools/bench/peft_forward.py [--repeats N] [--calls N] [--threads N]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from nnx.peft.dora import DoRALinear
from nnx.peft.lora import LoRALinear

RANK, ALPHA = 8, 16.0
#: name: (in_features, out_features, rows, calls multiplier)
SHAPES = {"square": (1024, 1024, 4096, 1), "wide": (4096, 1024, 64, 16)}
#: The issue's targets (ratio to the bare Linear).
TARGETS: dict[str, float | None] = {"linear": 1.00, "lora": 1.10, "dora": 1.30,
                                    "dora-nocache": None, "merged": 1.00,
                                    "lora-grad": None, "dora-grad": None}


def _contenders(in_f: int, out_f: int) -> dict[str, nn.Module]:
    torch.manual_seed(0)
    linear = nn.Linear(in_f, out_f).eval()
    lora = LoRALinear(copy.deepcopy(linear), r=RANK, alpha=ALPHA)
    dora = DoRALinear(copy.deepcopy(linear), r=RANK, alpha=ALPHA)
    with torch.no_grad():
        lora.lora_B.weight.normal_(std=0.02)
        dora.lora_A.weight.copy_(lora.lora_A.weight)
        dora.lora_B.weight.copy_(lora.lora_B.weight)
        dora.magnitude.mul_(torch.empty_like(dora.magnitude).uniform_(0.9, 1.1))
    merged = copy.deepcopy(lora)
    merged.merge()
    return {"linear": linear, "lora": lora, "dora": dora, "merged": merged}


def _checks(modules: dict[str, nn.Module], x: torch.Tensor) -> dict[str, float]:
    """Each adapter's max |difference| between its formulations."""
    lora, dora = modules["lora"], modules["dora"]
    assert isinstance(dora, DoRALinear)
    with torch.enable_grad():
        lora_grad, dora_grad = lora(x).detach(), dora(x).detach()
    with torch.no_grad():
        cached = dora(x)
        dora._norm_cache = None
        return {
            "merged vs lora": (modules["merged"](x) - lora(x)).abs().max().item(),
            "lora no_grad vs grad path": (lora(x) - lora_grad).abs().max().item(),
            "dora no_grad vs grad path": (cached - dora_grad).abs().max().item(),
            "dora cached vs uncached": (cached - dora(x)).abs().max().item(),
        }


def measure(modules: dict[str, nn.Module], x: torch.Tensor, repeats: int,
            calls: int) -> dict[str, list[float]]:
    def no_grad(module: nn.Module, drop_cache: bool = False) -> Callable[[], None]:
        def run() -> None:
            with torch.no_grad():
                for _ in range(calls):
                    if drop_cache:
                        assert isinstance(module, DoRALinear)
                        module._norm_cache = None
                    module(x)
        return run

    def with_grad(module: nn.Module) -> Callable[[], None]:
        def run() -> None:
            for _ in range(calls):
                module(x)
        return run

    runs = {name: no_grad(module) for name, module in modules.items()}
    runs["dora-nocache"] = no_grad(modules["dora"], drop_cache=True)
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


def report(shape: str, repeats: int, calls: int) -> None:
    in_f, out_f, rows, mult = SHAPES[shape]
    modules = _contenders(in_f, out_f)
    x = torch.randn(rows, in_f, generator=torch.Generator().manual_seed(1))
    checks = _checks(modules, x)
    load_before = os.getloadavg()
    times = measure(modules, x, repeats, calls * mult)
    load_after = os.getloadavg()
    print(f"\n[{shape}] nn.Linear({in_f}, {out_f}) on x ({rows}, {in_f}), fp32 CPU, eval, "
          f"no_grad; r={RANK}; {repeats} interleaved rounds of {calls * mult} forwards; "
          f"loadavg {load_before[0]:.2f} -> {load_after[0]:.2f}")
    print(f"{'contender':<12}  {'median ms':>9}  {'ratio':>7}  {'min–max':>13}  {'target':>7}")
    for name, series in times.items():
        ratios = [t / b for t, b in zip(series, times["linear"], strict=True)]
        ratio = statistics.median(ratios)
        target = TARGETS[name]
        if target is None:
            goal, mark = "—", ""
        else:
            goal = f"{'<=' if target > 1 else '='}{target:.2f}x"
            mark = "ok" if ratio <= target + (0.02 if target == 1.0 else 0.0) else "MISSED"
        print(f"{name:<12}  {statistics.median(series) * 1e3:>9.3f}  {ratio:>6.3f}x  "
              f"{min(ratios):>5.3f}–{max(ratios):.3f}x  {goal:>7}  {mark}")
    for what, diff in checks.items():
        print(f"max |{what}| = {diff:.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=3,
                        help="forwards per timed run at the square shape (16x at the wide)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1: steadier on a shared machine)")
    parser.add_argument("--shape", choices=[*SHAPES, "both"], default="both")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{args.threads} torch thread(s); ratios: median of per-round ratios to linear "
          f"(min–max over rounds)")
    for shape in SHAPES if args.shape == "both" else [args.shape]:
        report(shape, args.repeats, args.calls)


if __name__ == "__main__":
    main()
