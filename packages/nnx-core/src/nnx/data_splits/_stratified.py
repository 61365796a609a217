"""The stratified strategy: per class, seeded ranks cut by the largest remainder.

Classes are visited in their canonical order. A class of n rows asks each active
split for ``n * proportion + carry`` rows; the floors (never below 0) are
topped up, largest remainder first (ties to the earlier split), until the class
is spent, and what each split got more or less than it asked for is carried to
the next class, so the totals follow the proportions within one row per split.
The one-row minimum runs after the carry: a class with no row in an active
split moves one row there from its own largest split, which changes that
class alone and never the carry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from nnx._foundation.hashing import canonical_bytes
from nnx.data_splits._ids import Key, SplitError, seeded_order
from nnx.data_splits._proportions import SPLITS, Proportions, active

__all__ = ["INSUFFICIENT", "assign_stratified", "class_counts"]

INSUFFICIENT = ("raise", "train")


def class_counts(sizes: Sequence[int], proportions: Proportions) -> list[list[int]]:
    """Rows per split for classes of ``sizes`` rows (in visiting order), minimum applied."""
    splits = active(proportions)
    carry = [Fraction(0)] * 3
    counts: list[list[int]] = []
    for n in sizes:
        asked = [n * proportions[k] + carry[k] if k in splits else Fraction(0)
                 for k in range(3)]
        got = [max(0, math.floor(q)) for q in asked]
        for k in sorted(splits, key=lambda k: (-(asked[k] - got[k]), k))[:n - sum(got)]:
            got[k] += 1
        carry = [asked[k] - got[k] for k in range(3)]
        counts.append(_with_minimum(got, splits))
    return counts


def _with_minimum(got: list[int], splits: tuple[int, ...]) -> list[int]:
    out = list(got)
    for k in splits:
        if out[k] == 0:
            donor = max(splits, key=lambda j: (out[j], -j))
            out[donor] -= 1
            out[k] += 1
    return out


def assign_stratified(ids: Sequence[Key], labels: Sequence[Any], proportions: Proportions,
                      seed: int, insufficient: str) -> tuple[list[list[Key]], list[Any]]:
    """The ids of each split, and the labels kept in training only (``insufficient="train"``)."""
    by_class: dict[bytes, tuple[Any, list[Key]]] = {}
    for sample, label in zip(ids, labels, strict=True):
        by_class.setdefault(canonical_bytes(label), (label, []))[1].append(sample)
    splits = active(proportions)
    placed: list[list[Key]] = [[], [], []]
    train_only: list[Any] = []
    visited: list[list[Key]] = []
    for key in sorted(by_class):
        label, members = by_class[key]
        if len(members) >= len(splits):
            visited.append(members)
        elif insufficient == "train":
            train_only.append(label)
            placed[0].extend(members)
        else:
            names = ", ".join(SPLITS[k] for k in splits)
            raise SplitError(
                f"class {label!r} has {len(members)} row(s), fewer than the {len(splits)} "
                f"active splits ({names}); pass insufficient='train' to keep it in training")
    counts = class_counts([len(m) for m in visited], proportions)
    for members, count in zip(visited, counts, strict=True):
        ranked = seeded_order(members, seed)
        start = 0
        for k in range(3):
            placed[k].extend(ranked[start:start + count[k]])
            start += count[k]
    return placed, train_only
