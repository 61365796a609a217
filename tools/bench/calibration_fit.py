"""``nnx.calibration.fit_temperature`` against a hand-written torch LBFGS fit.

Contenders, on the same 20,000 × 10 over-confident logits and targets (seeded), in one
process, one thread:

* **nnx** — ``fit_temperature(logits, targets, labels, ...)``: validation of the split
  and its labels, the float64 search for the NLL's minimum in 1 / T (Newton steps kept
  inside a bracket, module docstring of ``nnx.calibration.fit``), the calibrator with its
  fit record (two more NLL passes);
* **lbfgs** — what one writes by hand: a float32 tensor of the logits, one temperature
  parameter, ``torch.optim.LBFGS`` with the strong-Wolfe line search minimizing
  ``cross_entropy(logits / T, targets)`` until its default tolerances stop it.

Rounds interleave the contenders (the order alternates) after an untimed warm-up; the
figure is the median per-round ratio with its min–max (``spread.py``). Both find the
same temperature: the script prints the two and their relative difference.

    uv run python tools/bench/calibration_fit.py [--rows N] [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from nnx.calibration import fit_temperature
from tools.bench.spread import load, ratio_text

CLASSES = 10
LABELS = tuple(f"class{i}" for i in range(CLASSES))


def split(rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Over-confident logits: a clear signal for the target class, scaled up fourfold."""
    rng = np.random.default_rng(0)
    targets = rng.integers(0, CLASSES, rows)
    logits = (rng.normal(size=(rows, CLASSES)) + 3.0 * np.eye(CLASSES)[targets]) * 4.0
    return logits, targets


def nnx_fit(logits: np.ndarray, targets: np.ndarray) -> float:
    fit = fit_temperature(logits, targets, LABELS, model_id="bench", split_id="calibration",
                          train_split_id="train", test_split_id="test")
    return float(fit.require().temperature)


def lbfgs_fit(logits: np.ndarray, targets: np.ndarray) -> float:
    z = torch.as_tensor(logits, dtype=torch.float32)
    t = torch.as_tensor(targets)
    temperature = torch.ones(1, requires_grad=True)
    optimizer = torch.optim.LBFGS([temperature], line_search_fn="strong_wolfe",
                                  max_iter=100)

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(z / temperature, t)
        loss.backward()  # type: ignore[no-untyped-call]
        return loss

    optimizer.step(closure)  # type: ignore[no-untyped-call]
    return float(temperature.detach())


def timed(fit: Callable[[np.ndarray, np.ndarray], float], logits: np.ndarray,
          targets: np.ndarray) -> tuple[float, float]:
    started = time.perf_counter()
    temperature = fit(logits, targets)
    return time.perf_counter() - started, temperature


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    logits, targets = split(args.rows)
    nnx_fit(logits, targets), lbfgs_fit(logits, targets)  # warm-up, untimed
    ours: list[float] = []
    theirs: list[float] = []
    temperatures = (0.0, 0.0)
    for round_ in range(args.repeats):
        order = [(nnx_fit, ours), (lbfgs_fit, theirs)]
        found = {}
        for fit, sink in order if round_ % 2 == 0 else order[::-1]:
            seconds, found[fit.__name__] = timed(fit, logits, targets)
            sink.append(seconds)
        temperatures = (found["nnx_fit"], found["lbfgs_fit"])
    print(f"fit_temperature on {args.rows:,} x {CLASSES} logits, medians of {args.repeats} "
          "interleaved rounds")
    print(f"  nnx   {statistics.median(ours) * 1e3:8.2f} ms   T = {temperatures[0]:.9f}")
    print(f"  lbfgs {statistics.median(theirs) * 1e3:8.2f} ms   T = {temperatures[1]:.9f}")
    print(f"  nnx / lbfgs: {ratio_text(ours, theirs)}; temperatures differ by "
          f"{abs(temperatures[0] / temperatures[1] - 1):.1e} (relative)")
    print(f"  load average: {load()}")


if __name__ == "__main__":
    main()
