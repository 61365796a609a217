"""``NeighborLoader``: seeded neighbour sampling on pure torch (spec §13, §14.3).

torch-geometric's own NeighborLoader needs pyg-lib or torch-sparse; this one needs
neither. Each batch is a set of seed nodes and, hop by hop, up to ``num_neighbors[h]``
in-neighbours of the previous hop's new nodes, drawn uniformly without replacement; the
batch's subgraph holds the sampled edges only, relabelled to local rows with the seeds
first, so the net's seed-row slicing scores exactly the seeds.

Every draw (the seed order when ``shuffle``, every neighbour choice) comes from the
loader's own ``generator``, seeded once. A shuffling (training) loader's generator runs
on: core checkpoints and restores it with the other random streams, so a resumed run
draws the batches the straight run would, and across ``train()`` calls it continues
from its last state (§13). A non-shuffling (evaluation) loader reseeds it at the start
of every pass, so every pass scores the same neighbourhoods and validation needs no
state of its own to resume.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from nnx.extend import check_count, check_seed
from nnx.graph.inputs import GraphInputs

__all__ = ["NeighborLoader"]


class NeighborLoader:
    """Batches ``(GraphInputs, y_seed)`` of ``batch_size`` seeds with sampled neighbours."""

    def __init__(self, x: torch.Tensor, edge_index: torch.Tensor, y: torch.Tensor,
                 seeds: torch.Tensor, *, num_neighbors: tuple[int, ...], batch_size: int,
                 shuffle: bool, seed: int) -> None:
        fanouts = tuple(check_count(f"num_neighbors[{i}]", k) for i, k in
                        enumerate(num_neighbors))
        if not fanouts:
            raise ValueError("num_neighbors must give one fan-out per hop (at least one)")
        self.batch_size = check_count("batch_size", batch_size)
        self.num_neighbors, self.shuffle = fanouts, bool(shuffle)
        self.generator = torch.Generator().manual_seed(check_seed("seed", seed))
        self.x, self.y, self.seeds = x, y, seeds
        self._order = seeds
        # In-neighbour lists (CSC): the sources of the edges into node v are
        # src_sorted[ptr[v]:ptr[v + 1]].
        n = int(x.shape[0])
        order = torch.argsort(edge_index[1], stable=True)
        self._src = edge_index[0, order]
        counts = torch.bincount(edge_index[1], minlength=n)
        self._ptr = torch.zeros(n + 1, dtype=torch.long)
        self._ptr[1:] = torch.cumsum(counts, 0)

    def __len__(self) -> int:
        return -(-int(self.seeds.numel()) // self.batch_size)

    def sample_ids(self) -> torch.Tensor:
        """The seed ids of the latest pass in the order it scored them (before any pass,
        the seeds): ``predict_proba(loader)`` reports them (core's ``IdentifiedInputs``)."""
        return self._order

    def __iter__(self) -> Iterator[tuple[GraphInputs, torch.Tensor]]:
        seeds = self.seeds
        if not self.shuffle:
            self.generator.manual_seed(self.generator.initial_seed())
        else:
            seeds = seeds[torch.randperm(seeds.numel(), generator=self.generator)]
        self._order = seeds
        for batch in torch.split(seeds, self.batch_size):
            yield self._subgraph(batch), self.y[batch]

    def _sample(self, frontier: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Up to ``k`` in-neighbours of each frontier node: (sources, their targets)."""
        start, deg = self._ptr[frontier], self._ptr[frontier + 1] - self._ptr[frontier]
        owner = torch.repeat_interleave(torch.arange(frontier.numel()), deg)
        offsets = torch.arange(owner.numel()) - torch.repeat_interleave(
            torch.cumsum(deg, 0) - deg, deg)
        edge = start[owner] + offsets
        # A random key per candidate; sorting by (owner, key) ranks each node's
        # candidates in random order, and the first k of each are kept.
        key = torch.rand(owner.numel(), generator=self.generator)
        by_key = torch.argsort(key)
        by_owner = by_key[torch.argsort(owner[by_key], stable=True)]
        rank = offsets  # owner-sorted positions restart at 0 for each node, as offsets do
        keep = by_owner[rank < k]
        return self._src[edge[keep]], frontier[owner[keep]]

    def _subgraph(self, batch: torch.Tensor) -> GraphInputs:
        local = torch.full((int(self.x.shape[0]),), -1, dtype=torch.long)
        nodes = [batch]
        local[batch] = torch.arange(batch.numel())
        count = batch.numel()
        frontier, sources, targets = batch, [], []
        for k in self.num_neighbors:
            src, dst = self._sample(frontier, k)
            sources.append(src)
            targets.append(dst)
            new = torch.unique(src[local[src] < 0])
            local[new] = torch.arange(count, count + new.numel())
            count += new.numel()
            nodes.append(new)
            frontier = new
        node_ids = torch.cat(nodes)
        edge_index = torch.stack([local[torch.cat(sources)], local[torch.cat(targets)]])
        return GraphInputs(self.x[node_ids], edge_index, torch.arange(batch.numel()), node_ids)
