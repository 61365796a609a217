"""Edge keys: one integer per ordered node pair, the manifest's unit of comparison.

A pair ``(u, v)`` of an ``n``-node graph is the key ``u * n + v``. An undirected split
stores each edge canonically, ``(min, max)``, so an edge and its reverse share one key;
a directed split keeps ``u -> v`` and ``v -> u`` as two keys. Set tests (is this pair a
positive? a fixed negative? a message edge?) are ``torch.isin`` over keys.
"""

from __future__ import annotations

import torch

from nnx.link_tasks.errors import LinkSplitError

__all__ = ["canonical", "check_edge_index", "keys", "pairs", "reversed_pairs"]


def check_edge_index(edge_index: object, n: int, what: str) -> torch.Tensor:
    """``edge_index`` as a (2, E) int64 CPU tensor of node ids in ``[0, n)``."""
    if not isinstance(edge_index, torch.Tensor) or edge_index.ndim != 2 or \
            edge_index.shape[0] != 2 or edge_index.is_floating_point() or \
            edge_index.dtype == torch.bool or edge_index.is_complex():
        shape = tuple(edge_index.shape) if isinstance(edge_index, torch.Tensor) else \
            type(edge_index).__name__
        raise LinkSplitError(f"{what} must be an integer tensor of shape (2, E); got {shape}")
    out = edge_index.detach().to("cpu", torch.long)
    if out.numel() and (int(out.min()) < 0 or int(out.max()) >= n):
        raise LinkSplitError(f"{what} names a node outside [0, {n}): ids span "
                             f"[{int(out.min())}, {int(out.max())}]")
    return out


def canonical(edge_index: torch.Tensor, directed: bool) -> torch.Tensor:
    """Undirected: every pair as ``(min, max)``; directed: unchanged."""
    if directed:
        return edge_index
    return torch.stack([edge_index.min(dim=0).values, edge_index.max(dim=0).values])


def keys(edge_index: torch.Tensor, n: int) -> torch.Tensor:
    """One int64 key per column of ``edge_index``."""
    return edge_index[0] * n + edge_index[1]


def pairs(key: torch.Tensor, n: int) -> torch.Tensor:
    """The (2, K) pairs of ``key`` (the inverse of :func:`keys`)."""
    return torch.stack([torch.div(key, n, rounding_mode="floor"), key % n])


def reversed_pairs(edge_index: torch.Tensor) -> torch.Tensor:
    """Each column's reverse, self-loops dropped (a self-loop is its own reverse)."""
    off = edge_index[0] != edge_index[1]
    return edge_index[:, off].flip(0)
