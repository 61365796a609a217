"""Top-10 search over an exported corpus: the FAISS index ``export_to_faiss`` writes
against a brute-force ``torch.topk(q @ docs.T)`` on the same embeddings.

The corpus is ``--vectors`` unit rows of ``--dim`` floats (seeded, default 100k × 64, what
``embed_texts`` returns) drawn around ``--clusters`` random centres (default 1000, as
topical text embeddings cluster; ``--clusters 0``: uniform on the sphere, HNSW's hardest
case), the queries likewise; exported through ``nnx.embeddings.build_index`` as the
export does (flat, and HNSW with the export's defaults); ``--queries`` query rows
(default 256) search it. Contenders, one process, one thread:

* **torch** — ``torch.topk(q @ docs.T, 10)``: what a caller without FAISS writes;
* **flat** — ``IndexFlat(inner product).search(q, 10)`` (exact: its ids are checked equal
  to torch's before timing);
* **hnsw** — ``IndexHNSWFlat`` (M 32, efConstruction 200, efSearch 128) ``.search`` (its
  recall@10 against torch is printed).

Rounds interleave the contenders (the order alternates) after an untimed warm-up; the
figures are the median per-round ratios FAISS / torch with min–max (``spread.py``).

    uv run python tools/bench/faiss_search.py [--vectors N] [--dim D] [--queries Q] [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import torch

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from nnx.embeddings.faiss_export import build_index
from tools.bench.spread import interleaved, load, ratio_text

K = 10


def rows(n: int, dim: int, centres: torch.Tensor | None, g: torch.Generator) -> torch.Tensor:
    noise = torch.randn(n, dim, generator=g)
    if centres is not None:
        pick = torch.randint(len(centres), (n,), generator=g)
        noise = centres[pick] + 1.2 * noise / dim ** 0.5  # spread ~1.2 around a unit centre
    return torch.nn.functional.normalize(noise, dim=1)


def setup(vectors: int, dim: int, queries: int,
          clusters: int) -> tuple[dict[str, Callable[[], Any]], float]:
    g = torch.Generator().manual_seed(0)
    centres = (torch.nn.functional.normalize(torch.randn(clusters, dim, generator=g), dim=1)
               if clusters else None)
    docs, q = rows(vectors, dim, centres, g), rows(queries, dim, centres, g)
    x, qn = docs.numpy(), q.numpy()
    flat = build_index(faiss, x, "flat", "inner_product", hnsw_m=32, ef_construction=200,
                       ef_search=128)
    hnsw = build_index(faiss, x, "hnsw", "inner_product", hnsw_m=32, ef_construction=200,
                       ef_search=128)
    sides: dict[str, Callable[[], Any]] = {
        "torch": lambda: torch.topk(q @ docs.T, K, dim=1).indices.numpy(),
        "flat": lambda: flat.search(qn, K)[1],
        "hnsw": lambda: hnsw.search(qn, K)[1],
    }
    exact, by_flat, by_hnsw = sides["torch"](), sides["flat"](), sides["hnsw"]()
    if not np.array_equal(exact, by_flat):
        raise SystemExit("flat FAISS top-10 differs from torch.topk")
    recall = float(np.mean([len(set(a) & set(b)) / K
                            for a, b in zip(exact, by_hnsw, strict=True)]))
    return sides, recall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--queries", type=int, default=256)
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    sides, recall = setup(args.vectors, args.dim, args.queries, args.clusters)
    times = interleaved(sides, args.repeats)
    print(f"top-{K} of {args.queries} queries over {args.vectors} × {args.dim} unit vectors, "
          f"{args.clusters or 'no'} clusters ({args.repeats} rounds; load {load()}; "
          f"HNSW recall@{K} {recall:.3f})")
    for name, values in times.items():
        print(f"  {name:<6} median {statistics.median(values) * 1e3:9.2f} ms")
    print(f"  flat / torch: {ratio_text(times['flat'], times['torch'])}")
    print(f"  hnsw / torch: {ratio_text(times['hnsw'], times['torch'])}")


if __name__ == "__main__":
    main()
