"""A whole fit, setup to return: NNx against a careful hand-written loop.

The careful loop is harness.py's plain loop itself (same net, data, Adam, seeds,
``DataLoader``, validation pass) whose per-epoch saves are durable: LAST each epoch and BEST when
validation improves, each with ``torch.save`` + ``fsync`` + rename + directory
``fsync`` (commit_cost.careful_save). NNx is ``NNModel.train`` as in harness.py:
the run's reservation, run.yaml and metadata.yaml, the history, LAST, BEST and
runs/best. The wall time of each whole fit is measured; rounds are interleaved
(the order alternates) after one untimed warm-up round, and the report is the
median of each contender and the median of the per-round ratios.

    uv run python tools/bench/whole_fit.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
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
from tools.bench.commit_cost import careful_save
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{'scenario':<34}  {'careful':>9}  {'NNx':>9}  {'NNx / careful (min-max)':>23}")
    for work in (workloads.mlp(), workloads.mlp_val()):
        row = measure(work, args.repeats)
        print(f"{work.title:<34}  {row['careful_s'] * 1e3:>7.0f}ms  {row['nnx_s'] * 1e3:>7.0f}ms  "
              f"{row['ratio']:>23}")
    print(f"load average: {load()}")


if __name__ == "__main__":
    main()
