"""The group strategy: every group in exactly one split (spec §13.3).

Groups are visited in their seeded order; each goes to the active split
furthest below its row target (n_rows * proportion), ties to the earlier split.
An active split left empty then takes the smallest group of the split holding
the most groups, until none is empty.
"""

from __future__ import annotations

from collections.abc import Sequence

from nnx.data_splits._ids import Key, SplitError, seeded_order
from nnx.data_splits._proportions import SPLITS, Proportions, active

__all__ = ["assign_groups"]


def assign_groups(ids: Sequence[Key], groups: Sequence[Key], proportions: Proportions,
                  seed: int) -> list[list[Key]]:
    """The ids of each split (train, val, test) with every group kept whole."""
    members: dict[Key, list[Key]] = {}
    for sample, group in zip(ids, groups, strict=True):
        members.setdefault(group, []).append(sample)
    splits = active(proportions)
    if len(members) < len(splits):
        names = ", ".join(SPLITS[k] for k in splits)
        raise SplitError(f"the group strategy needs at least one group per active split "
                         f"({names}); got {len(members)} group(s)")
    order = seeded_order(list(members), seed)
    rank = {g: i for i, g in enumerate(order)}
    targets = [len(ids) * p for p in proportions]
    rows = [0, 0, 0]
    placed: list[list[Key]] = [[], [], []]
    for group in order:
        best = max(splits, key=lambda k: (targets[k] - rows[k], -k))
        placed[best].append(group)
        rows[best] += len(members[group])
    _repair(placed, splits, members, rank)
    return [[s for g in placed[k] for s in members[g]] for k in range(3)]


def _repair(placed: list[list[Key]], splits: tuple[int, ...],
            members: dict[Key, list[Key]], rank: dict[Key, int]) -> None:
    """Fill each empty active split with the smallest group of the fullest split."""
    for empty in splits:
        if placed[empty]:
            continue
        # The donor holds >= 2 groups: there are at least as many groups as splits.
        donor = max(splits, key=lambda k: (len(placed[k]), -k))
        group = min(placed[donor], key=lambda g: (len(members[g]), rank[g]))
        placed[donor].remove(group)
        placed[empty].append(group)

