"""Eager against compiled training on the ConvNN scenario (spec §28), in one process.

Two contenders train the same ConvNN workload (``workloads.conv``: same data, same
initial weights, same Adam, same seeds, one torch thread) with ``NNModel.train``:

* **eager** — the default step as it is;
* **compiled** — ``model.train(params, compile=CompileSpec())``: inductor, the
  step's forward through ``torch.compile``.

A step is the interval between two consecutive batches handed out by the training
loader (harness.py's ``TimedLoader``), so it holds the whole per-batch work. One
untimed warm-up round runs first (it pays inductor's compilation); every later
compiled fit builds a fresh wrapper whose graph dynamo serves from its process-wide
cache. Each round runs both contenders back to back, in alternating order; the figures
are medians over the rounds of each run's median step, and the ratio is the median of
the per-round ratios compiled / eager (below 1: compiled is faster). No speed-up is
promised on a CPU: this script reports what it measures.

    uv run python tools/bench/compile_speed.py [--repeats N]
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from nnx import NNOptimParams, NNTrainParams
from nnx.compilation import CompileSpec
from tools.bench import workloads
from tools.bench.harness import THREADS, Stamps, machine, parse_repeats, quiet, seed_everything

CONTENDERS = ("eager", "compiled")
EPOCHS = 2  # the ConvNN scenario's data and net; fewer epochs keep a round short


def run_once(contender: str) -> tuple[float, float, Any]:
    """(median step, wall time of the fit, the compile record or None)."""
    work = dataclasses.replace(workloads.conv(), epochs=EPOCHS)
    stamps = Stamps()
    model = work.make_model()
    params = NNTrainParams(
        n_epochs=work.epochs, train_loader=work.train_loader(stamps), seed=work.seed,
        scheduler=None, save_phase_checkpoints=False,
        optim=NNOptimParams.builder().adam(max_lr=work.lr).build())
    seed_everything(work.seed)
    spec = CompileSpec() if contender == "compiled" else None
    with tempfile.TemporaryDirectory(prefix=f"nnx-bench-{contender}-") as tmp, quiet():
        start = time.perf_counter()
        run = model.train(params, root=Path(tmp) / "runs", verbose=False, compile=spec)
        wall = time.perf_counter() - start
    return statistics.median(stamps.steps()), wall, run.compile


def main() -> None:
    repeats = parse_repeats(default=5)
    torch.set_num_threads(THREADS)
    load_before = os.getloadavg()
    warm = {c: run_once(c) for c in CONTENDERS}  # imports, allocator, inductor's compile
    steps: dict[str, list[float]] = {c: [] for c in CONTENDERS}
    ratios: list[float] = []
    record = warm["compiled"][2]
    for r in range(repeats):
        order = CONTENDERS if r % 2 == 0 else CONTENDERS[::-1]
        got = {c: run_once(c) for c in order}
        for c in CONTENDERS:
            steps[c].append(got[c][0])
        ratios.append(got["compiled"][0] / got["eager"][0])
        record = got["compiled"][2]
        print(f"compile_speed: repeat {r + 1}/{repeats}", flush=True)
    load_after = os.getloadavg()
    eager, compiled = (statistics.median(steps[c]) for c in CONTENDERS)
    print(f"\nConvNN on 8×8 images, {EPOCHS} epochs, batch 256, Adam; medians of {repeats} "
          "rounds after one warm-up round")
    print("| | eager | compiled (inductor) | compiled / eager |")
    print("|---|---:|---:|---:|")
    print(f"| per step | {eager * 1e3:.2f} ms | {compiled * 1e3:.2f} ms | "
          f"{statistics.median(ratios):.3f} |")
    print(f"| warm-up fit (compile included) | {warm['eager'][1]:.1f} s | "
          f"{warm['compiled'][1]:.1f} s | |")
    print(f"compile record of the warm-up fit: effect={warm['compiled'][2].effect}, "
          f"capture={warm['compiled'][2].capture}, "
          f"graph_breaks={warm['compiled'][2].graph_breaks}")
    print(f"compile record of the last timed fit: effect={record.effect}, "
          f"capture={record.capture} (None: the graph came from dynamo's cache)")
    for key, value in machine().items():
        if key != "threads":
            print(f"{key}: {value}")
    print(f"threads: torch.set_num_threads({THREADS}) for both contenders")
    print("load average before / after: "
          f"{' / '.join(f'{x:.2f}' for x in load_before)} → "
          f"{' / '.join(f'{x:.2f}' for x in load_after)}")


if __name__ == "__main__":
    main()
