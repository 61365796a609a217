"""Two generated graph families shared by the graph-classification tests: sparse rings
(class 0) and dense graphs (class 1: a ring plus each other pair with probability 0.7),
4 to 9 nodes, undirected. A node's features are its degree / 4 (the structural signal a
node sees by itself) and noise."""

from __future__ import annotations

import torch

from nnx.graph_tasks import GraphCollection

F = 4


def cycle(n: int) -> torch.Tensor:
    src = torch.arange(n)
    dst = (src + 1) % n
    return torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])


def dense(n: int, g: torch.Generator) -> torch.Tensor:
    ring = torch.zeros(n, n, dtype=torch.bool)
    ring[cycle(n)[0], cycle(n)[1]] = True
    upper = torch.triu((torch.rand(n, n, generator=g) < 0.7) | ring, 1)
    src, dst = (upper | upper.T).nonzero(as_tuple=True)
    return torch.stack([src, dst])


def families(count: int = 40, seed: int = 0, first_id: int = 100) -> GraphCollection:
    """``count`` graphs alternating ring / dense, ids ``first_id, first_id + 1, ...``."""
    g = torch.Generator().manual_seed(seed)
    graphs, targets = [], []
    for i in range(count):
        n = int(torch.randint(4, 10, (1,), generator=g))
        edges = cycle(n) if i % 2 == 0 else dense(n, g)
        x = 0.1 * torch.randn(n, F, generator=g)
        x[:, 0] = torch.bincount(edges[0], minlength=n).float() / 4
        graphs.append((x, edges))
        targets.append(i % 2)
    return GraphCollection(graphs, range(first_id, first_id + count), targets)
