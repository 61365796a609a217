"""Negatives from the static complement (spec §26 "Negatives come from the static complement").

The complement is every allowed pair of the ``n``-node graph that is not excluded: in an
undirected split the pairs ``u < v`` (``u <= v`` when self-loops are allowed), in a
directed one every ordered pair ``u != v`` (or all of them). The caller excludes every
positive of every split and, for training negatives, the fixed validation / test
negatives. A request beyond what is left is refused with :class:`LinkCapacityError`
before a single draw, so a failed request consumes no randomness.

Draws use a local ``torch.Generator`` only, never the global RNG: the same seed gives the
same negatives whatever else the process has drawn. Training negatives take a generator
seeded from ``(seed, epoch)`` (:func:`epoch_generator`), so epoch ``e``'s negatives are a
function of the split's seed and ``e`` alone.
"""

from __future__ import annotations

import torch

from nnx.extend import canonical_bytes, sha256_hex
from nnx.link_tasks.edges import canonical, keys, pairs
from nnx.link_tasks.errors import LinkCapacityError

__all__ = ["ENUMERATE_LIMIT", "check_capacity", "epoch_generator", "pair_space",
           "sample_negatives", "seeded_generator"]

#: Up to this many allowed pairs the complement is listed and drawn from exactly; above it,
#: pairs are drawn at random and the excluded ones rejected (a sparse graph's case).
ENUMERATE_LIMIT = 1 << 22


def pair_space(n: int, directed: bool, self_loops: str) -> int:
    """How many pairs an ``n``-node split may hold at all."""
    loops = n if self_loops == "allowed" else 0
    return (n * (n - 1) if directed else n * (n - 1) // 2) + loops


def check_capacity(need: int, *, n: int, directed: bool, self_loops: str, excluded: int,
                   what: str) -> None:
    """Refuse ``need`` negatives when the complement (the pair space less ``excluded``
    pairs) holds fewer; called before any draw."""
    capacity = pair_space(n, directed, self_loops) - excluded
    if need > capacity:
        kind = "directed" if directed else "undirected"
        raise LinkCapacityError(
            f"{what}: {need} negatives requested but the static complement of this {kind} "
            f"{n}-node graph holds only {capacity} pairs ({excluded} excluded, self-loops "
            f"{self_loops}); request fewer negatives per positive")


def seeded_generator(*parts: object) -> torch.Generator:
    """A CPU generator seeded from ``parts`` through the one content digest, so unrelated
    streams (``("val", seed)``, ``("train", seed, epoch)``) never share a seed."""
    digest = sha256_hex(canonical_bytes(["nnx.link_tasks", *parts]))
    return torch.Generator().manual_seed(int(digest[:15], 16))


def epoch_generator(seed: int, epoch: int, stream: str) -> torch.Generator:
    """Epoch ``epoch``'s generator for ``stream`` ("negatives" or "shuffle")."""
    return seeded_generator("train", stream, seed, epoch)


def _allowed_keys(n: int, directed: bool, self_loops: str) -> torch.Tensor:
    offset = 0 if self_loops == "allowed" else 1
    if directed:
        grid = torch.arange(n * n, dtype=torch.long)
        return grid if offset == 0 else grid[grid // n != grid % n]
    upper = torch.triu_indices(n, n, offset=offset)
    return keys(upper, n)


def sample_negatives(count: int, *, n: int, directed: bool, self_loops: str,
                     excluded: torch.Tensor, generator: torch.Generator,
                     what: str) -> torch.Tensor:
    """``count`` distinct canonical pairs (2, count) of the complement of ``excluded``
    (keys of canonical pairs, themselves distinct), drawn with ``generator``."""
    check_capacity(count, n=n, directed=directed, self_loops=self_loops,
                   excluded=int(excluded.numel()), what=what)
    if count == 0:
        return torch.empty(2, 0, dtype=torch.long)
    if pair_space(n, directed, self_loops) <= ENUMERATE_LIMIT:
        allowed = _allowed_keys(n, directed, self_loops)
        free = allowed[~torch.isin(allowed, excluded)]
        chosen = free[torch.randperm(free.numel(), generator=generator)[:count]]
        return pairs(chosen, n)
    chosen = torch.empty(0, dtype=torch.long)
    while chosen.numel() < count:
        # Twice what is missing per round: the complement of a large sparse graph is nearly
        # every pair, so a round or two suffice; order of first appearance is kept.
        draw = torch.randint(0, n, (2, 2 * (count - chosen.numel()) + 16), generator=generator)
        draw = canonical(draw, directed)
        if self_loops != "allowed":
            draw = draw[:, draw[0] != draw[1]]
        key = keys(draw, n)
        key = key[~torch.isin(key, excluded) & ~torch.isin(key, chosen)]
        unique, inverse = torch.unique(key, return_inverse=True)
        first = torch.full((unique.numel(),), key.numel(), dtype=torch.long)
        first.scatter_reduce_(0, inverse, torch.arange(key.numel()), reduce="amin")
        chosen = torch.cat([chosen, key[first.sort().values]])
    return pairs(chosen[:count], n)
