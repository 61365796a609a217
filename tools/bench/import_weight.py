"""Import weight: what ``import nnx; nnx.NNModel`` and a tiny fit load, and how long it takes.

Two scenarios, each run in fresh interpreters (``python -c``, so nothing is cached in the
process; the OS's file cache is warm after the first untimed run):

* **import** — ``import nnx; nnx.NNModel``;
* **fit** — the same, then a plain one-epoch fit: ``NNModel(net_params=NNParams(...))
  .train(NNTrainParams(...))`` on 32 random rows in a temporary root, no validation.

For each, the modules loaded beyond ``import torch`` (torch is imported first and
``sys.modules`` snapshotted, so torch's own weight is not counted), how many of them are
nnx's own, and the wall time from after ``import torch`` to the end of the scenario:
the median over ``--repeats`` fresh processes with its min–max (the two scenarios'
processes alternate), and the process's CPU time over the same span (``process_time``:
what a busy shared machine moves least). ``--list`` prints the nnx modules each scenario loads.
For a per-module breakdown: ``python -X importtime -c "import torch, nnx; nnx.NNModel"``.

``--baseline PYTHON`` measures another environment's interpreter in the same rounds (a
checkout of main with its own ``.venv``: ``--baseline ../main/.venv/bin/python``), the
two interleaved (the order alternates), and prints this tree's time over the baseline's:
the median per-round ratio with its min–max (``spread.py``).

    uv run python tools/bench/import_weight.py [--repeats N] [--list] [--baseline PYTHON]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.bench.spread import load, ratio_text

_PRELUDE = """\
import json, sys, time
import torch
base = set(sys.modules)
start, cpu = time.perf_counter(), time.process_time()
import nnx
nnx.NNModel
"""

_FIT = """\
import tempfile
from torch.utils.data import DataLoader, TensorDataset
from nnx import NNModel, NNOptimParams, NNParams, NNTrainParams
g = torch.Generator().manual_seed(0)
rows = TensorDataset(torch.randn(32, 4, generator=g), torch.randint(0, 3, (32,), generator=g))
with tempfile.TemporaryDirectory() as root:
    NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,))).train(
        NNTrainParams(n_epochs=1, train_loader=DataLoader(rows, batch_size=16),
                      optim=NNOptimParams.builder().adamw(max_lr=1e-3).build(), seed=0),
        root=root, verbose=False)
"""

_REPORT = """\
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
new = sorted(set(sys.modules) - base)
print(json.dumps({"seconds": seconds, "cpu": cpu, "modules": new}))
"""

#: Scenario name -> the code run in a fresh interpreter (it prints one JSON line).
SCENARIOS = {
    "import": _PRELUDE + _REPORT,
    "fit": _PRELUDE + _FIT + _REPORT,
}


def probe(scenario: str, python: str = sys.executable) -> dict[str, object]:
    """One fresh interpreter's run of a scenario: its wall seconds and new modules."""
    done = subprocess.run([python, "-c", SCENARIOS[scenario]], capture_output=True,
                          text=True, check=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def nnx_modules(modules: list[str]) -> list[str]:
    return [m for m in modules if m == "nnx" or m.startswith("nnx.")]


def _ms(seconds: list[float]) -> str:
    ms = [x * 1e3 for x in seconds]
    return f"{statistics.median(ms):7.1f} ms ({min(ms):.1f}–{max(ms):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--list", action="store_true", help="print the nnx modules loaded")
    parser.add_argument("--baseline", metavar="PYTHON",
                        help="another environment's interpreter, measured interleaved")
    args = parser.parse_args()
    trees = {"this tree": sys.executable}
    if args.baseline:
        trees["baseline"] = args.baseline
    runs = [(tree, scenario) for scenario in SCENARIOS for tree in trees]
    for tree, scenario in runs:  # warm-up: bytecode caches and the OS's file cache
        probe(scenario, trees[tree])
    seconds: dict[tuple[str, str], list[float]] = {run: [] for run in runs}
    cpu: dict[tuple[str, str], list[float]] = {run: [] for run in runs}
    modules: dict[tuple[str, str], list[str]] = {}
    for round_ in range(args.repeats):
        for run in runs if round_ % 2 == 0 else runs[::-1]:
            result = probe(run[1], trees[run[0]])
            seconds[run].append(float(result["seconds"]))  # type: ignore[arg-type]
            cpu[run].append(float(result["cpu"]))  # type: ignore[arg-type]
            modules[run] = list(result["modules"])  # type: ignore[call-overload]
    print(f"modules loaded beyond `import torch`, and wall / CPU ms after it: median of "
          f"{args.repeats} fresh processes (min–max)")
    for tree, scenario in runs:
        loaded = modules[tree, scenario]
        label = f"{scenario}, {tree}" if args.baseline else scenario
        print(f"  {label:<20} {len(loaded):4d} modules ({len(nnx_modules(loaded)):3d} nnx)   "
              f"wall {_ms(seconds[tree, scenario])}   cpu {_ms(cpu[tree, scenario])}")
    if args.baseline:
        for scenario in SCENARIOS:
            print(f"  {scenario}: this tree / baseline, wall "
                  f"{ratio_text(seconds['this tree', scenario], seconds['baseline', scenario])}"
                  f", cpu {ratio_text(cpu['this tree', scenario], cpu['baseline', scenario])}")
    print(f"  load average: {load()}")
    if args.list:
        for tree, scenario in runs:
            print(f"\nnnx modules, {scenario}, {tree}:")
            print("\n".join(f"  {m}" for m in nnx_modules(modules[tree, scenario])))


if __name__ == "__main__":
    main()
