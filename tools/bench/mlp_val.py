"""Scenario 2: the FeedFwd MLP with a validation pass and per-epoch checkpoints.

Plain PyTorch, NNx and Lightning side by side in this process (see harness.py)::

    uv run --group bench python tools/bench/mlp_val.py [--repeats N]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.bench import workloads
from tools.bench.harness import scenario_main

workload = workloads.mlp_val

if __name__ == "__main__":
    scenario_main(workload)
