"""The pairwise logistic loss of one query, in bounded blocks (spec §24 "Memory").

For every pair of a query's candidates with unequal grades, ``softplus(-(s_hi - s_lo))``;
ties contribute nothing. The pairs of an n-candidate query are formed ``BLOCK_ROWS`` rows
at a time against all n, so a block holds at most BLOCK_ROWS × n values: memory linear in
the query's size. In training each block is recomputed in backward (activation
checkpointing) rather than kept, so the graph does not hold the n × n pairs either.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

__all__ = ["BLOCK_ROWS", "pair_count", "pairwise_loss", "pairwise_sum", "query_groups"]

BLOCK_ROWS = 256


def pair_count(grades: torch.Tensor) -> int:
    """How many ordered (higher, lower) grade pairs the query has."""
    per_grade = torch.bincount(grades)
    below = torch.cumsum(per_grade, 0) - per_grade
    return int((per_grade * below).sum())


def _block(scores_hi: torch.Tensor, grades_hi: torch.Tensor, scores: torch.Tensor,
           grades: torch.Tensor) -> torch.Tensor:
    above = grades_hi[:, None] > grades[None, :]
    margins = scores_hi[:, None] - scores[None, :]
    return torch.where(above, F.softplus(-margins), margins.new_zeros(())).sum()


def pairwise_sum(scores: torch.Tensor, grades: torch.Tensor) -> torch.Tensor:
    """Σ softplus(-(s_hi − s_lo)) over the query's unequal pairs, a differentiable scalar
    in the scores' dtype."""
    grades = grades.to(scores.device)
    n = int(scores.shape[0])
    if n <= BLOCK_ROWS:
        return _block(scores, grades, scores, grades)
    recompute = torch.is_grad_enabled() and scores.requires_grad
    total = scores.new_zeros(())
    for start in range(0, n, BLOCK_ROWS):
        hi = slice(start, start + BLOCK_ROWS)
        if recompute:
            part = checkpoint(_block, scores[hi], grades[hi], scores, grades,
                              use_reentrant=False)
        else:
            part = _block(scores[hi], grades[hi], scores, grades)
        total = total + part
    return total


def query_groups(query_ids: list[Any]) -> list[list[int]]:
    """Each query's positions in ``query_ids``, queries in first-seen order."""
    groups: dict[Any, list[int]] = {}
    for i, q in enumerate(query_ids):
        groups.setdefault(q, []).append(i)
    return list(groups.values())


def pairwise_loss(scores: torch.Tensor, grades: torch.Tensor, groups: list[list[int]], *,
                  weighting: str) -> tuple[torch.Tensor, float]:
    """(numerator, denominator) of the pairwise logistic loss over ``groups``.

    ``"query"``: each query with an unequal pair weighs the same (its pair mean, over the
    number of such queries); ``"pair"``: every pair does (the sum over the pair count). A
    query without an unequal pair is skipped; no pair at all gives (0, 0), a masked term.
    """
    numerator = scores.new_zeros(())
    denominator = 0
    for rows in groups:
        g = grades[rows]
        pairs = pair_count(g)
        if pairs == 0:
            continue
        index = torch.as_tensor(rows, device=scores.device)
        total = pairwise_sum(scores.index_select(0, index), g)
        if weighting == "query":
            numerator, denominator = numerator + total / pairs, denominator + 1
        else:
            numerator, denominator = numerator + total, denominator + pairs
    return numerator, float(denominator)
