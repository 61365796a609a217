"""DDPM sampling speed: ``nnx.diffusion.sample`` against a diffusers ``DDPMScheduler.step`` loop.

Both contenders run the same 1000-step linear schedule (clip_sample=False,
variance_type="fixed_small") over the same small ``DiffusionMLP`` (random init,
hidden [64, 64]) from the same generator seed, so they draw the same noise and
should land on the same samples (the max abs difference is printed):

* **nnx** — ``sample(net, schedule, shape, generator=g)``: coefficients computed
  once per call, in-place updates with Python-scalar coefficients, timestep
  batches as views of one tensor, one reused noise buffer;
* **diffusers** — ``x = scheduler.step(net(x, t), t, x, generator=g).prev_sample``
  for every ``t`` in ``scheduler.timesteps``, under ``torch.no_grad()`` and with the
  net in eval mode (what a diffusers user writes).

Each repeat runs both, interleaved, in one process; the figures are medians over
repeats and the ratio is the median of the per-repeat ratios (nnx / diffusers).

    uv run python tools/bench/diffusion_sample.py [--repeats N] [--threads N] [--batch N]
        [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nnx.diffusion import DiffusionMLP, NoiseSchedulers, sample

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.bench.spread import load, ratio_text

T = 1000


def measure(repeats: int, batch: int, device: str) -> tuple[dict[str, list[float]], float]:
    # Through importlib: diffusers is untyped, and the bench type-checks without it.
    diffusers: Any = importlib.import_module("diffusers")
    torch.manual_seed(0)
    net = DiffusionMLP(input_dim=2, hidden_dims=[64, 64], time_embed_dim=16).to(device).eval()
    schedule = NoiseSchedulers.LINEAR(T=T)
    scheduler = diffusers.DDPMScheduler(num_train_timesteps=T, beta_schedule="linear",
                                        clip_sample=False, variance_type="fixed_small")
    shape = (batch, 2)

    def generator() -> torch.Generator:
        return torch.Generator(device=device).manual_seed(1)

    def nnx_run() -> torch.Tensor:
        return sample(net, schedule, shape, device=device, generator=generator())

    def diffusers_run() -> torch.Tensor:
        g = generator()
        with torch.no_grad():
            x = torch.randn(shape, generator=g, device=device)
            for t in scheduler.timesteps:
                eps = net(x, t.to(device).expand(batch))
                x = scheduler.step(eps, t, x, generator=g).prev_sample
        return x

    runs: dict[str, Callable[[], torch.Tensor]] = {"nnx": nnx_run, "diffusers": diffusers_run}
    outputs = {name: run() for name, run in runs.items()}  # warm-up, and the samples
    diff = float((outputs["nnx"] - outputs["diffusers"]).abs().max())
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            run()
            if device == "cuda":
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - start)
    return times, diff


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1: steadier on a shared machine)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    times, diff = measure(args.repeats, args.batch, args.device)
    print(f"DiffusionMLP hidden [64, 64], {T} steps, batch {args.batch}, {args.device}; "
          f"{args.repeats} repeats, {args.threads} thread(s); max |nnx - diffusers| = {diff:.2e}")
    print(f"{'contender':<10}  {'median s':>9}  {'steps/s':>8}  {'vs diffusers (min-max)':>23}")
    for name, series in times.items():
        median = statistics.median(series)
        print(f"{name:<10}  {median:>9.3f}  {T / median:>8.0f}  "
              f"{ratio_text(series, times['diffusers']):>23}")
    print(f"load average: {load()}")


if __name__ == "__main__":
    main()
