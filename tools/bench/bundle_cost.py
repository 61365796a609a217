"""A run bundle's export + reconstruct against ``torch.save`` + ``torch.load`` of the same state.

One short fit of the FeedFwd MLP (64 → 128 → 128 → 10, Adam, two epochs) gives a run
whose LAST checkpoint both contenders start from, in one process, one thread:

* **bundle** — ``export_bundle(run_id, dir)`` then ``reconstruct_bundle(dir)``: the
  checkpoint read and verified, the state encoded (strict JSON, two safetensors
  payloads), the generation written, flushed and checked, the manifest published; then
  every digest verified and the model rebuilt with its training state;
* **torch** — ``torch.save`` of the same weights and training state (the checkpoint's
  ``state_dict`` and ``training_state()``, read once, untimed) into one file, then
  ``torch.load(weights_only=True)`` of it.

Each round exports into a fresh directory (the previous one is removed untimed).
Rounds interleave the contenders (the order alternates) after an untimed warm-up; the
figure is the median per-round ratio with its min–max (``spread.py``). ``--profile``
prints the bundle contender's cProfile instead (cumulative, top 30).

    uv run python tools/bench/bundle_cost.py [--repeats N] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
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

from nnx import NNCheckpoint, NNTrainParams
from nnx.bundles import export_bundle, reconstruct_bundle
from tools.bench import workloads
from tools.bench.spread import load, ratio_text


def source_run(root: Path) -> str:
    """A two-epoch run of the bench MLP on 512 rows (validation on, so LAST has its
    training state: a "resume" bundle)."""
    x, y = workloads._tabular()
    data = [(x[i:i + 128], y[i:i + 128]) for i in range(0, 512, 128)]
    run = workloads._mlp().train(NNTrainParams(n_epochs=2, train_loader=data, val_loader=data,
                                               seed=0), verbose=False, root=root)
    return str(run.id)


def bundle_round(run_id: str, root: Path, target: Path) -> None:
    export_bundle(run_id, target, root=root)
    reconstruct_bundle(target)


def torch_round(state: dict[str, Any], target: Path) -> None:
    target.mkdir()
    torch.save(state, target / "state.pt")
    torch.load(target / "state.pt", weights_only=True)


def timed(call: Callable[[Path], None], scratch: Path) -> float:
    target = scratch / "out"
    started = time.perf_counter()
    call(target)
    seconds = time.perf_counter() - started
    shutil.rmtree(target)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--profile", action="store_true",
                        help="cProfile the bundle contender instead of timing it")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="nnx-bundle-cost-") as tmp:
        scratch = Path(tmp)
        root = scratch / "runs"
        run_id = source_run(root)
        source = NNCheckpoint.load(run_id, "last", root=root)
        state = {"weights": source.state_dict, "training": source.training_state()}
        contenders: dict[str, Callable[[Path], None]] = {
            "bundle": lambda target: bundle_round(run_id, root, target),
            "torch": lambda target: torch_round(state, target),
        }
        for call in contenders.values():  # warm-up: imports, caches, first-call paths
            timed(call, scratch)
        if args.profile:
            profile = cProfile.Profile()
            for _ in range(args.repeats):
                profile.enable()
                contenders["bundle"](scratch / "out")
                profile.disable()
                shutil.rmtree(scratch / "out")
            pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
            return
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for round_ in range(args.repeats):
            order = list(contenders) if round_ % 2 == 0 else list(contenders)[::-1]
            for name in order:
                times[name].append(timed(contenders[name], scratch))
    print(f"bundle export + reconstruct vs torch.save + torch.load, medians of "
          f"{args.repeats} interleaved rounds")
    for name, values in times.items():
        print(f"  {name:<7}{statistics.median(values) * 1e3:8.2f} ms")
    print(f"  bundle / torch: {ratio_text(times['bundle'], times['torch'])}")
    print(f"  load average: {load()}")


if __name__ == "__main__":
    main()
