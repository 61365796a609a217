"""NDCG@10 over a whole validation stream: nnx-ranking's ``ranking_metrics`` against
torchmetrics' ``RetrievalNormalizedDCG``.

The stream is 10k queries × 100 candidates by default (``--queries`` / ``--candidates``),
seeded, grades 0..3, float scores with no ties. Contenders, in one process, one thread:

* **nnx** — ``ranking_metrics(query_ids, candidate_ids, grades, scores, ks=(10,))`` on
  the buffered stream as ``RankingTask.eval_step()`` holds it: the ids as host lists of
  Python ints, the grades and the float64 scores as arrays (MRR@10 and Recall@10 come
  with it);
* **torchmetrics** — ``RetrievalNormalizedDCG(top_k=10)`` given the scores, the gains
  ``2^rel − 1`` as its targets (its gain is linear, so the values agree) and the query
  index tensor, ``update`` then ``compute``.

The two values are checked equal (1e-6) before timing. Rounds interleave the contenders
(the order alternates) after an untimed warm-up; the figure is the median per-round ratio
nnx / torchmetrics with its min–max (``spread.py``). Target: ≤ 0.2.

    uv run python tools/bench/ranking_eval.py [--queries N] [--candidates N] [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torchmetrics.retrieval import RetrievalNormalizedDCG

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from nnx.ranking import ranking_metrics
from tools.bench.spread import load, ratio_text

K = 10


def setup(queries: int, candidates: int) -> dict[str, Callable[[], float]]:
    rng = np.random.default_rng(0)
    rows = queries * candidates
    query = np.repeat(np.arange(queries), candidates)
    grades = rng.integers(0, 4, size=rows)
    grades[::candidates] = 1  # every query has a relevant candidate: torchmetrics scores all
    scores = rng.normal(size=rows)
    query_ids, candidate_ids = query.tolist(), np.tile(np.arange(candidates), queries).tolist()
    preds, gains = torch.from_numpy(scores), torch.from_numpy(np.exp2(grades) - 1.0)
    indexes = torch.from_numpy(query)

    def nnx_side() -> float:
        return ranking_metrics(query_ids, candidate_ids, grades, scores, ks=(K,))[f"ndcg_at_{K}"]

    def torchmetrics_side() -> float:
        metric = RetrievalNormalizedDCG(top_k=K)
        metric.update(preds, gains, indexes=indexes)
        return float(metric.compute())

    return {"nnx": nnx_side, "torchmetrics": torchmetrics_side}


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    sides = setup(args.queries, args.candidates)
    ours, theirs = sides["nnx"](), sides["torchmetrics"]()  # the warm-up, and the check
    if abs(ours - theirs) > 1e-6:
        raise SystemExit(f"NDCG@{K} disagrees: nnx {ours!r}, torchmetrics {theirs!r}")
    times: dict[str, list[float]] = {name: [] for name in sides}
    for i in range(args.repeats):
        order = list(sides) if i % 2 == 0 else list(reversed(sides))
        for name in order:
            times[name].append(timed(sides[name]))
    print(f"NDCG@{K}, {args.queries} queries × {args.candidates} candidates "
          f"(value {ours:.6f}; {args.repeats} rounds; load {load()})")
    for name, values in times.items():
        print(f"  {name:<13} median {statistics.median(values) * 1e3:9.1f} ms")
    print(f"  nnx / torchmetrics: {ratio_text(times['nnx'], times['torchmetrics'])}")


if __name__ == "__main__":
    main()
