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

``--against DIR`` measures another checkout's NNx (DIR holds its ``.venv`` and this
script) in the same rounds: this script runs there as a worker (``--serve``, one
round per request), and each round runs both checkouts' contenders back to back, the
order alternating, so "before" and "after" meet the same load.

    uv run python tools/bench/bundle_cost.py [--repeats N] [--profile] [--against DIR]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
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


class Worker:
    """This script in another checkout, serving rounds (``--serve``) over a pipe."""

    def __init__(self, checkout: Path) -> None:
        self.process = subprocess.Popen(
            [str(checkout / ".venv" / "bin" / "python"),
             str(checkout / "tools" / "bench" / "bundle_cost.py"), "--serve"],
            cwd=checkout, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        # Its setup and warm-up done before the first round: never beside a timed one.
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the worker in {checkout} did not start")

    def round(self, index: int) -> dict[str, float]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{index}\n")
        self.process.stdin.flush()
        bundle, torch_s = self.process.stdout.readline().split()
        return {"bundle": float(bundle), "torch": float(torch_s)}

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def timed(call: Callable[[Path], None], scratch: Path) -> float:
    target = scratch / "out"
    started = time.perf_counter()
    call(target)
    seconds = time.perf_counter() - started
    shutil.rmtree(target)
    return seconds


def one_round(contenders: dict[str, Callable[[Path], None]], scratch: Path,
              index: int) -> dict[str, float]:
    order = list(contenders) if index % 2 == 0 else list(contenders)[::-1]
    return {name: timed(contenders[name], scratch) for name in order}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--profile", action="store_true",
                        help="cProfile the bundle contender instead of timing it")
    parser.add_argument("--against", type=Path, default=None,
                        help="another checkout to measure in the same rounds")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
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
        if args.serve:
            print("ready", flush=True)
            for line in sys.stdin:
                times = one_round(contenders, scratch, int(line))
                print(f"{times['bundle']} {times['torch']}", flush=True)
            return
        if args.profile:
            profile = cProfile.Profile()
            for _ in range(args.repeats):
                profile.enable()
                contenders["bundle"](scratch / "out")
                profile.disable()
                shutil.rmtree(scratch / "out")
            pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
            return
        worker = None if args.against is None else Worker(args.against.resolve())
        runs: dict[str, list[dict[str, float]]] = {"this": [], "other": []}
        for index in range(args.repeats):
            sides = ["this", "other"] if worker is not None else ["this"]
            for side in sides if index % 2 == 0 else sides[::-1]:
                runs[side].append(one_round(contenders, scratch, index) if side == "this"
                                  else worker.round(index))  # type: ignore[union-attr]
        if worker is not None:
            worker.close()
    print(f"bundle export + reconstruct vs torch.save + torch.load, medians of "
          f"{args.repeats} interleaved rounds")
    for side, rounds in runs.items():
        if not rounds:
            continue
        name = "this checkout" if side == "this" else f"{args.against}"
        bundle, torch_s = [r["bundle"] for r in rounds], [r["torch"] for r in rounds]
        print(f"  {name}: bundle {statistics.median(bundle) * 1e3:.2f} ms, torch "
              f"{statistics.median(torch_s) * 1e3:.2f} ms, bundle / torch "
              f"{ratio_text(bundle, torch_s)}")
    if runs["other"]:
        print("  bundle, this / other: " + ratio_text([r["bundle"] for r in runs["this"]],
                                                        [r["bundle"] for r in runs["other"]]))
    print(f"  load average: {load()}")


if __name__ == "__main__":
    main()
