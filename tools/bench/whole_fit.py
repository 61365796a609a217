"""A whole fit, setup to return: NNx against a careful hand-written loop.

The careful loop is harness.py's plain loop itself (same net, data, Adam, seeds,
``DataLoader``, validation pass) whose per-epoch saves are durable: LAST each epoch and BEST when
validation improves, each with ``torch.save`` + ``fsync`` + rename + directory
``fsync`` (commit_cost.careful_save). NNx is ``NNModel.train`` as in harness.py:
the run's reservation, run.yaml and metadata.yaml, the history, LAST, BEST and
runs/best. The wall time of each whole fit is measured; rounds are interleaved
(the order alternates) after one untimed warm-up round, and the report is the
median of each contender and the median of the per-round ratios.

The short case (issue 38) is short_fit_job.py's 20-epoch × 9-step fit, LAST and BEST
every epoch, each contender in a fresh process: the plain loop with durable saves, NNx
with its background commit, NNx with ``async_commit=False``, and the original NNx
0.4.1 when ``--original PYTHON`` (or ``NNX_ORIGINAL_PYTHON``) names a Python whose
environment has it installed (the column is skipped otherwise). It reports the fit
(model built to ``train()`` returned) and the whole process (interpreter start to exit).

    uv run python tools/bench/whole_fit.py [--repeats N] [--case all|workloads|short]
                                           [--original PYTHON] [--flush-ms MS]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.bench import workloads
from tools.bench.durable_save import careful_save
from tools.bench.harness import Stamps, Workload, quiet, run_nnx, run_plain
from tools.bench.spread import load, ratio_text

RUNNERS: dict[str, Callable[[Workload, Path], object]] = {
    # The harness's plain loop, its LAST / BEST saves made durable.
    "careful": lambda work, directory: run_plain(work, directory, Stamps(), save=careful_save),
    "nnx": lambda work, directory: run_nnx(work, directory, Stamps()),
}


def fit_seconds(work: Workload, contender: str) -> float:
    with tempfile.TemporaryDirectory(prefix=f"nnx-fit-{contender}-") as tmp, quiet():
        start = time.perf_counter()
        RUNNERS[contender](work, Path(tmp))
        return time.perf_counter() - start


def measure(work: Workload, repeats: int) -> dict[str, Any]:
    for contender in RUNNERS:  # warm-up: imports, allocator, first-call paths
        fit_seconds(work, contender)
    times: dict[str, list[float]] = {c: [] for c in RUNNERS}
    for r in range(repeats):
        for contender in (list(RUNNERS) if r % 2 == 0 else list(RUNNERS)[::-1]):
            times[contender].append(fit_seconds(work, contender))
    return {"careful_s": statistics.median(times["careful"]),
            "nnx_s": statistics.median(times["nnx"]),
            "ratio": ratio_text(times["nnx"], times["careful"])}


JOB = Path(__file__).with_name("short_fit_job.py")


def job_seconds(python: str, contender: str, flush_ms: float = 0.0) -> tuple[float, float]:
    """(the fit, the whole process) of one short-fit process, in seconds; ``flush_ms``:
    each flush made that much slower (short_fit_job.py's simulated slow disk)."""
    env = {**os.environ, "NNX_BENCH_FLUSH_MS": str(flush_ms)} if flush_ms else None
    with tempfile.TemporaryDirectory(prefix=f"nnx-short-{contender}-") as tmp:
        start = time.perf_counter()
        done = subprocess.run([python, str(JOB), contender, tmp], capture_output=True,
                              text=True, check=False, env=env)
        whole = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{contender} ({python}) failed:\n{done.stderr[-2000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["fit_s"]), whole


def short_case(repeats: int, original: str | None, flush_ms: float = 0.0) -> None:
    pythons = {"plain": sys.executable, "nnx": sys.executable, "nnx-sync": sys.executable}
    if original:
        pythons["original"] = original
    for contender, python in pythons.items():  # warm-up: page cache, bytecode
        job_seconds(python, contender, flush_ms)
    fit: dict[str, list[float]] = {c: [] for c in pythons}
    whole: dict[str, list[float]] = {c: [] for c in pythons}
    for r in range(repeats):
        for contender in (list(pythons) if r % 2 == 0 else list(pythons)[::-1]):
            seconds, process = job_seconds(pythons[contender], contender, flush_ms)
            fit[contender].append(seconds)
            whole[contender].append(process)
    slow = f", each flush {flush_ms:g} ms slower (simulated)" if flush_ms else ""
    print(f"short fit: 20 epochs x 9 steps, LAST and BEST every epoch (medians){slow}")
    for contender in pythons:
        print(f"  {contender:<9} fit {statistics.median(fit[contender]) * 1e3:>7.0f}ms   "
              f"whole process {statistics.median(whole[contender]) * 1e3:>7.0f}ms")
    print(f"  fit  NNx / plain            {ratio_text(fit['nnx'], fit['plain'])}")
    print(f"  fit  NNx sync / plain       {ratio_text(fit['nnx-sync'], fit['plain'])}")
    print(f"  whole NNx / plain           {ratio_text(whole['nnx'], whole['plain'])}")
    if "original" in pythons:
        print(f"  fit  NNx / original         {ratio_text(fit['nnx'], fit['original'])}")
        print(f"  whole NNx / original        {ratio_text(whole['nnx'], whole['original'])}")
    else:
        print("  original NNx: not installed (pass --original PYTHON); column skipped")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--case", choices=("all", "workloads", "short"), default="all")
    parser.add_argument("--original", default=os.environ.get("NNX_ORIGINAL_PYTHON"),
                        help="a Python whose environment has the original NNx 0.4.1")
    parser.add_argument("--flush-ms", type=float, default=0.0,
                        help="short case: make every flush this much slower (a slow disk)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.case in ("all", "workloads"):
        print(f"{'scenario':<34}  {'careful':>9}  {'NNx':>9}  {'NNx / careful (min-max)':>23}")
        for work in (workloads.mlp(), workloads.mlp_val()):
            row = measure(work, args.repeats)
            print(f"{work.title:<34}  {row['careful_s'] * 1e3:>7.0f}ms  "
                  f"{row['nnx_s'] * 1e3:>7.0f}ms  {row['ratio']:>23}")
    if args.case in ("all", "short"):
        short_case(args.repeats, args.original, args.flush_ms)
    print(f"load average: {load()}")


if __name__ == "__main__":
    main()
