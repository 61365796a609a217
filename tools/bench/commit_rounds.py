"""The epoch commit of this checkout against another's (a baseline), round by round.

Each round runs the same short fit (``--epochs`` × ``--steps``, a validation error that
improves every epoch, so every commit writes the history, LAST, BEST and runs/best; FIRST
on epoch 0) once in each checkout, each in a fresh process with that checkout's own
``.venv`` (the order alternates by round). A child times every ``FitLoop.commit`` and
counts its flushes and renames; the report is the median per-round ratio (this / the
baseline) of the summed commit time with its min–max, of the whole fit's wall time,
and the flushes and renames per commit of each side.

    git -C /work/main worktree add --detach ../before main && (cd ../before && uv sync --locked)
    uv run python tools/bench/commit_rounds.py --baseline ../before [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.bench.spread import load, ratio_text

HERE = Path(__file__).resolve().parents[2]

# Runs in the checkout under test, with its interpreter: only public names and FitLoop.
CHILD = r"""
import json, os, stat, sys, tempfile, time
from pathlib import Path
import torch
torch.set_num_threads(1)
from nnx import NNEvaluationDataPoint, NNTrainParams
from nnx._engine.fit_loop import FitLoop
from nnx.testing import sgd, tiny_batches, tiny_model

epochs, steps = int(sys.argv[1]), int(sys.argv[2])
times, counts, active = [], {"dir flushes": 0, "file flushes": 0, "renames": 0}, [False]

def counted(name, original):
    def call(*args, **kwargs):
        if active[0]:
            if name == "replace":
                counts["renames"] += 1
            else:
                kind = stat.S_ISDIR(os.fstat(args[0]).st_mode)
                counts["dir flushes" if kind else "file flushes"] += 1
        return original(*args, **kwargs)
    return call

for name in ("fsync", "fdatasync", "replace"):
    if hasattr(os, name):
        setattr(os, name, counted(name, getattr(os, name)))
commit = FitLoop.commit

def timed(self, *args, **kwargs):
    active[0] = True
    start = time.perf_counter()
    try:
        return commit(self, *args, **kwargs)
    finally:
        times.append(time.perf_counter() - start)
        active[0] = False

FitLoop.commit = timed
errors = [1.0 / (e + 1) for e in range(epochs)]

def evaluate(ctx):
    return NNEvaluationDataPoint(error=errors[ctx.epoch_idx], loss=errors[ctx.epoch_idx])

with tempfile.TemporaryDirectory() as tmp:
    # The commit's whole work in FitLoop.commit: synchronous where the checkout has the
    # background commit (issue 38), which would otherwise return once staged.
    sync = {"async_commit": False} if "async_commit" in NNTrainParams.__dataclass_fields__ else {}
    params = NNTrainParams(n_epochs=epochs, train_loader=tiny_batches(steps),
                           val_loader=tiny_batches(1, seed=1), optim=sgd(), scheduler=None,
                           seed=0, **sync)
    start = time.perf_counter()
    tiny_model().train(params, eval_step_fn=evaluate, root=Path(tmp) / "runs", verbose=False)
    fit = time.perf_counter() - start
print(json.dumps({"commit_s": sum(times), "fit_s": fit, "commits": len(times),
                  **{k: v / len(times) for k, v in counts.items()}}))
"""


def one_fit(tree: Path, epochs: int, steps: int) -> dict[str, float]:
    python = tree / ".venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    done = subprocess.run([str(python), "-c", CHILD, str(epochs), str(steps)], cwd=tree,
                          capture_output=True, text=True, check=True)
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True,
                        help="another checkout of the repository, with its own .venv")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=9)
    args = parser.parse_args()
    trees = {"this": HERE, "baseline": args.baseline.resolve()}
    for tree in trees.values():  # warm-up: imports, bytecode, page cache
        one_fit(tree, 2, 1)
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for r in range(args.repeats):
        for name in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
            rows[name].append(one_fit(trees[name], args.epochs, args.steps))
    for name, found in rows.items():
        per = statistics.median(f["commit_s"] / f["commits"] for f in found) * 1e3
        print(f"{name:<9} commit {per:.2f} ms (median per commit), fit "
              f"{statistics.median(f['fit_s'] for f in found):.3f} s; per commit: "
              + ", ".join(f"{found[0][k]:.2f} {k}" for k in ("dir flushes", "file flushes",
                                                              "renames")))
    commits = ratio_text([f["commit_s"] for f in rows["this"]],
                         [f["commit_s"] for f in rows["baseline"]])
    fits = ratio_text([f["fit_s"] for f in rows["this"]], [f["fit_s"] for f in rows["baseline"]])
    print(f"this / baseline: commit time {commits}, whole fit {fits}")
    print(f"load average: {load()}")


if __name__ == "__main__":
    main()
