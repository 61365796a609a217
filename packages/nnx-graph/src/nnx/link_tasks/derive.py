"""Deriving an edge split from a graph: what ``split_links`` / ``LinkSplit.replay`` build.

The edges are canonicalised (undirected: ``(min, max)``) and de-duplicated first, so a
duplicate, or in an undirected split a reverse, can never land in two splits; barred
self-loops are dropped there too (the manifest's ``request`` counts what was dropped). The
unique edges, in key order, are permuted by a local generator seeded from ``seed`` and cut
into validation, test and training positives; then the fixed validation and test negatives
are drawn from the static complement, after a capacity check covering them and every
epoch's training negatives. The global RNG is never read, so ``replay`` re-derives the same
split from the same edges anywhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import torch

from nnx.extend import UNIT_HALF_OPEN, check_choice, check_count, check_real, check_seed
from nnx.link_tasks.edges import canonical, check_edge_index, keys, pairs
from nnx.link_tasks.errors import LinkSplitError
from nnx.link_tasks.negatives import check_capacity, sample_negatives, seeded_generator

__all__ = ["derive_split"]


def _unique(edge_index: torch.Tensor, n: int, directed: bool, self_loops: str,
            labels: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None, int, int]:
    """Canonical unique keys (sorted), their labels, and how many duplicates and barred
    self-loops were dropped."""
    edges = canonical(edge_index, directed)
    loops = 0
    if self_loops == "barred":
        keep = edges[0] != edges[1]
        loops = int((~keep).sum())
        edges = edges[:, keep]
        labels = None if labels is None else labels[keep]
    key = keys(edges, n)
    unique, inverse = torch.unique(key, return_inverse=True)
    if labels is None:
        return unique, None, key.numel() - unique.numel(), loops
    first = torch.full((unique.numel(),), -1, dtype=torch.long)
    first.scatter_(0, inverse, labels)
    if bool((first[inverse] != labels).any()):
        col = int(torch.nonzero(first[inverse] != labels)[0])
        raise LinkSplitError(f"the edge ({int(edges[0, col])}, {int(edges[1, col])}) is listed "
                             "with two categories")
    return unique, first, key.numel() - unique.numel(), loops


def derive_split(edge_index: torch.Tensor, n: int, *, val: float, test: float, seed: int,
                 directed: bool, self_loops: str, negatives: int | None,
                 categories: Sequence[str] | None, labels: Any,
                 label_existence: str | None) -> dict[str, Any]:
    """The ``LinkSplit`` keyword arguments of ``split_links`` (which documents them)."""
    n = check_count("split_links n", n)
    val = check_real("split_links val", val, UNIT_HALF_OPEN)
    test = check_real("split_links test", test, UNIT_HALF_OPEN)
    if val + test >= 1:
        raise LinkSplitError(f"val + test must leave training edges; got {val} + {test}")
    seed = check_seed("split_links seed", seed)
    check_choice("split_links self_loops", self_loops, ("barred", "allowed"))
    if not isinstance(directed, bool):
        raise LinkSplitError(f"split_links directed must be a bool; got {directed!r}")
    edge_index = check_edge_index(edge_index, n, "edge_index")
    label_tensor = None
    if labels is not None:
        label_tensor = torch.as_tensor(labels)
        if label_tensor.is_floating_point() or label_tensor.shape != (edge_index.shape[1],):
            raise LinkSplitError(f"labels must be one integer category per edge "
                                 f"({edge_index.shape[1]}); got shape "
                                 f"{tuple(label_tensor.shape)}")
        label_tensor = label_tensor.to(torch.long)
    if (categories is None) != (labels is None):
        raise LinkSplitError("an edge-label split needs both categories= and labels=")
    if negatives is None:
        negatives = 0 if categories is not None else 1
    negatives = check_count("split_links negatives", negatives, minimum=0)
    unique, unique_labels, duplicates, loops = _unique(edge_index, n, directed, self_loops,
                                                       label_tensor)
    total = unique.numel()
    # Exact decimal fractions: 0.29 of 100 edges is 29, where float rounding gives 28.
    n_val = math.floor(Fraction(repr(val)) * total)
    n_test = math.floor(Fraction(repr(test)) * total)
    need = negatives * total  # the fixed val / test negatives plus one epoch's training ones
    check_capacity(need, n=n, directed=directed, self_loops=self_loops, excluded=total,
                   what="split_links")
    order = torch.randperm(total, generator=seeded_generator("split", seed))
    cuts = {"val": order[:n_val], "test": order[n_val:n_val + n_test],
            "train": order[n_val + n_test:]}
    chosen = {role: index.sort().values for role, index in cuts.items()}
    positives = {role: pairs(unique[index], n) for role, index in chosen.items()}
    fixed = {}
    excluded = unique
    for role in ("val", "test"):
        drawn = sample_negatives(negatives * positives[role].shape[1], n=n, directed=directed,
                                 self_loops=self_loops, excluded=excluded,
                                 generator=seeded_generator(role, seed),
                                 what=f"the {role} negatives")
        fixed[role] = drawn
        excluded = torch.cat([excluded, keys(drawn, n)])
    request = {"val": val, "test": test, "edges": int(edge_index.shape[1]),
               "duplicates_dropped": duplicates, "self_loops_dropped": loops}
    return dict(n=n, train=positives["train"], val=positives["val"], test=positives["test"],
                val_negatives=fixed["val"], test_negatives=fixed["test"], directed=directed,
                self_loops=self_loops, seed=seed, negatives=negatives, categories=categories,
                labels=None if unique_labels is None
                else {role: unique_labels[index] for role, index in chosen.items()},
                label_existence=label_existence, request=request)
