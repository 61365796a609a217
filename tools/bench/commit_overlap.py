"""How much of the epoch commit the training thread waits for: the short fit
(short_fit_job.py) in this one process, with the background commit and with
``async_commit=False``, after a warm-up fit; per fit, the time spent in
``FitLoop.commit`` (what the training thread waits for), in ``EpochCommit.stage``
(its share of it) and in ``EpochCommit.write`` (the writer's own time).

    uv run python tools/bench/commit_overlap.py [--repeats N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from nnx._engine import epoch_commit
from nnx._engine.fit_loop import FitLoop
from tools.bench.short_fit_job import nnx_fit
from tools.bench.spread import load

SPENT = {"commit": 0.0, "stage": 0.0, "write": 0.0}


def _timed(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            SPENT[name] += time.perf_counter() - start

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(1)
    FitLoop.commit = _timed("commit", FitLoop.commit)  # type: ignore[method-assign]
    commit = epoch_commit.EpochCommit
    commit.stage = _timed("stage", commit.stage)  # type: ignore[method-assign]
    commit.write = _timed("write", commit.write)  # type: ignore[method-assign]
    for r in range(args.repeats + 1):  # round 0 warms up
        for background in ((True, False) if r % 2 == 0 else (False, True)):
            SPENT.update(dict.fromkeys(SPENT, 0.0))
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                nnx_fit(Path(tmp), async_commit=background)
                fit = time.perf_counter() - start
            if r:
                print(f"{'background' if background else 'sync':<10}  fit {fit * 1e3:5.0f} ms  "
                      f"in commit {SPENT['commit'] * 1e3:4.0f} ms  "
                      f"(staging {SPENT['stage'] * 1e3:3.0f} ms)  "
                      f"writing {SPENT['write'] * 1e3:4.0f} ms")
    print(f"load average: {load()}")


if __name__ == "__main__":
    main()
